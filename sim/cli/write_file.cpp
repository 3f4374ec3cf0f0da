#include "sim/cli/write_file.hpp"

#include <fstream>
#include <stdexcept>

namespace moesim::cli {

void write_file(const std::filesystem::path& path, const std::string& text) {
  write_file(path, [&](std::ostream& out) { out << text; });
}

void write_file(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    write(out);
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace moesim::cli
