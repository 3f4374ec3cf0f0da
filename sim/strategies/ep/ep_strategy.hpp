// Plain expert parallelism (GShard/DeepSpeed-MoE/Tutel), the baseline every MoE system compares
// against (STRATEGIES.md `ep`). Per MoE layer and microbatch, forward: attention and the gate on
// every GPU → dispatch all-to-all(v) inside the EP group → the local experts' FFNs → combine
// all-to-all(v); backward mirrors it at twice the compute. With pipelining degree P the tokens are
// split into P chunks so chunk i's all-to-all overlaps chunk i−1's expert compute (Tutel,
// FasterMoE). After the last microbatch's backward of each layer, dense gradients are all-reduced
// over all GPUs and expert gradients over the expert-data-parallel group (GPUs holding the same
// experts); then the optimizer steps. The all-to-all traffic comes from the routing of each layer
// and iteration, after capacity drops.
#pragma once

#include "sim/strategies/ep/ep_routing.hpp"
#include "sim/strategies/registry.hpp"

namespace moesim::strategies::ep {

StrategyInfo info();

struct EpOptions {
  int ep_size = 0;  // 0: all GPUs
  int pipelining_degree = 1;
  network::Algorithm all_to_all = network::Algorithm::Direct;
  bool overlap_gradient_sync = true;
};

// Options every strategy built on the EP iteration takes: their schema fields and their reading.
schema::Field pipelining_degree_option();
schema::Field gradient_sync_option();
void read_iteration_options(const schema::Json& options, EpOptions& into);

// The EP iteration, with hooks through which HybridEP adds expert migration to it (its p = 1 is
// exactly this program).
class EpStrategy : public Strategy {
 public:
  explicit EpStrategy(EpOptions options) : options_(options) {}
  std::string name() const override { return "ep"; }
  void check(const StrategyContext& ctx) const override;
  std::vector<workload::MemoryFootprint> memory(const StrategyContext& ctx) const override;
  std::size_t tasks_per_iteration(const StrategyContext& ctx) const override;
  void build_iteration(const StrategyContext& ctx, ProgramBuilder& program, int iteration) final;
  schema::Json describe(const StrategyContext& ctx) const override;

  int ep_size(const StrategyContext& ctx) const;

 protected:
  // All-to-all groups and which experts each rank computes.
  virtual EpLayout layout(const StrategyContext& ctx) const;
  // Parameters GPU `g` holds (and steps the optimizer over).
  virtual double params_on_gpu(const StrategyContext& ctx) const;
  // Before the first microbatch's embedding.
  virtual void begin_iteration(const StrategyContext&, ProgramBuilder&, int /*iteration*/) {}
  // When a MoE layer's forward starts on every GPU (`attention[g]`: the layer's attention task).
  virtual void begin_moe_forward(const StrategyContext&, ProgramBuilder&, int /*iteration*/, int /*layer*/, int /*mb*/,
                                 const std::vector<engine::TaskId>& /*attention*/) {}
  // The task GPU g's expert compute of `layer` waits for (engine::kNone: none) and the compute it
  // adds before the layer's first expert GeMM of the iteration's forward and of its backward.
  virtual engine::TaskId experts_ready(int /*layer*/, std::uint32_t /*g*/) const { return engine::kNone; }
  virtual Time expert_prologue(const StrategyContext&, int /*layer*/, std::uint32_t /*g*/) const { return 0; }
  // Parameters of each MoE layer replicated on every GPU besides attention, norms, gate and shared
  // experts: their gradients join the layer's data-parallel all-reduce (one DDP bucket).
  virtual double extra_replicated_moe_params(const StrategyContext&) const { return 0; }
  // Synchronises the expert gradients of `layer` once the GPUs' tasks `after` are done.
  virtual void sync_expert_gradients(const StrategyContext& ctx, ProgramBuilder& pb, int iteration, int layer,
                                     const std::vector<engine::TaskId>& after);
  // A gradient collective of `bytes` over `group` on the gradient stream after each member's
  // `after` task; the optimizer step waits for each GPU's last one (last_gradient_sync()).
  void gradient_collective(const StrategyContext& ctx, ProgramBuilder& pb, network::CollectiveKind kind,
                           network::Algorithm algorithm, network::GroupId group, double bytes,
                           const engine::Label& label, const std::vector<engine::TaskId>& after);
  const std::vector<engine::TaskId>& last_gradient_sync() const { return last_sync_; }

  EpOptions options_;

 private:
  std::vector<network::GroupId> expert_dp_group_;
  std::vector<engine::TaskId> last_sync_;
  std::vector<engine::TaskId> members_;
};

}  // namespace moesim::strategies::ep
