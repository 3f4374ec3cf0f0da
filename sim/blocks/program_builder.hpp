// ProgramBuilder: how blocks write tasks into the engine. Streams are named by role (the plan's
// StreamSet); a task waits for its stream's previous task and for the task it is given to come
// after. That dependency is left out when it is the previous task on the same stream (stream
// order already holds it), so a chain of kernels on one stream is a plain in-order queue, as on
// a CUDA stream. Collectives are written once per group, their op recorded in the collective
// program the network model reads; families of groups are interned once. Every task is issued by
// its GPU's launch thread as the software says (host_launch.hpp): blocks give each kernel task's
// Work (time and kernels) and say which module of the layer they are writing (InModule).
#pragma once

#include <functional>
#include <map>
#include <vector>

#include "sim/blocks/host_launch.hpp"
#include "sim/compute/compute_model.hpp"
#include "sim/engine/engine.hpp"
#include "sim/network/executor.hpp"
#include "sim/parallel/iteration_plan.hpp"

namespace moesim::blocks {

class ProgramBuilder {
 public:
  ProgramBuilder(engine::Engine& engine, network::CollectiveProgram& program, std::shared_ptr<const parallel::StreamSet> streams,
                 HostLaunch host = {});

  // The module of the layer being written, while it lives (tasks outside one: software::Module::None).
  class InModule {
   public:
    InModule(ProgramBuilder& pb, software::Module module) : pb_(pb), previous_(pb.module_) { pb.module_ = module; }
    ~InModule() { pb_.module_ = previous_; }
    InModule(const InModule&) = delete;
    InModule& operator=(const InModule&) = delete;

   private:
    ProgramBuilder& pb_;
    software::Module previous_;
  };

  // The module being written (software::Module::None outside one).
  software::Module module() const { return module_; }

  std::uint8_t stream(parallel::StreamRole role) const { return streams_->index(role); }
  const parallel::StreamSet& streams() const { return *streams_; }

  // Kernels (`work`: their time with the GPU to themselves, and how many the host launches) on
  // `gpu`'s stream of `role`, after `after` (kNone: stream order only); `sm_share`: the share of the
  // GPU's SMs they reserve while they run.
  engine::TaskId compute(std::uint32_t gpu, compute::Work work, const engine::Label& label,
                         engine::TaskId after = engine::kNone, parallel::StreamRole role = parallel::StreamRole::Compute,
                         double sm_share = 0);
  // A wait of `duration` on `role`'s stream that launches nothing (a host's CPU work, a marker).
  engine::TaskId wait(std::uint32_t gpu, Time duration, const engine::Label& label, engine::TaskId after = engine::kNone,
                      parallel::StreamRole role = parallel::StreamRole::Compute);
  // A device-to-host read on `gpu`'s compute stream after `after`: its launch thread waits for it,
  // then `sync` more, before it issues anything else.
  engine::TaskId read(std::uint32_t gpu, Time sync, const engine::Label& label, engine::TaskId after);
  // One collective over `op.group` on `role`'s stream: member tasks in rank order, written to
  // `members`; member r waits for after[group[r]] when `after` is given; `sm_share(gpu)`: the
  // share of the GPU's SMs its member reserves while it runs (a fused kernel's), none if empty.
  void collective(network::CollectiveOp op, parallel::StreamRole role, const engine::Label& label,
                  std::vector<engine::TaskId>& members, const std::vector<engine::TaskId>* after = nullptr,
                  const std::function<double(std::uint32_t)>& sm_share = {});
  // A point-to-point transfer of `bytes` from `sender` (on its `send` stream, after `after`) to
  // `receiver` (on its `receive` stream); returns the receiver's task.
  engine::TaskId p2p(std::uint32_t sender, std::uint32_t receiver, double bytes, parallel::StreamRole send,
                     parallel::StreamRole receive, const engine::Label& label, engine::TaskId after);
  // A copy of `bytes` between `gpu` and its host's memory over PCIe (to the host when `to_host`,
  // else back) on `role`'s stream, after `after`.
  engine::TaskId host_copy(std::uint32_t gpu, double bytes, bool to_host, parallel::StreamRole role,
                           const engine::Label& label, engine::TaskId after);
  void depend(engine::TaskId before, engine::TaskId after);
  network::GroupId group(std::vector<std::uint32_t> gpus) { return program_.groups.intern(std::move(gpus)); }
  const std::vector<std::uint32_t>& group_members(network::GroupId id) const { return program_.groups.members(id); }
  // The family's groups of more than one GPU, interned (once per family), but those none of whose
  // GPUs' tasks are written (simulate_only).
  const std::vector<network::GroupId>& groups(const parallel::FamilyPtr& family);
  // Drops the entries of families no plan holds any more (a strategy that builds its families
  // anew each iteration, as adaptive replication does, would otherwise keep every iteration's
  // alive: memory growing with the run). Their groups stay interned; tasks name those.
  void forget_unused_families();
  std::size_t families_known() const { return families_.size(); }
  engine::Label label(engine::Phase phase, engine::WorkKind kind, std::string_view name, int iteration, int layer,
                      int microbatch = 0, int chunk = 0);
  engine::Engine& engine() { return engine_; }
  // Writes the tasks of the GPUs `simulated` says only (per GPU; empty: all). The others' tasks are
  // not written: asked for, a task of theirs is engine::kNone, and a collective gets members only
  // for the simulated GPUs of its group, its op standing for `copies(members, simulated)` identical
  // collectives (simulation/replica_symmetry.hpp). Before anything is written.
  void simulate_only(std::vector<bool> simulated, std::function<std::uint32_t(std::size_t, std::size_t)> copies);
  bool writes(std::uint32_t gpu) const { return simulated_.empty() || simulated_[gpu]; }
  bool writes_some_only() const { return !simulated_.empty(); }
  // The software the launches follow (null: nothing costs the host).
  const software::Software* software() const { return host_.software(); }

  // The compute kernels written so far (of the simulated GPUs), per GPU kind (`kind_of`: the topology whose kinds these are;
  // every GPU kind 0 without one): their time as costed (compute::Work::time, with the GPU to
  // themselves) and of it what measured kernel tables gave (compute::Work::measured).
  struct KernelTime {
    Time costed = 0, measured = 0;
  };
  void count_kernels_by_kind(const cluster::Topology& kind_of) { kind_of_ = &kind_of; }
  const std::vector<KernelTime>& kernel_time_by_kind() const { return kernel_time_; }

 private:
  engine::TaskId add(std::uint32_t gpu, Time duration, const engine::Label& label, engine::TaskId after,
                     parallel::StreamRole role, double sm_share, const engine::Launch& launch);

  engine::Engine& engine_;
  network::CollectiveProgram& program_;
  std::shared_ptr<const parallel::StreamSet> streams_;
  std::map<parallel::FamilyPtr, std::vector<network::GroupId>> families_;
  HostLaunch host_;
  software::Module module_ = software::Module::None;
  const cluster::Topology* kind_of_ = nullptr;
  std::vector<KernelTime> kernel_time_;
  std::vector<bool> simulated_;
  std::function<std::uint32_t(std::size_t, std::size_t)> copies_;
};

}  // namespace moesim::blocks
