#include "sim/core/error.hpp"

#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>

namespace moesim {

std::string one_line(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (u < 0x20 || u == 0x7f) out += fmt::format("\\x{:02x}", u);
    else out += c;
  }
  return out;
}

InputError::InputError(std::string file, std::string path, std::string problem, std::string fix)
    : std::runtime_error(fmt::format("{}{}{}; {}", file.empty() ? "" : one_line(file) + ": ",
                                     path.empty() ? "" : one_line(path) + ": ", one_line(problem), one_line(fix))),
      file_(std::move(file)), path_(std::move(path)), problem_(std::move(problem)), fix_(std::move(fix)) {}

void invariant_failed(const std::string& what) {
  std::fprintf(stderr, "moesim: internal invariant violated: %s\n", what.c_str());
  std::abort();
}

}  // namespace moesim
