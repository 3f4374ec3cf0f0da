#include "sim/blocks/fused_dispatch.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <map>

#include "sim/core/error.hpp"

namespace moesim::blocks {

std::vector<double> distinct_per_copy(const std::vector<double>& share, int experts, int top_k) {
  std::vector<double> out(share.size(), 1.0);
  for (std::size_t r = 0; r < share.size(); ++r) {
    const double q = share[r];
    if (q <= 0) continue;
    double none = 1;
    for (int i = 0; i < top_k && i < experts; ++i) none *= std::max(0.0, 1.0 - q * experts / (experts - i));
    out[r] = std::min(1.0, (1.0 - none) / (top_k * q));
  }
  return out;
}

DomainLayout domain_layout(const cluster::Topology& topo, std::span<const std::uint32_t> gpus) {
  DomainLayout out;
  out.domain.resize(gpus.size());
  out.local.resize(gpus.size());
  const int tier = topo.tier_count() - 2;  // its workers are what the GPUs' own fabric joins
  std::map<std::uint32_t, std::uint32_t> index;
  for (std::size_t r = 0; r < gpus.size(); ++r) {
    const std::uint32_t worker = tier >= 0 ? topo.tier_worker(gpus[r], tier) : 0;
    const auto [it, fresh] = index.try_emplace(worker, static_cast<std::uint32_t>(out.members.size()));
    if (fresh) out.members.emplace_back();
    out.domain[r] = it->second;
    out.local[r] = static_cast<std::uint32_t>(out.members[it->second].size());
    out.members[it->second].push_back(static_cast<std::uint32_t>(r));
  }
  return out;
}

FusedTraffic fused_traffic(const network::TrafficMatrix& copies, const std::vector<double>& rank_share, int experts,
                           int top_k, const DomainLayout& layout) {
  const std::uint32_t n = copies.size();
  const std::vector<double> per_copy = distinct_per_copy(rank_share, experts, top_k);
  FusedTraffic out;
  if (copies.is_factored()) {
    std::vector<double> q = copies.q();
    for (std::uint32_t r = 0; r < n; ++r) q[r] *= per_copy[r];
    out.dispatch = std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::factored(copies.a(), std::move(q)));
  } else {
    std::vector<double> bytes(static_cast<std::size_t>(n) * n, 0.0);
    for (std::uint32_t s = 0; s < n; ++s)
      for (std::uint32_t d = 0; d < n; ++d) bytes[static_cast<std::size_t>(s) * n + d] = copies.at(s, d) * per_copy[d];
    out.dispatch = std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::dense(n, std::move(bytes)));
  }
  out.combine = std::make_shared<network::TrafficMatrix>(out.dispatch->transposed());
  if (layout.domains() <= 1) return out;

  if (n > network::kMaxDenseRanks)
    throw InfeasibleError(fmt::format("a fused EP dispatch across NVLink domains is modelled for groups of up to {} "
                                      "GPUs (this one has {}); use \"ep_backend\": \"nccl\" or a smaller \"ep\"",
                                      network::kMaxDenseRanks, n));
  // Each domain's share of a source's copies de-duplicates the network hop.
  std::vector<double> domain_share(layout.domains(), 0.0);
  for (std::uint32_t r = 0; r < n; ++r) domain_share[layout.domain[r]] += rank_share[r];
  const std::vector<double> domain_per_copy = distinct_per_copy(domain_share, experts, top_k);
  // The relay in domain D of source s: D's member with s's local index (wrapping when D is smaller).
  const auto relay = [&](std::uint32_t s, std::uint32_t d) {
    const auto& members = layout.members[d];
    return members[layout.local[s] % members.size()];
  };
  std::vector<double> cross(static_cast<std::size_t>(n) * n, 0.0), fanout(static_cast<std::size_t>(n) * n, 0.0);
  for (std::uint32_t s = 0; s < n; ++s)
    for (std::uint32_t d = 0; d < n; ++d) {
      const double c = copies.at(s, d);
      if (c <= 0) continue;
      const std::uint32_t dom = layout.domain[d];
      const std::uint32_t via = dom == layout.domain[s] ? s : relay(s, dom);
      if (via != s) cross[static_cast<std::size_t>(s) * n + via] += c * domain_per_copy[dom];
      if (via != d) fanout[static_cast<std::size_t>(via) * n + d] += c * per_copy[d];
    }
  auto rdma = std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::dense(n, std::move(cross)));
  auto nvlink = std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::dense(n, std::move(fanout)));
  out.combine_stages = {std::make_shared<network::TrafficMatrix>(nvlink->transposed()),
                        std::make_shared<network::TrafficMatrix>(rdma->transposed())};
  out.dispatch_stages = {std::move(rdma), std::move(nvlink)};
  return out;
}

}  // namespace moesim::blocks
