// How the CLI ends on a failure: its exit code (2: bad input or a scenario that cannot run; 1: an
// output that could not be written, memory, an internal error) and the one line it prints.
#pragma once

#include <exception>

namespace moesim::cli {

// The exit code of a failure, its message printed on stderr (one line) when `print`; a rank that
// stopped because another rank failed (sweep::StoppedByPeer) exits with that rank's code, silently.
int exit_code(const std::exception_ptr& failure, bool print);

}  // namespace moesim::cli
