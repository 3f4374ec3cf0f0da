// The items of a comma-separated command-line list ("0-7,16", "1,2,4", "none,full"), in order;
// an empty text is one empty item (each command says what an item may be).
#pragma once

#include <string>
#include <vector>

namespace moesim::cli {

inline std::vector<std::string> comma_items(const std::string& text) {
  std::vector<std::string> items;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t end = text.find(',', pos) == std::string::npos ? text.size() : text.find(',', pos);
    items.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return items;
}

}  // namespace moesim::cli
