// The processes of a sweep distributed over machines (`mpirun -np N moesim sweep ...`): N ranks,
// rank 0 owning the CSV. This is the little run_sweep needs from them; mpi_ranks.hpp gives the
// MPI ranks of a launched job, the tests an in-process world.
#pragma once

#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace moesim::sweep {

class Ranks {
 public:
  virtual ~Ranks() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Ranks on this machine (this one included): they share its cores.
  virtual int local_size() const = 0;
  // Collective: every rank gives its code and gets every rank's, in rank order.
  virtual std::vector<int> all_codes(int code) = 0;
  // Point to point; messages between two ranks arrive in the order sent. Waits block without
  // spinning: the cores belong to the simulations.
  virtual void send(int to, const std::string& message) = 0;
  // The next message for this rank from `from` (kAnyRank: from any rank): {sender, message}.
  virtual std::pair<int, std::string> receive(int from) = 0;
  // Ends every rank of the job now (a failure that leaves the others waiting).
  [[noreturn]] virtual void abort(int exit_code) = 0;
  static constexpr int kAnyRank = -1;
};

// Thrown on the ranks that stay quiet when another rank failed (that rank says why): the process
// exits with `exit_code`, the code of the failure, and prints nothing.
class StoppedByPeer : public std::runtime_error {
 public:
  StoppedByPeer(int rank, int code)
      : std::runtime_error("rank " + std::to_string(rank) + " failed"), exit_code(code) {}
  int exit_code;
};

// Runs `step` on every rank; when it throws on any of them, every rank stops: the lowest failing
// rank rethrows its own exception (its message is printed once, by it), the others throw
// StoppedByPeer with that failure's exit code (`exit_code` maps an exception to one). Every rank
// runs the same checks on the same input, so a bad scenario fails on all of them and rank 0 tells;
// a rank that alone fails (a file missing on its machine) tells itself. Without ranks: just `step`.
template <class Step>
void agree(Ranks* ranks, Step&& step, int (*exit_code)(const std::exception_ptr&)) {
  if (!ranks) {
    step();
    return;
  }
  std::exception_ptr failure;
  int code = 0;
  try {
    step();
  } catch (...) {
    failure = std::current_exception();
    code = exit_code(failure);
    if (code == 0) code = 1;
  }
  const std::vector<int> codes = ranks->all_codes(code);
  for (int r = 0; r < static_cast<int>(codes.size()); ++r) {
    if (codes[r] == 0) continue;
    if (r == ranks->rank()) std::rethrow_exception(failure);
    throw StoppedByPeer(r, codes[r]);
  }
}

}  // namespace moesim::sweep
