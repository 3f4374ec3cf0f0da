// Errors of moesim. InputError is bad user input (exit code 2): it names the file, the JSON path
// and the fix. InfeasibleError is a valid scenario that cannot run (a model that does not fit in
// GPU memory, a run too large for this machine): also exit code 2 for `run`, a refused point in a
// sweep. Invariant violations are bugs: they abort with a message naming the task.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace moesim {

// `s` on one line whatever it holds: control characters (a newline in a key, a tab in a value)
// written as escapes (\n, \t, \xHH). Every error message passes through it.
std::string one_line(std::string_view s);

class InputError : public std::runtime_error {
 public:
  InputError(std::string file, std::string path, std::string problem, std::string fix);
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  const std::string& problem() const { return problem_; }
  const std::string& fix() const { return fix_; }

 private:
  std::string file_, path_, problem_, fix_;
};

class InfeasibleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Aborts the process: an internal invariant does not hold (a bug, never bad input).
[[noreturn]] void invariant_failed(const std::string& what);

}  // namespace moesim
