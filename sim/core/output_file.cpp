#include "sim/core/output_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <unistd.h>

#include "sim/core/error.hpp"

namespace moesim {

namespace fs = std::filesystem;

void write_file(const fs::path& path, const std::string& text) {
  write_file(path, [&](std::ostream& out) { out.write(text.data(), static_cast<std::streamsize>(text.size())); });
}

void write_file(const fs::path& path, const std::function<void(std::ostream&)>& write) {
  const fs::path tmp = path.string() + ".tmp";
  std::error_code ec;
  const auto fail = [&](int err) {
    fs::remove(tmp, ec);
    throw OutputError(fmt::format("cannot write {}: {}", path.string(), err ? std::strerror(err) : "the write failed"));
  };
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) fail(errno);
    errno = 0;
    write(out);
    out.flush();
    if (!out) fail(errno);
    out.close();
    if (!out) fail(errno);
  }
  fs::rename(tmp, path, ec);
  if (ec) fail(ec.value());
}

bool prepare_output_folder(const fs::path& folder, const std::string& flag) {
  const std::string name = folder.string();
  std::error_code ec;
  const auto status = fs::status(folder, ec);
  if (fs::exists(status) && !fs::is_directory(status))
    throw InputError(flag, name, "exists and is not a folder", "give a folder (it is created if missing)");
  bool created = false;
  if (!fs::exists(status)) {
    created = fs::create_directories(folder, ec);
    if (ec)
      throw InputError(flag, name, fmt::format("cannot create the folder: {}", ec.message()),
                       "give a folder you can write, e.g. out/NAME");
  }
  // Probe: a file that can be created here can be written (the disk may still fill up later;
  // every write is checked).
  std::string probe = (folder / ".moesim-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    const int err = errno;
    if (created) fs::remove(folder, ec);
    throw InputError(flag, name, fmt::format("cannot write in the folder: {}", std::strerror(err)),
                     "give a folder you can write, e.g. out/NAME");
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return created;
}

void remove_if_empty(const fs::path& folder) {
  std::error_code ec;
  if (fs::is_directory(folder, ec) && fs::is_empty(folder, ec)) fs::remove(folder, ec);
}

}  // namespace moesim
