// Fine-grained activation offloading as Megatron-Core runs it (training.offload_modules,
// workload::OffloadModule; core_v0.17.0 megatron/core/pipeline_parallel/
// fine_grained_activation_offload.py). Each offloaded group's saved tensors leave for pinned host
// memory at the end of its forward: the device-to-host stream waits for the compute stream
// (ChunkOffloadHandler.on_group_commit_forward), copies them (bulk_offload_group), and the GPU
// frees them when the copy is done. In the backward, when a group's backward is done
// (on_group_start_backward), the host-to-device stream copies back the group offloaded just before
// it (bulk_reload: the next group the backward needs), after that group's offload
// (wait_offload_event); the group's backward waits for its copy (on_group_commit_backward). The
// first group of a chunk's backward is copied back when its backward begins. Each copy is a
// HostCopy on the GPU's PCIe link (its host link), where it shares the link with whatever else
// crosses it.
//
// Granularity: moesim's tasks, not Megatron's modules. The attention's groups (attn_norm,
// qkv_linear, core_attn, attn_proj) leave together after the attention block's forward and come back
// together before its backward (and before the recomputation in front of it); mlp_norm with the
// router (the pre-MLP norm is costed in it) or with a dense FFN; expert_fc1 and moe_act with each
// chunk's expert task. So a group leaves at most one task later and is needed at most one task
// earlier than in Megatron-Core.
#pragma once

#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "sim/blocks/context.hpp"

namespace moesim::blocks {

enum class OffloadSite : std::uint8_t { Attention, MlpNorm, Experts };

class ActivationOffload {
 public:
  // Layer `layer`'s `site` (chunk `chunk` of its experts) of microbatch `mb` on `gpu`: after its
  // forward task `done`, `bytes` go to the host.
  void offload(Emission& em, OffloadSite site, int layer, int mb, int chunk, std::uint32_t gpu, double bytes,
               engine::TaskId done);
  // Before its backward, which would start after `now`: its bytes come back, and the returned task
  // (a wait on the compute stream after `now`) is what the backward starts after; `now` itself
  // where nothing was offloaded.
  engine::TaskId reload(Emission& em, OffloadSite site, int layer, int mb, int chunk, std::uint32_t gpu,
                        engine::TaskId now);
  // The backward of a site ended with task `done`: if its activations came back (reload), the next
  // copy back of the microbatch starts after it.
  void backward_done(int layer, int mb, std::uint32_t gpu, engine::TaskId done);

 private:
  using Key = std::tuple<int, int, int, int, std::uint32_t>;  // microbatch, layer, site, chunk, GPU
  struct Offloaded {
    engine::TaskId copy;
    double bytes;
  };
  std::map<Key, Offloaded> offloaded_;
  // Per (microbatch, GPU): the layer and task of the last backward of a site that came back.
  std::map<std::pair<int, std::uint32_t>, std::pair<int, engine::TaskId>> last_backward_;
  std::set<std::pair<int, std::uint32_t>> reloaded_;  // (microbatch, GPU) whose current site came back
};

// The sites' bytes per GPU, from workload::offloaded_bytes, and their events on the GPUs of the
// current stage that run attention: after the forward of `site` (Attention or MlpNorm; `f`: its
// last tasks), before its backward (f becomes what the backward starts after), and after it.
// Each does nothing where the training offloads nothing.
void offload_after_forward(Emission& em, OffloadSite site, int layer, int mb, const Frontier& f);
void reload_before_backward(Emission& em, OffloadSite site, int layer, int mb, Frontier& f);
void offloaded_backward_done(Emission& em, int layer, int mb, const Frontier& f);

}  // namespace moesim::blocks
