// Parsing a user's JSON text (scenarios, presets, calibration profiles, measurements). Limits are
// checked before the parser and every later recursive walk sees the document: nesting deeper than
// 64 levels (a scenario is 6 deep) is refused, as are numbers beyond a double (1e400). Every
// failure is an InputError naming the file, the line and column, and the fix.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "sim/core/schema.hpp"

namespace moesim {

inline constexpr int kMaxJsonDepth = 64;

schema::Json parse_json(std::string_view text, const std::string& file);

// read_input_file + parse_json.
schema::Json read_json_file(const std::filesystem::path& file);

}  // namespace moesim
