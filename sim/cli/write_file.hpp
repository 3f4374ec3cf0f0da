// Writes a whole output file through a temporary one, so a reader (or a failed run) never leaves
// half a file behind.
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>
#include <string>

namespace moesim::cli {

void write_file(const std::filesystem::path& path, const std::string& text);
// The same, the content streamed by `write` (no copy of it in memory).
void write_file(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write);

}  // namespace moesim::cli
