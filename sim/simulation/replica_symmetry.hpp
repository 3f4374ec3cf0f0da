// Identical replicas simulated once (issue 50 part 1; SimAI's analytical backend simulates one
// rank for the same reason, aliyun/SimAI README, but assumes it: here it is proven or refused).
//
// Under expected routing the expert-data-parallel replicas of a Megatron layout run identical
// programs: pipeline stage s holds ranks [s·W, (s+1)·W), and within it the GPUs of unit u (ranks
// [u·U, (u+1)·U) of the stage, U a multiple of the tensor×context and expert×expert-tensor group
// sizes, parallel/layout.hpp) repeat those of unit 0. The shifts that carry unit 0 to the others
// block by block (the units of a node, rack or host cycled inside it, the blocks cycled inside the
// next larger one, up to the stage; each with wrap-around inside its block) are symmetries φ of the
// run when, for each of them,
//   - the cluster: at every tier φ maps workers to workers and ports to ports one-to-one (one
//     renumbering of the ports for all workers), hosts to hosts and PCIe switches to switches, and
//     keeps each GPU's kind (so every α-β cost and every shared worker is the same), and
//   - the plan: roles and per-GPU parameter counts are φ-invariant, and φ maps every group of
//     every family the plan runs collectives over to a group of the same family, rank for rank
//     where the ranks differ (all-to-alls, uneven gathers, pipeline pairs), up to a rotation of the
//     ring where they do not (all-reduce, even all-gather and reduce-scatter);
// then every GPU g has the program, timings and metrics of its representative g − u·U in unit 0,
// and a collective over a group G stands for copies·|G ∩ unit 0|/|G| identical collectives.
// Under the analytic model a collective's cost depends on its group alone; under the flow model
// the other copies' exchanges are run on their links beside it (FlowExecutor::run_images), so the
// links carry what they carry when every GPU is simulated. The caller decides what else must hold
// (expected routing: every replica routes alike).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/cluster/topology.hpp"
#include "sim/parallel/iteration_plan.hpp"

namespace moesim::simulation {

struct ReplicaSymmetry {
  std::uint32_t copies = 1;  // identical replicas each simulated GPU stands for (1: every GPU simulated)
  std::uint32_t unit = 0;    // GPUs per stage of one replica (U)
  // Per GPU, the simulated GPU whose program it runs (empty when copies is 1).
  std::vector<std::uint32_t> representative;
  std::string full_because;  // copies 1: why every GPU is simulated
  // The units of a stage of `stage_size` GPUs numbered in mixed radix (`radix`: the units of each
  // block in the one above, finest first), each digit cycled by one shift.
  std::uint32_t stage_size = 0;
  std::vector<std::uint32_t> radix;
  // GPU `gpu` carried by the shifts that take unit 0 to unit v (its digits added digit by digit).
  std::uint32_t image(std::uint32_t gpu, std::uint32_t v) const;
  // The groups, other than `members` itself, of the `count` identical collectives one over
  // `members` stands for (collective_copies), rank for rank: its images under the shifts.
  std::vector<std::vector<std::uint32_t>> images(const std::vector<std::uint32_t>& members, std::uint32_t count) const;
  bool reduced() const { return copies > 1; }
  bool simulated(std::uint32_t gpu) const { return representative.empty() || representative[gpu] == gpu; }
  std::uint32_t simulated_gpus() const { return static_cast<std::uint32_t>(representative.size() / copies); }
  // The identical collectives one over a group of `members` GPUs, `simulated` of them simulated,
  // stands for.
  std::uint32_t collective_copies(std::size_t members, std::size_t simulated) const;
};

// The smallest replica unit U for which `plan` on `topology` is symmetric as the header says, or
// copies 1 and why not.
ReplicaSymmetry find_replica_symmetry(const cluster::Topology& topology, const parallel::IterationPlan& plan);

}  // namespace moesim::simulation
