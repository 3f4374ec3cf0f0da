#include "sim/parallel/layout.hpp"

#include <array>
#include <fmt/format.h>

namespace moesim::parallel {

namespace {

// A rank generator of four dimensions, the first varying fastest; `mask` marks the dimensions a
// group varies over. Groups are numbered by the other dimensions (first fastest), ranks inside a
// group by the masked ones (first fastest), as Megatron-Core's generate_masked_orthogonal_rank_groups.
std::vector<std::vector<std::uint32_t>> masked_groups(const std::array<int, 4>& size, const std::array<bool, 4>& mask) {
  std::array<std::uint32_t, 4> stride{};
  std::uint32_t s = 1;
  for (int d = 0; d < 4; ++d) {
    stride[d] = s;
    s *= static_cast<std::uint32_t>(size[d]);
  }
  std::vector<int> in, out;
  for (int d = 0; d < 4; ++d) (mask[d] ? in : out).push_back(d);
  std::uint32_t group_size = 1, groups = 1;
  for (int d : in) group_size *= static_cast<std::uint32_t>(size[d]);
  for (int d : out) groups *= static_cast<std::uint32_t>(size[d]);
  const auto offset = [&](std::uint32_t index, const std::vector<int>& dims) {
    std::uint32_t o = 0;
    for (int d : dims) {
      o += index % static_cast<std::uint32_t>(size[d]) * stride[d];
      index /= static_cast<std::uint32_t>(size[d]);
    }
    return o;
  };
  std::vector<std::vector<std::uint32_t>> result(groups);
  for (std::uint32_t g = 0; g < groups; ++g) {
    const std::uint32_t base = offset(g, out);
    result[g].reserve(group_size);
    for (std::uint32_t r = 0; r < group_size; ++r) result[g].push_back(base + offset(r, in));
  }
  return result;
}

}  // namespace

ParallelLayout::ParallelLayout(LayoutSizes sizes, std::uint32_t gpus)
    : s_(sizes),
      gpus_(gpus),
      dp_(static_cast<int>(gpus / static_cast<std::uint32_t>(sizes.tp * sizes.cp * sizes.pp))),
      edp_(static_cast<int>(gpus / static_cast<std::uint32_t>(sizes.etp * sizes.ep * sizes.pp))) {}

std::vector<std::uint32_t> ParallelLayout::stage_gpus(int stage) const {
  std::vector<std::uint32_t> out(stage_size());
  for (std::uint32_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::uint32_t>(stage) * stage_size() + i;
  return out;
}

std::vector<std::vector<std::uint32_t>> ParallelLayout::groups(Dim dim) const {
  const std::array<int, 4> dense{s_.tp, s_.cp, dp_, s_.pp}, expert{s_.etp, s_.ep, edp_, s_.pp};
  switch (dim) {
    case Dim::Tp: return masked_groups(dense, {true, false, false, false});
    case Dim::Cp: return masked_groups(dense, {false, true, false, false});
    case Dim::Dp: return masked_groups(dense, {false, false, true, false});
    case Dim::DpCp: return masked_groups(dense, {false, true, true, false});
    case Dim::TpCp: return masked_groups(dense, {true, true, false, false});
    case Dim::Pp: return masked_groups(dense, {false, false, false, true});
    case Dim::Etp: return masked_groups(expert, {true, false, false, false});
    case Dim::Ep: return masked_groups(expert, {false, true, false, false});
    case Dim::Edp: return masked_groups(expert, {false, false, true, false});
  }
  return {};
}

std::vector<std::vector<std::uint32_t>> ParallelLayout::groups_in_stage(Dim dim, int stage) const {
  std::vector<std::vector<std::uint32_t>> out;
  for (auto& g : groups(dim))
    if (stage_of(g.front()) == stage) out.push_back(std::move(g));
  return out;
}

std::string_view to_string(PipelineSchedule schedule) { return name_of(kPipelineScheduleNames, schedule); }

std::vector<int> stage_layers(int layers, int v, int first, int last, std::string* why) {
  if (v == 1) return {layers};
  int rest = layers, middle = v;
  if (first >= 0) rest -= first, --middle;
  if (last >= 0) rest -= last, --middle;
  if (rest < 0 || (middle == 0 ? rest != 0 : rest % middle != 0)) {
    if (why)
      *why = middle == 0 ? fmt::format("first and last stage layers ({} + {}) are not the model's {} layers", first, last, layers)
                         : fmt::format("{} layers do not split evenly over {} virtual stages", rest, middle);
    return {};
  }
  std::vector<int> out(v, middle > 0 ? rest / middle : 0);
  if (first >= 0) out.front() = first;
  if (last >= 0) out.back() = last;
  return out;
}

std::vector<LayoutProblem> layout_problems(const LayoutSizes& s, std::uint64_t gpus, int experts) {
  std::vector<LayoutProblem> out;
  const std::uint64_t dense = static_cast<std::uint64_t>(s.tp) * s.cp * s.pp;
  if (gpus % dense != 0) {
    out.push_back({"tp", fmt::format("tp {} x cp {} x pp {} = {} does not divide the cluster's {} GPUs", s.tp, s.cp, s.pp,
                                     dense, gpus),
                   "choose tp, cp and pp whose product divides the GPU count (dp is what is left)"});
    return out;
  }
  const std::uint64_t stage = gpus / static_cast<std::uint64_t>(s.pp);
  const std::uint64_t expert = static_cast<std::uint64_t>(s.etp) * s.ep;
  if (stage % expert != 0)
    out.push_back({"ep", fmt::format("etp {} x ep {} = {} does not divide the {} GPUs of a pipeline stage", s.etp, s.ep,
                                     expert, stage),
                   fmt::format("choose ep (and etp) whose product divides {} (the GPUs / pp)", stage)});
  if (experts % s.ep != 0)
    out.push_back({"ep", fmt::format("the model's {} experts are not divisible by ep {}", experts, s.ep),
                   "choose an ep dividing model.experts"});
  return out;
}

}  // namespace moesim::parallel
