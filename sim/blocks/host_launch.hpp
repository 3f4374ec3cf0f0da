// How each GPU's launch thread issues the tasks blocks write (engine.hpp: the host launches the
// GPU's work; software/software.hpp: what the software costs it). A task of k kernels launched
// eagerly costs k launches (a forward's or a backward's, times the GPU kind's host factor); a task
// of a module the software captures in CUDA graphs joins the graph of its module, layer,
// microbatch and direction (or, under full_iteration, its iteration's forward-backward) that the
// GPU's previous captured task opened, at no cost, or opens a new one for a replay's cost; a task
// without kernels (a wait on another stream) costs nothing and leaves the graph open. A
// device-to-host read is one launch after which the thread waits for the read and the software's
// sync time.
#pragma once

#include <vector>

#include "sim/cluster/topology.hpp"
#include "sim/engine/task.hpp"
#include "sim/software/software.hpp"

namespace moesim::blocks {

class HostLaunch {
 public:
  HostLaunch() = default;  // nothing costs the host
  HostLaunch(const software::Software& software, const cluster::Topology& topology);

  engine::Launch launch(std::uint32_t gpu, software::Module module, const engine::Label& label, int kernels);
  // A read the thread waits for, then `sync` more.
  engine::Launch read(std::uint32_t gpu, const engine::Label& label, Time sync);
  const software::Software* software() const { return software_; }

 private:
  // The graph a GPU's last captured task joined.
  struct Graph {
    bool open = false;
    software::Module module = software::Module::None;
    engine::Phase phase = engine::Phase::Forward;
    std::uint16_t iteration = 0, layer = 0, microbatch = 0;
    bool operator==(const Graph&) const = default;
  };
  Time scaled(std::uint32_t gpu, Time cost) const;
  // An eager launch's cost in the label's phase (the software's; not scaled).
  Time per_kernel(const engine::Label& label) const;

  const software::Software* software_ = nullptr;
  const cluster::Topology* topology_ = nullptr;
  std::vector<double> factor_;  // per GPU kind
  std::vector<Graph> graph_;    // per GPU
};

}  // namespace moesim::blocks
