#include "sim/sweep/mpi_ranks.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>

#include "sim/core/error.hpp"

#ifdef MOESIM_HAVE_MPI
#include <mpi.h>
#endif

namespace moesim::sweep {

namespace {

// An environment variable holding a whole number, or -1.
long env_number(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return *end ? -1 : n;
}

// What the launcher says of this process: the world size (0: no launcher; -1: a launcher that does
// not say, PMIx's srun) and this process' rank. Open MPI's mpirun, MPICH's Hydra (PMI), PMIx.
struct Launch {
  long size = 0;
  long rank = 0;
};
Launch launch() {
  for (const auto& [size, rank] : {std::pair{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"}, std::pair{"PMI_SIZE", "PMI_RANK"}})
    if (env_number(size) >= 0) return {env_number(size), std::max(0L, env_number(rank))};
  if (env_number("PMIX_RANK") >= 0) return {-1, env_number("PMIX_RANK")};
  return {};
}

#ifdef MOESIM_HAVE_MPI

constexpr int kTag = 2101;

// Polls `done` with growing pauses (20 us to 0.5 ms): MPI's own blocking calls spin a core, which
// on a machine shared by several ranks is taken from the simulations.
template <class Done>
void wait_quietly(Done done) {
  auto pause = std::chrono::microseconds(20);
  while (!done()) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(500));
  }
}

class MpiRanks final : public Ranks {
 public:
  MpiRanks() {
    int provided = 0;
    // Only the main thread calls MPI; the simulations run on others.
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &local_size_);
    MPI_Comm_free(&node);
  }
  ~MpiRanks() override { MPI_Finalize(); }
  MpiRanks(const MpiRanks&) = delete;
  MpiRanks& operator=(const MpiRanks&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_size() const override { return local_size_; }

  std::vector<int> all_codes(int code) override {
    std::vector<int> codes(static_cast<std::size_t>(size_));
    MPI_Request request;
    MPI_Iallgather(&code, 1, MPI_INT, codes.data(), 1, MPI_INT, MPI_COMM_WORLD, &request);
    complete(request);
    return codes;
  }

  void send(int to, const std::string& message) override {
    if (message.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      invariant_failed("sweep: a message between ranks over 2 GiB");
    MPI_Request request;
    MPI_Isend(message.data(), static_cast<int>(message.size()), MPI_CHAR, to, kTag, MPI_COMM_WORLD, &request);
    complete(request);
  }

  std::pair<int, std::string> receive(int from) override {
    MPI_Status status;
    int arrived = 0;
    wait_quietly([&] {
      MPI_Iprobe(from == kAnyRank ? MPI_ANY_SOURCE : from, kTag, MPI_COMM_WORLD, &arrived, &status);
      return arrived != 0;
    });
    int count = 0;
    MPI_Get_count(&status, MPI_CHAR, &count);
    std::string message(static_cast<std::size_t>(count), '\0');
    MPI_Recv(message.data(), count, MPI_CHAR, status.MPI_SOURCE, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return {status.MPI_SOURCE, std::move(message)};
  }

  [[noreturn]] void abort(int exit_code) override {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
  }

 private:
  static void complete(MPI_Request& request) {
    int done = 0;
    wait_quietly([&] {
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      return done != 0;
    });
  }

  int rank_ = 0, size_ = 1, local_size_ = 1;
};

#endif

}  // namespace

bool built_with_mpi() {
#ifdef MOESIM_HAVE_MPI
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Ranks> mpi_ranks_from_launcher() {
  const Launch l = launch();
  if (l.size == 0 || l.size == 1) return nullptr;
#ifdef MOESIM_HAVE_MPI
  return std::make_unique<MpiRanks>();
#else
  // Every process gets here; rank 0 tells.
  if (l.rank > 0) throw StoppedByPeer(0, 2);
  throw InputError("mpirun", "", "this moesim was built without MPI, so its processes cannot share one sweep",
                   "install libopenmpi-dev (scripts/install-deps.sh) and rebuild, or run `moesim sweep` without mpirun");
#endif
}

}  // namespace moesim::sweep
