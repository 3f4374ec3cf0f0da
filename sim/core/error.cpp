#include "sim/core/error.hpp"

#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>

namespace moesim {

InputError::InputError(std::string file, std::string path, std::string problem, std::string fix)
    : std::runtime_error(fmt::format("{}: {}{}; {}", file, path.empty() ? "" : path + ": ", problem, fix)),
      file_(std::move(file)), path_(std::move(path)), problem_(std::move(problem)), fix_(std::move(fix)) {}

void invariant_failed(const std::string& what) {
  std::fprintf(stderr, "moesim: internal invariant violated: %s\n", what.c_str());
  std::abort();
}

}  // namespace moesim
