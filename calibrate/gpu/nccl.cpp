// moesim-calibrate-nccl: times NCCL collectives (all_to_all with even and uneven splits,
// all_gather, reduce_scatter, all_reduce, send_recv) over message sizes, on the GPUs of one
// process (ncclCommInitAll) or one GPU per MPI rank across nodes (ncclCommInitRank).
//
// Method: as nccl-tests (github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md): per size, warm-up
// launches, then `reps` back-to-back launches timed together, reporting the average time per op;
// here timed with CUDA events on each GPU's stream (nccl-tests uses a host timer around the
// same loop), the slowest GPU counting (MPI_Allreduce MAX across ranks). Sizes follow nccl-tests'
// "size" column: all_reduce the buffer per rank, all_gather the output per rank, reduce_scatter
// the input per rank, all_to_all the bytes each rank sends, send_recv the bytes one sender sends.
// all_to_all is grouped ncclSend/ncclRecv to every peer (self included), as nccl-tests' alltoall.
// float32 elements, out of place, sum reductions.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <iostream>
#include <memory>
#include <nccl.h>

#include "cuda_util.hpp"
#include "options.hpp"
#include "provenance.hpp"

#ifdef MOESIM_WITH_MPI
#include <mpi.h>
#endif

using namespace moesim::calibrate;

namespace {

constexpr const char* kTool = "moesim-calibrate-nccl";
constexpr const char* kUsage = R"(usage: moesim-calibrate-nccl [options]
       mpirun -np RANKS [-npernode GPUS] moesim-calibrate-nccl [options]

Times NCCL collectives over message sizes and writes measurements JSON for `moesim calibrate fit`.
Without mpirun: every visible GPU (or --gpus N) of this node, one process. Under mpirun (a build
with MPI): one GPU per rank, the node-local rank choosing the GPU; rank 0 writes the output.
Bytes follow nccl-tests' size column: all_reduce the buffer per rank, all_gather the output per
rank, reduce_scatter the input per rank, all_to_all the bytes each rank sends, send_recv the
bytes one sender sends. Uneven all_to_all: rank r sends peer p the share (1 + (r + p) mod n) /
(n (n + 1) / 2) of its bytes (every rank still sends and receives the same total).

examples:
  moesim-calibrate-nccl --dry-run --gpus 8
  moesim-calibrate-nccl --collectives all_reduce,all_to_all --max-bytes 256M --out nccl.json
  mpirun -np 16 -npernode 8 moesim-calibrate-nccl --out nccl-2nodes.json)";

enum class Collective { all_to_all, all_gather, reduce_scatter, all_reduce, send_recv };
constexpr std::array<Collective, 5> kCollectives = {Collective::all_to_all, Collective::all_gather,
                                                    Collective::reduce_scatter, Collective::all_reduce,
                                                    Collective::send_recv};

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::all_to_all: return "all_to_all";
    case Collective::all_gather: return "all_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::all_reduce: return "all_reduce";
    case Collective::send_recv: return "send_recv";
  }
  return "?";
}

struct Options {
  std::vector<Collective> collectives;
  std::vector<std::string> splits;  // all_to_all: even, uneven
  std::uint64_t min_bytes = 8, max_bytes = 1ull << 30;
  double factor = 2;
  int gpus = 0;  // single process; 0: all visible
  bool across = false;  // send_recv pairs r -> r + n/2 instead of even r -> r + 1
};

void check_nccl(ncclResult_t status, const char* call) {
  if (status == ncclSuccess) return;
  const char* last = ncclGetLastError(nullptr);
  throw GpuError(fmt::format("{} failed: {}{}{}", call, ncclGetErrorString(status), last && *last ? ": " : "",
                             last ? last : ""));
}

// --- MPI, where built with it and launched by mpirun/srun; otherwise one process ---

class Mpi {
 public:
  Mpi(int& argc, char**& argv) {
#ifdef MOESIM_WITH_MPI
    // Only under a launcher: a plain run stays a plain process (no MPI singleton start-up).
    if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK")) {
      MPI_Init(&argc, &argv);
      active_ = true;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
      MPI_Comm_size(MPI_COMM_WORLD, &size_);
    }
#else
    (void)argc;
    (void)argv;
#endif
  }
  ~Mpi() {
#ifdef MOESIM_WITH_MPI
    if (active_) MPI_Finalize();
#endif
  }
  Mpi(const Mpi&) = delete;
  Mpi& operator=(const Mpi&) = delete;

  bool multi() const { return size_ > 1; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  std::vector<std::string> all_gather(const std::string& text) const {
#ifdef MOESIM_WITH_MPI
    if (multi()) {
      constexpr int kWidth = 256;
      std::string mine = text.substr(0, kWidth - 1);
      mine.resize(kWidth, '\0');
      std::vector<char> all(static_cast<std::size_t>(kWidth) * size_);
      MPI_Allgather(mine.data(), kWidth, MPI_CHAR, all.data(), kWidth, MPI_CHAR, MPI_COMM_WORLD);
      std::vector<std::string> out;
      for (int r = 0; r < size_; ++r) out.emplace_back(all.data() + static_cast<std::size_t>(r) * kWidth);
      return out;
    }
#endif
    return {text};
  }
  void broadcast(void* data, int bytes) const {
#ifdef MOESIM_WITH_MPI
    if (multi()) MPI_Bcast(data, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
#else
    (void)data;
    (void)bytes;
#endif
  }
  void barrier() const {
#ifdef MOESIM_WITH_MPI
    if (multi()) MPI_Barrier(MPI_COMM_WORLD);
#endif
  }
  double max(double value) const {
#ifdef MOESIM_WITH_MPI
    if (multi()) MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
#endif
    return value;
  }
  // This rank's index among the ranks of its node, and their count.
  std::pair<int, int> local_rank() const {
#ifdef MOESIM_WITH_MPI
    if (multi()) {
      MPI_Comm node;
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
      int local = 0, count = 1;
      MPI_Comm_rank(node, &local);
      MPI_Comm_size(node, &count);
      MPI_Comm_free(&node);
      return {local, count};
    }
#endif
    return {0, 1};
  }
  [[noreturn]] void abort(int code) const {
#ifdef MOESIM_WITH_MPI
    if (active_) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    std::exit(code);
  }

 private:
  bool active_ = false;
  int rank_ = 0, size_ = 1;
};

// --- what is measured ---

struct Group {
  int ranks = 0;
  std::vector<std::string> host_of;  // per rank

  std::vector<std::string> hosts() const {
    std::vector<std::string> unique;
    for (const std::string& h : host_of)
      if (std::find(unique.begin(), unique.end(), h) == unique.end()) unique.push_back(h);
    return unique;
  }
};

struct Series {
  Collective collective;
  std::string split;  // all_to_all only: even, uneven
  std::vector<std::uint64_t> sizes;
};

// Bytes a size must be a multiple of: whole floats, and for the collectives that divide the
// buffer among ranks, whole floats per rank.
std::uint64_t granularity(Collective c, int ranks) {
  return c == Collective::all_reduce || c == Collective::send_recv ? 4 : 4ull * static_cast<std::uint64_t>(ranks);
}

std::vector<std::uint64_t> sizes_for(Collective c, const Options& o, int ranks) {
  const std::uint64_t g = granularity(c, ranks);
  std::vector<std::uint64_t> sizes;
  for (double s = static_cast<double>(o.min_bytes); s <= static_cast<double>(o.max_bytes) * (1 + 1e-12); s *= o.factor) {
    const std::uint64_t b = std::max(g, static_cast<std::uint64_t>(s) / g * g);
    if (b > o.max_bytes) break;
    if (sizes.empty() || sizes.back() != b) sizes.push_back(b);
  }
  if (sizes.empty())
    throw UsageError(fmt::format("--max-bytes {}: {} over {} ranks needs at least {} bytes", o.max_bytes,
                                 collective_name(c), ranks, g));
  return sizes;
}

// Uneven all_to_all: the share of rank r's bytes that goes to peer p.
double split_share(int r, int p, int n) { return (1.0 + (r + p) % n) / (n * (n + 1) / 2.0); }

// Elements rank r sends to peer p out of `total` per sender. Uneven shares are rounded down,
// the remainder staying with r itself; the shares being symmetric, every rank also receives `total`.
std::uint64_t a2a_elements(std::uint64_t total, int r, int p, int n, bool uneven) {
  if (!uneven) return total / n;
  const std::uint64_t weights = static_cast<std::uint64_t>(n) * (n + 1) / 2;
  const auto share = [&](int q) { return total * static_cast<std::uint64_t>(1 + (r + q) % n) / weights; };
  if (p != r) return share(p);
  std::uint64_t others = 0;
  for (int q = 0; q < n; ++q)
    if (q != r) others += share(q);
  return total - others;
}

// send_recv partner of `rank` (-1: idle) and whether it sends.
int send_recv_peer(int rank, int n, bool across, bool& sender) {
  if (across) {
    const int half = n / 2;
    sender = rank < half;
    return rank < half ? rank + half : rank < 2 * half ? rank - half : -1;
  }
  sender = rank % 2 == 0;
  return sender ? (rank + 1 < n ? rank + 1 : -1) : rank - 1;
}

std::vector<Series> plan_series(const Options& o, int ranks) {
  std::vector<Series> series;
  for (Collective c : o.collectives) {
    if (c == Collective::all_to_all)
      for (const std::string& split : o.splits) series.push_back({c, split, sizes_for(c, o, ranks)});
    else
      series.push_back({c, "", sizes_for(c, o, ranks)});
  }
  return series;
}

// Nodes a series spans: the group's, except send_recv whose pairs span 1 node or 2.
int nodes_of(const Series& s, const Group& g, const Options& o) {
  if (s.collective != Collective::send_recv) return static_cast<int>(g.hosts().size());
  int nodes = 1;
  for (int r = 0; r < g.ranks; ++r) {
    bool sender = false;
    const int peer = send_recv_peer(r, g.ranks, o.across, sender);
    if (sender && peer >= 0 && g.host_of[r] != g.host_of[peer]) nodes = 2;
  }
  return nodes;
}

std::string series_name(const Series& s) {
  return s.split.empty() ? collective_name(s.collective) : fmt::format("{} {}", collective_name(s.collective), s.split);
}

Json series_json(const Series& s, const Group& g, const Options& o) {
  Json entry = {{"collective", collective_name(s.collective)}, {"ranks", g.ranks}, {"nodes", nodes_of(s, g, o)},
                          {"dtype", "float32"}};
  if (!s.split.empty()) entry["split"] = s.split;
  if (s.split == "uneven") {
    Json weights = Json::array();
    for (int r = 0; r < g.ranks; ++r) {
      Json row = Json::array();
      for (int p = 0; p < g.ranks; ++p) row.push_back(split_share(r, p, g.ranks));
      weights.push_back(std::move(row));
    }
    entry["split_weights"] = std::move(weights);
  }
  entry["samples"] = Json::array();
  return entry;
}

int dry_run(const Options& o, const CommonOptions& common, Group group, bool mpi) {
  const bool assumed = group.ranks == 0;
  if (assumed) {
    group.ranks = 8;
    group.host_of.assign(8, hostname());
  }
  const std::vector<std::string> hosts = group.hosts();
  std::cout << fmt::format("{} --dry-run: {}, {} ranks (GPUs) on {} node(s){}\n", kTool,
                           mpi ? "MPI, one GPU per rank" : "single process (ncclCommInitAll)", group.ranks, hosts.size(),
                           assumed ? " - assumed: the visible GPUs are not counted in a dry run, pass --gpus N" : "");
  std::cout << fmt::format("  per size: {} warm-up + {} timed back-to-back launches between cudaEvents on each GPU's "
                           "stream, average per op, slowest GPU\n",
                           common.warmup, common.reps);
  std::cout << "  float32, out of place; bytes as nccl-tests' size column\n";
  for (const Series& s : plan_series(o, group.ranks)) {
    std::cout << fmt::format("  {:<18} {:>2} sizes, {} .. {} (nodes {}):", series_name(s), s.sizes.size(),
                             format_bytes(s.sizes.front()), format_bytes(s.sizes.back()), nodes_of(s, group, o));
    for (std::uint64_t b : s.sizes) std::cout << " " << b;
    std::cout << "\n";
    if (s.split == "uneven" && group.ranks <= 16) {
      std::cout << "    split weights (share of each sender's bytes per peer):\n";
      for (int r = 0; r < group.ranks; ++r) {
        std::cout << fmt::format("    rank {:>2}:", r);
        for (int p = 0; p < group.ranks; ++p) std::cout << fmt::format(" {:.3f}", split_share(r, p, group.ranks));
        std::cout << "\n";
      }
    }
    if (s.collective == Collective::send_recv) {
      std::cout << "    pairs:";
      for (int r = 0; r < group.ranks; ++r) {
        bool sender = false;
        const int peer = send_recv_peer(r, group.ranks, o.across, sender);
        if (sender && peer >= 0) std::cout << fmt::format(" {}->{}", r, peer);
      }
      std::cout << "\n";
    }
  }
  return 0;
}

// --- measuring ---

// One GPU of this process: its rank, communicator, stream, buffers and timer. The communicator
// is freed by Communicators (below), not here.
struct Local {
  int device = 0, rank = 0;
  ncclComm_t comm = nullptr;
  std::unique_ptr<Stream> stream;
  DeviceBuffer send, recv;
  std::unique_ptr<EventTimer> timer;
};

// Frees the communicators of `locals` before their buffers. ncclCommDestroy finalizes first, and
// finalizing is an intra-node collective: one thread holding several ranks (ncclCommInitAll) must
// finalize them all inside one ncclGroupStart/End, or destroying them one by one can wait on the
// ranks not yet destroyed (NCCL API docs, ncclCommFinalize; NCCL's single-process example). On the
// way out of an error, ncclCommAbort instead: it does not wait for peers that may never arrive, so
// the error (and MPI_Abort) is reached instead of a hang.
class Communicators {
 public:
  explicit Communicators(std::vector<std::unique_ptr<Local>>& locals) : locals_(locals) {}
  ~Communicators() {
    if (std::uncaught_exceptions() > exceptions_) {
      for (const auto& l : locals_)
        if (l->comm) ncclCommAbort(l->comm);
    } else {
      ncclGroupStart();
      for (const auto& l : locals_)
        if (l->comm) ncclCommFinalize(l->comm);
      ncclGroupEnd();
      for (const auto& l : locals_)
        if (l->comm) ncclCommDestroy(l->comm);
    }
    for (const auto& l : locals_) l->comm = nullptr;
  }
  Communicators(const Communicators&) = delete;
  Communicators& operator=(const Communicators&) = delete;

 private:
  std::vector<std::unique_ptr<Local>>& locals_;
  int exceptions_ = std::uncaught_exceptions();
};

// Queues one op of `s` with `bytes` for one GPU (inside the caller's ncclGroupStart/End).
void launch(const Series& s, std::uint64_t bytes, const Local& l, int n, bool across) {
  float* send = static_cast<float*>(l.send.get());
  float* recv = static_cast<float*>(l.recv.get());
  const std::uint64_t count = bytes / 4;
  cudaStream_t st = l.stream->get();
  switch (s.collective) {
    case Collective::all_reduce:
      check_nccl(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, l.comm, st), "ncclAllReduce");
      break;
    case Collective::all_gather:
      check_nccl(ncclAllGather(send, recv, count / n, ncclFloat, l.comm, st), "ncclAllGather");
      break;
    case Collective::reduce_scatter:
      check_nccl(ncclReduceScatter(send, recv, count / n, ncclFloat, ncclSum, l.comm, st), "ncclReduceScatter");
      break;
    case Collective::all_to_all: {
      const bool uneven = s.split == "uneven";
      std::uint64_t sent = 0, received = 0;
      check_nccl(ncclGroupStart(), "ncclGroupStart");
      for (int p = 0; p < n; ++p) {
        const std::uint64_t out = a2a_elements(count, l.rank, p, n, uneven), in = a2a_elements(count, p, l.rank, n, uneven);
        check_nccl(ncclSend(send + sent, out, ncclFloat, p, l.comm, st), "ncclSend");
        check_nccl(ncclRecv(recv + received, in, ncclFloat, p, l.comm, st), "ncclRecv");
        sent += out;
        received += in;
      }
      check_nccl(ncclGroupEnd(), "ncclGroupEnd");
      break;
    }
    case Collective::send_recv: {
      bool sender = false;
      const int peer = send_recv_peer(l.rank, n, across, sender);
      if (peer < 0) break;
      if (sender)
        check_nccl(ncclSend(send, count, ncclFloat, peer, l.comm, st), "ncclSend");
      else
        check_nccl(ncclRecv(recv, count, ncclFloat, peer, l.comm, st), "ncclRecv");
      break;
    }
  }
}

// Average microseconds per op of `reps` back-to-back launches, the slowest GPU of all ranks.
double time_size(const Series& s, std::uint64_t bytes, std::vector<std::unique_ptr<Local>>& locals, int n,
                 const Options& o, const CommonOptions& common, const Mpi& mpi) {
  const auto launch_all = [&] {
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (const auto& l : locals) launch(s, bytes, *l, n, o.across);
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  };
  for (int i = 0; i < common.warmup; ++i) launch_all();
  for (const auto& l : locals) l->stream->synchronize();
  mpi.barrier();
  const auto record = [&](bool start) {
    for (const auto& l : locals) {
      check_cuda(cudaSetDevice(l->device), "cudaSetDevice");
      if (start)
        l->timer->start(0, l->stream->get());
      else
        l->timer->stop(0, l->stream->get());
    }
  };
  record(true);
  for (int i = 0; i < common.reps; ++i) launch_all();
  record(false);
  double slowest = 0;
  for (const auto& l : locals) slowest = std::max(slowest, l->timer->span_us(0, 0));
  return mpi.max(slowest / common.reps);
}

int measure(const Options& o, const CommonOptions& common, Group group, const Mpi& mpi) {
  std::unique_ptr<Output> output;
  if (mpi.rank() == 0) output = std::make_unique<Output>(common.out);
  const int devices = require_devices();
  std::vector<std::unique_ptr<Local>> locals;
  const Communicators free_communicators(locals);  // destroyed before `locals`
  std::vector<ncclComm_t> comms;
  if (mpi.multi()) {
    const auto [local, on_node] = mpi.local_rank();
    if (on_node > devices)
      throw GpuError(fmt::format("{} ranks on host {} but only {} CUDA devices visible there: run at most one rank per GPU",
                                 on_node, hostname(), devices));
    auto l = std::make_unique<Local>();
    l->device = local;
    l->rank = mpi.rank();
    check_cuda(cudaSetDevice(l->device), "cudaSetDevice");
    ncclUniqueId id{};
    if (mpi.rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    mpi.broadcast(&id, sizeof id);
    check_nccl(ncclCommInitRank(&l->comm, group.ranks, id, l->rank), "ncclCommInitRank");
    locals.push_back(std::move(l));
  } else {
    if (o.gpus > devices) throw UsageError(fmt::format("--gpus {}: only {} CUDA device(s) visible", o.gpus, devices));
    if (devices < 2)
      throw GpuError("only 1 CUDA device visible: collectives need 2 GPUs or more (or ranks on several nodes under mpirun)");
    group.ranks = o.gpus > 0 ? o.gpus : devices;
    group.host_of.assign(group.ranks, hostname());
    comms.resize(group.ranks);
    std::vector<int> list(group.ranks);
    for (int d = 0; d < group.ranks; ++d) list[d] = d;
    check_nccl(ncclCommInitAll(comms.data(), group.ranks, list.data()), "ncclCommInitAll");
    for (int d = 0; d < group.ranks; ++d) {
      auto l = std::make_unique<Local>();
      l->device = l->rank = d;
      l->comm = comms[d];
      locals.push_back(std::move(l));
    }
  }
  const std::vector<Series> series = plan_series(o, group.ranks);
  std::uint64_t largest = 4;
  for (const Series& s : series) largest = std::max(largest, s.sizes.back());
  for (const auto& l : locals) {
    check_cuda(cudaSetDevice(l->device), "cudaSetDevice");
    l->stream = std::make_unique<Stream>();
    l->send = DeviceBuffer(largest);
    l->recv = DeviceBuffer(largest);
    // On the NCCL stream: cudaMemset goes to the legacy default stream, with which a
    // non-blocking stream does not synchronise.
    check_cuda(cudaMemsetAsync(l->send.get(), 0, largest, l->stream->get()), "cudaMemsetAsync");
    check_cuda(cudaMemsetAsync(l->recv.get(), 0, largest, l->stream->get()), "cudaMemsetAsync");
    l->timer = std::make_unique<EventTimer>(1);
  }

  Provenance provenance = local_provenance(locals.front()->device, common.command);
  int nccl_version = 0;
  check_nccl(ncclGetVersion(&nccl_version), "ncclGetVersion");
  provenance.nccl = library_version_string(nccl_version);
  std::vector<std::string> gpus;
  for (const std::string& g : mpi.all_gather(provenance.gpu))
    if (std::find(gpus.begin(), gpus.end(), g) == gpus.end()) gpus.push_back(g);
  provenance.gpu = fmt::format("{}", fmt::join(gpus, " + "));
  provenance.gpu_count = group.ranks;
  provenance.hosts = group.hosts();

  Json entries = Json::array();
  for (const Series& s : series) {
    Json entry = series_json(s, group, o);
    for (std::uint64_t bytes : s.sizes) {
      const double us = time_size(s, bytes, locals, group.ranks, o, common, mpi);
      entry["samples"].push_back({{"bytes", bytes}, {"time", round_us(us)}});
      if (mpi.rank() == 0 && !common.quiet)
        std::cerr << fmt::format("[{} {} ranks] {}: {:.2f} us, {:.2f} GB/s algbw\n", series_name(s), group.ranks,
                                 format_bytes(bytes), us, static_cast<double>(bytes) / us / 1e3);
    }
    entries.push_back(std::move(entry));
  }
  if (mpi.rank() == 0) {
    Json document = measurement_document(kTool, provenance, common);
    document["collectives"] = std::move(entries);
    output->write(document);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  return run_tool(kTool, [&] {
    CommandLine cli(kTool, kUsage);
    std::string collectives, splits, min_bytes, max_bytes, pairs;
    Options o;
    cli.options().add_options()
        ("collectives", po::value(&collectives)->default_value("all_to_all,all_gather,reduce_scatter,all_reduce,send_recv"),
         "comma list of all_to_all, all_gather, reduce_scatter, all_reduce, send_recv")
        ("splits", po::value(&splits)->default_value("even,uneven"), "all_to_all splits: even, uneven")
        ("min-bytes,b", po::value(&min_bytes)->default_value("8"), "smallest size (8, 64K, 1M, 1G)")
        ("max-bytes,e", po::value(&max_bytes)->default_value("1G"), "largest size")
        ("factor,f", po::value(&o.factor)->default_value(2), "size multiplier between steps (> 1)")
        ("gpus,g", po::value(&o.gpus)->default_value(0), "single process: GPUs to use, 2 or more (0: all visible)")
        ("pairs", po::value(&pairs)->default_value("adjacent"),
         "send_recv pairs: adjacent (even rank r -> r + 1) or across (r -> r + n/2, crossing nodes under mpirun)");
    if (!cli.parse(argc, argv)) return 0;
    for (const std::string& item : split_list(collectives, "--collectives")) {
      const auto c = std::find_if(kCollectives.begin(), kCollectives.end(), [&](Collective x) { return item == collective_name(x); });
      if (c == kCollectives.end())
        throw UsageError(fmt::format("--collectives: unknown collective \"{}\" (all_to_all, all_gather, reduce_scatter, "
                                     "all_reduce, send_recv)", item));
      if (std::find(o.collectives.begin(), o.collectives.end(), *c) == o.collectives.end()) o.collectives.push_back(*c);
    }
    for (const std::string& split : split_list(splits, "--splits")) {
      if (split != "even" && split != "uneven") throw UsageError(fmt::format("--splits: unknown split \"{}\" (even, uneven)", split));
      if (std::find(o.splits.begin(), o.splits.end(), split) == o.splits.end()) o.splits.push_back(split);
    }
    o.min_bytes = parse_bytes(min_bytes, "--min-bytes");
    o.max_bytes = parse_bytes(max_bytes, "--max-bytes");
    if (o.min_bytes < 1) throw UsageError("--min-bytes: must be 1 or more");
    if (o.max_bytes < o.min_bytes) throw UsageError(fmt::format("--max-bytes {}: smaller than --min-bytes {}", max_bytes, min_bytes));
    if (!(o.factor > 1.0) || o.factor > 1024) throw UsageError(fmt::format("--factor {}: must be in (1, 1024]", o.factor));
    if (o.gpus < 0 || o.gpus == 1) throw UsageError(fmt::format("--gpus {}: 2 or more (0: all visible)", o.gpus));
    if (pairs != "adjacent" && pairs != "across") throw UsageError(fmt::format("--pairs \"{}\": adjacent or across", pairs));
    o.across = pairs == "across";

    Mpi mpi(argc, argv);
    if (mpi.multi() && o.gpus > 0) {
      if (mpi.rank() != 0) return 2;
      throw UsageError("--gpus: single-process only; under mpirun every rank uses one GPU");
    }
    Group group;
    if (mpi.multi()) {
      group.ranks = mpi.size();
      group.host_of = mpi.all_gather(hostname());
    } else if (o.gpus > 0) {
      group.ranks = o.gpus;
      group.host_of.assign(o.gpus, hostname());
    }
    if (cli.common().dry_run) return mpi.rank() == 0 ? dry_run(o, cli.common(), group, mpi.multi()) : 0;
    if (!mpi.multi()) return measure(o, cli.common(), group, mpi);
    // Several ranks: a failing rank takes the others down instead of leaving them waiting in NCCL.
    try {
      return measure(o, cli.common(), group, mpi);
    } catch (const UsageError& e) {
      std::cerr << fmt::format("{}: rank {}: {} (see {} --help)\n", kTool, mpi.rank(), e.what(), kTool);
      mpi.abort(2);
    } catch (const std::exception& e) {
      std::cerr << fmt::format("{}: rank {} on {}: error: {}\n", kTool, mpi.rank(), hostname(), e.what());
      mpi.abort(1);
    }
  });
}
