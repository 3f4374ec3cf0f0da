#include "sim/search/layout_space.hpp"

#include <algorithm>

#include "sim/parallel/layout.hpp"

namespace moesim::search {

namespace {

std::vector<int> powers_of_two(int from, int up_to) {
  std::vector<int> v;
  for (int x = from; x <= up_to; x *= 2) v.push_back(x);
  return v;
}

}  // namespace

SearchSpace default_space(const LayoutInputs& in, const ScenarioChoices& own) {
  SearchSpace s;
  s.tp = powers_of_two(1, std::min(8, in.domain_gpus));
  s.pp = powers_of_two(1, std::min(16, in.layers));
  s.vp = powers_of_two(1, 8);
  s.cp = {own.cp};
  s.ep = powers_of_two(1, in.experts);
  s.etp = {own.etp};
  s.mbs = powers_of_two(1, 8);
  s.recompute = {own.recompute};
  s.sharding = {own.sharding};
  s.dispatcher = {own.dispatcher};
  return s;
}

double balanced_capacity(int experts, int top_k, int ep) {
  return static_cast<double>(top_k) / (static_cast<double>(ep) * std::min(top_k, experts / ep));
}

std::pair<int, int> stage_split(int layers, int stages) {
  if (stages <= 1) return {layers, layers};
  if (layers % stages == 0) return {layers / stages, layers / stages};
  if (stages == 2) return layers > 1 ? std::pair{(layers + 1) / 2, layers / 2} : std::pair{0, 0};
  const int longest = (layers + stages - 1) / stages;
  for (int first = longest; first >= 1; --first)
    for (int last = first; last >= 1; --last) {
      const int rest = layers - first - last;
      if (rest > 0 && rest % (stages - 2) == 0 && rest / (stages - 2) >= first) return {first, last};
    }
  return {0, 0};
}

std::vector<Layout> enumerate_layouts(const LayoutInputs& in, const SearchSpace& space) {
  std::vector<Layout> out;
  for (int tp : space.tp) {
    if (tp > in.domain_gpus || in.heads % tp != 0 || in.kv_heads % tp != 0) continue;
    for (int pp : space.pp)
      for (int vp : space.vp) {
        if (vp > 1 && pp == 1) continue;
        const auto [first, last] = stage_split(in.layers, pp * vp);
        if (first == 0) continue;
        if (pp * vp > in.layers) continue;
        for (int cp : space.cp) {
          if (in.sequence % (2 * cp) != 0 && cp > 1) continue;
          for (int ep : space.ep)
            for (int etp : space.etp) {
              if (etp > in.domain_gpus || in.expert_ffn % etp != 0) continue;
              const parallel::LayoutSizes sizes{.tp = tp, .cp = cp, .pp = pp, .vp = vp, .ep = ep, .etp = etp};
              if (!parallel::layout_problems(sizes, in.gpus, in.experts).empty()) continue;
              const std::uint64_t dp = in.gpus / (static_cast<std::uint64_t>(tp) * cp * pp);
              for (int mbs : space.mbs) {
                const std::uint64_t per_step = dp * static_cast<std::uint64_t>(mbs);
                if (in.global_batch % per_step != 0) continue;
                const std::uint64_t microbatches = in.global_batch / per_step;
                if (vp > 1 && microbatches % static_cast<std::uint64_t>(pp) != 0) continue;
                for (const auto& r : space.recompute)
                  for (const auto& sharding : space.sharding)
                    for (const auto& dispatcher : space.dispatcher) {
                      Layout l{tp, pp, vp, ep, mbs, r, cp, etp, sharding, dispatcher};
                      l.first_stage_layers = first, l.last_stage_layers = last;
                      out.push_back(l);
                    }
              }
            }
        }
      }
  }
  return out;
}

}  // namespace moesim::search
