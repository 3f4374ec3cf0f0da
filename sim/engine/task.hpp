// Tasks, labels and the kinds of work a GPU does. A task runs on one stream of one GPU; its label
// (iteration, layer, microbatch, chunk, phase, kind, name) drives traces and breakdowns.
#pragma once

#include <cstdint>
#include <string_view>

#include "sim/core/units.hpp"

namespace moesim::engine {

using TaskId = std::uint32_t;
using CollectiveId = std::uint32_t;
inline constexpr std::uint32_t kNone = UINT32_MAX;

enum class WorkKind : std::uint8_t {
  Attention,     // attention core and its projections
  Expert,        // expert FFN GeMMs (routed and shared experts)
  Gate,          // router GeMM and top-k
  DenseFfn,      // FFN of dense (non-MoE) layers
  OtherCompute,  // norms, embeddings, LM head, permutations
  Optimizer,     // optimizer step
  HostCompute,   // CPU work for a GPU on its host (the optimizer step offloaded there)
  AllToAll,
  AllGather,
  AllReduce,
  ReduceScatter,
  P2P,
  HostCopy,
  Wait,
  Count
};
inline constexpr int kWorkKinds = static_cast<int>(WorkKind::Count);

bool is_communication(WorkKind kind);
// Kernels on the GPU's SMs (not communication, not CPU work on the host, not a wait).
bool on_gpu_compute(WorkKind kind);
std::string_view to_string(WorkKind kind);

// Recompute: a forward run again during the backward (activation recomputation).
enum class Phase : std::uint8_t { Forward, Backward, GradSync, Optimizer, Recompute };
std::string_view to_string(Phase phase);

struct Label {
  std::uint16_t iteration = 0;
  std::uint16_t layer = 0;
  std::uint16_t microbatch = 0;
  std::uint16_t chunk = 0;
  Phase phase = Phase::Forward;
  WorkKind kind = WorkKind::OtherCompute;
  std::uint16_t name = 0;  // index into Engine::names(), e.g. "dispatch", "combine"
};

enum class TaskType : std::uint8_t { Compute, CollectiveMember };

// How a GPU's launch thread issues a task (see engine.hpp: the host launches the GPU's work).
struct Launch {
  Time cost = 0;   // host time the thread spends issuing it (its kernels' launches, a graph's replay)
  Time sync = -1;  // >= 0: after issuing it the thread waits until it has finished, and `sync` more (waking,
                   // reading the result back), before it issues anything else (a device-to-host read)
};

// 64 bytes: a run holds up to three iterations of these at once.
struct Task {
  Time duration = 0;  // compute: its time with the GPU's SMs to itself; collectives get theirs from the network model
  // Compute: start; collective member: arrival at the rendezvous. Until then negative: -1 while its
  // launch thread has not reached it, -2 - L once the thread issues it at time L (Engine::issued_at).
  Time start = -1;
  Time end = -1;
  std::uint32_t gpu = 0;
  TaskId next_in_stream = kNone;
  CollectiveId collective = kNone;
  std::uint32_t deps_left = 0;
  std::uint32_t last_successor = kNone;  // its successors: a circular list in the engine's edge pool
  float sm_share = 0;                    // share of the GPU's SMs it reserves while it runs (0: none)
  std::uint8_t stream = 0;
  TaskType type = TaskType::Compute;
  std::uint8_t awaiting_launch = 0;  // an event is set for when its launch thread issues it
  Label label;
};

}  // namespace moesim::engine
