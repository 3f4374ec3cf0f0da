// Binds a scenario's calibration profile (sim/calibration/profile.hpp) to the simulator's models,
// and says what it used (DESIGN.md §6: the simulator reads only the profile).
//
// Collectives: an entry measured on `ranks` GPUs over `nodes` nodes is placed on the cluster (the
// first `nodes` nodes, ranks/nodes GPUs each) and sets the α-β of the coarsest level that group
// crosses, for its collective kind. The per-level values are found by simulating: the analytic
// model costs the entry's collective on that group once with α = 1 us, β = 0 and once with α = 0,
// β = 1 ps/B at that level (0 elsewhere), which gives the steps a and the bytes per step the
// algorithm puts on the level's busiest link; then α_level = α / a, β_level = β·size / (a·bytes per
// step), piece by piece with the pieces' size ranges mapped to bytes per step. The analytic and
// flow models then cost every collective of that kind at that level from it, on any group; in the
// analytic model the calibrated level alone costs a phase whose coarsest level it is (finer levels
// are in the measurement), so each entry reproduces its fit on its own shape, which the report
// checks (`own_shape_error`, and a warning above 2 %: a multi-phase algorithm). Where
// several entries set one level, the one with most ranks wins.
// An entry named by a parallel group ("mp", "ep_esp": Parm §V-A/§VI-B measure α-β per collective
// and group) is placed on the GPUs of that group as the run's strategy forms it
// (Strategy::named_groups) instead of the first nodes, and bound by the same rule: the simulated
// collective of that group then costs what the profile says, which is what Parm's Algorithm 1
// reads (parm_strategy.cpp), so the choice and the simulation see one network. Every collective
// of that kind at that level pays the same α and β per step (the profile prices the network, not a
// name): a ring of another size there pays α·(its steps)/(the group's steps). A group the strategy
// does not form, a group of one GPU, and a collective that is no network collective (Parm's
// "overlap", read by Algorithm 1 only) are reported as not used.
//
// Compute: the GeMM table of the scenario's dtype and the attention tables replace the roofline
// efficiencies of the GPU kinds the profile was measured on (its provenance "gpu"; every kind
// when it names none), and its memory-bound line the compute model's memory constants there.
//
// Without a profile's attention tables, a GPU kind whose catalogue entry lists measured attention
// kernels (GpuSpec::attention_kernels: cuDNN's fused attention in BF16) takes its attention tables
// from them, for a training whose attention core computes in BF16 (bf16, fp8, mxfp8) and whose
// scenario sets no attention efficiency of its own: each kernel's FLOP/s counted as the compute
// model counts its FLOPs (compute::attention_forward_flops, the window's tiles included;
// kAttentionBackwardFlopRatio backward), tabulated over (sequence length, head size (d_qk + d_v)/2,
// keys each query sees), interpolated as calibration::LogTable interpolates.
//
// Whatever the profile lacks falls back to the topology's and the GPU catalogue's defaults; the
// report lists entries used, entries not used and why, and every fallback.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sim/calibration/profile.hpp"
#include "sim/cluster/topology.hpp"
#include "sim/compute/compute_model.hpp"
#include "sim/network/alpha_beta.hpp"

namespace moesim::simulation {

// Overrides `params` with the profile's collective entries, group entries placed on `groups`
// (name → the GPUs of one such group); returns the report's "collectives" part, and in `bound` the
// collective kind and tier each of its "used" entries set, in their order.
schema::Json bind_collectives(const calibration::Profile& profile, const cluster::Topology& topology,
                              network::Algorithm all_reduce, const std::map<std::string, std::vector<std::uint32_t>>& groups,
                              network::AlphaBetaTable& params, std::vector<std::pair<network::CollectiveKind, int>>* bound = nullptr);

// After a run: each used entry of `report` (bind_collectives' "collectives" part, `bound` its
// kinds and tiers) gets how many collective steps it costed ("applied_to_steps"), and one that
// costed none says why it changed nothing ("replaced_nothing"); returns one line for each of those
// and for each entry not bound at all (but those a strategy reads itself, Parm's "overlap").
std::vector<std::string> report_collectives_applied(schema::Json& report, const std::vector<std::pair<network::CollectiveKind, int>>& bound,
                                                    const network::AlphaBetaTable& params, const cluster::Topology& topology);

// Kernel tables for one GPU kind; `report` gets what was used or why not.
compute::KernelTables bind_kernels(const calibration::Profile& profile, const cluster::GpuSpec& gpu,
                                   cluster::Dtype dtype, schema::Json& report);

// The catalogue's measured attention kernels as `tables`' attention hooks where these are empty
// (see above); returns what it did, empty when it did nothing.
std::string bind_catalogue_attention(const cluster::GpuSpec& gpu, cluster::Dtype dtype, compute::KernelTables& tables);

// The compute model a run builds for GPU kind `gpu` from the kernel tables of its profile (none:
// `tables` empty): the catalogue's measured attention kernels bound where the profile has none,
// unless the scenario sets its own attention efficiency, which replaces them as it replaces the
// catalogue's efficiencies. `used`, when given: what bind_catalogue_attention did.
compute::ComputeModel bound_compute_model(const cluster::GpuSpec& gpu, const compute::ComputeOptions& options,
                                          compute::KernelTables tables = {}, std::string* used = nullptr);

}  // namespace moesim::simulation
