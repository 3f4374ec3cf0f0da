// Writes a whole output file through a temporary one, so a reader (or a failed run) never leaves
// half a file behind.
#pragma once

#include <filesystem>
#include <string>

namespace moesim::cli {

void write_file(const std::filesystem::path& path, const std::string& text);

}  // namespace moesim::cli
