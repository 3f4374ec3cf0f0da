#include "sim/core/huge_pages.hpp"

#include <fstream>
#include <string>

#if defined(__linux__)
#include <sys/prctl.h>
#endif

namespace moesim {

bool transparent_huge_pages() {
#if defined(__linux__)
  if (prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) > 0) return false;
  // The file reads like "always [madvise] never": the mode in brackets.
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(in, mode);
  return mode.find("[always]") != std::string::npos || mode.find("[madvise]") != std::string::npos;
#else
  return false;
#endif
}

}  // namespace moesim
