#include "sim/core/json_input.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <optional>

#include "sim/core/error.hpp"
#include "sim/core/input_file.hpp"

namespace moesim {

namespace {

std::string where(std::string_view text, std::size_t at) {
  at = std::min(at, text.size());
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') ++line, col = 1;
    else ++col;
  }
  return fmt::format("line {}, column {}", line, col);
}

// Walks the JSON text outside its strings: `visit(i)` sees the offset of each byte there and
// returns an offset to stop at, or nothing to go on. Returns the first offset it stops at.
template <typename Visit>
std::optional<std::size_t> outside_strings(std::string_view text, Visit visit) {
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      continue;
    }
    if (const auto found = visit(i)) return found;
  }
  return std::nullopt;
}

// The offset of the first bracket past the depth limit (brackets inside strings do not count).
std::optional<std::size_t> too_deep(std::string_view text) {
  int depth = 0;
  return outside_strings(text, [&](std::size_t i) -> std::optional<std::size_t> {
    if (text[i] == '[' || text[i] == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if (text[i] == ']' || text[i] == '}') {
      --depth;
    }
    return std::nullopt;
  });
}

// The first number literal outside strings that a double cannot hold.
std::optional<std::size_t> overflowing_number(std::string_view text) {
  std::size_t skip_to = 0;  // past the literal just read
  return outside_strings(text, [&](std::size_t i) -> std::optional<std::size_t> {
    if (i < skip_to || !(text[i] == '-' || (text[i] >= '0' && text[i] <= '9'))) return std::nullopt;
    std::size_t end = i + 1;
    while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.' ||
                                 text[end] == 'e' || text[end] == 'E' || text[end] == '+' || text[end] == '-'))
      ++end;
    skip_to = end;
    const std::string literal(text.substr(i, end - i));
    if (!std::isfinite(std::strtod(literal.c_str(), nullptr))) return i;
    return std::nullopt;
  });
}

}  // namespace

schema::Json parse_json(std::string_view text, const std::string& file) {
  if (const auto at = too_deep(text))
    throw InputError(file, "", fmt::format("JSON nested more than {} levels deep at {}", kMaxJsonDepth, where(text, *at)),
                     "moesim inputs are a few levels deep; check for unbalanced brackets");
  try {
    return schema::Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    const std::size_t at = e.byte == 0 ? 0 : e.byte - 1;
    const bool encoding = std::string_view(e.what()).find("UTF-8") != std::string_view::npos;
    throw InputError(file, "", fmt::format("malformed JSON at {}", where(text, at)),
                     encoding ? "save the file as UTF-8 text"
                              : "fix the syntax there (a missing comma, quote or bracket; JSON allows no comments or "
                                "trailing commas)");
  } catch (const nlohmann::json::out_of_range&) {
    const auto at = overflowing_number(text);
    throw InputError(file, "", fmt::format("a number too large for a double at {}", at ? where(text, *at) : "an unknown place"),
                     "write a number below 1.8e308 (and use a unit to write large quantities, e.g. \"2TB\")");
  } catch (const nlohmann::json::exception&) {
    throw InputError(file, "", "cannot be read as JSON", "check that the file is JSON text");
  }
}

schema::Json read_json_file(const std::filesystem::path& file) { return parse_json(read_input_file(file), file.string()); }

}  // namespace moesim
