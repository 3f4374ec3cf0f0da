#include "sim/strategies/hybridep/domain_partition.hpp"

#include <fmt/format.h>

#include "sim/core/error.hpp"

namespace moesim::strategies::hybridep {

namespace {
void check_sizes(const cluster::Topology& topo, const std::vector<std::uint32_t>& sizes) {
  if (sizes.size() != topo.levels().size()) invariant_failed("one expert-domain size per level is needed");
  for (int l = 0; l < topo.level_count(); ++l)
    if (sizes[l] == 0 || topo.levels()[l].count % sizes[l] != 0)
      invariant_failed(fmt::format("expert-domain size {} does not divide level {}'s {} workers", sizes[l], l,
                                   topo.levels()[l].count));
}
}  // namespace

Pattern communication(const cluster::Topology& topo, const std::vector<std::uint32_t>& sizes, std::uint32_t m,
                      std::uint32_t n, int level) {
  const auto lm = topo.location(m), ln = topo.location(n);
  for (int l = 0; l < topo.level_count(); ++l)
    if (l != level && lm[l] != ln[l]) return Pattern::None;
  if (lm[level] == ln[level]) return Pattern::None;
  const std::uint32_t s = sizes[level];
  const std::uint32_t dm = lm[level] / s, om = lm[level] % s, dn = ln[level] / s, on = ln[level] % s;
  if (dm == dn && om != on) return Pattern::AllGather;
  if (dm != dn && om == on) return Pattern::AllToAll;
  return Pattern::None;
}

std::vector<LevelGroups> build_groups(const cluster::Topology& topo, const std::vector<std::uint32_t>& sizes) {
  check_sizes(topo, sizes);
  std::vector<LevelGroups> out(topo.level_count());
  for (int l = 0; l < topo.level_count(); ++l) {
    const std::uint32_t sf = topo.levels()[l].count, s = sizes[l], stride = topo.gpus_per_worker(l);
    // GPUs whose coordinate at l is 0 are the "lines" along level l: every other coordinate fixed.
    for (std::uint32_t base = 0; base < topo.gpu_count(); ++base) {
      if (topo.coordinate(base, l) != 0) continue;
      for (std::uint32_t d = 0; s > 1 && d < sf / s; ++d) {
        std::vector<std::uint32_t> g;
        for (std::uint32_t o = 0; o < s; ++o) g.push_back(base + (d * s + o) * stride);
        out[l].all_gather.push_back(std::move(g));
      }
      for (std::uint32_t o = 0; sf / s > 1 && o < s; ++o) {
        std::vector<std::uint32_t> g;
        for (std::uint32_t d = 0; d < sf / s; ++d) g.push_back(base + (d * s + o) * stride);
        out[l].all_to_all.push_back(std::move(g));
      }
    }
  }
  return out;
}

PairCounts count_pairs(const cluster::Topology& topo, const std::vector<std::uint32_t>& sizes) {
  PairCounts c;
  for (const LevelGroups& lg : build_groups(topo, sizes)) {
    for (const auto& g : lg.all_gather) c.all_gather += g.size() * (g.size() - 1);
    for (const auto& g : lg.all_to_all) c.all_to_all += g.size() * (g.size() - 1);
  }
  return c;
}

}  // namespace moesim::strategies::hybridep
