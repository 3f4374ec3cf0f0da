#include "sim/workload/routing.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <utility>

#include "sim/core/error.hpp"
#include "sim/core/rng.hpp"

namespace moesim::workload {

RoutingModel::RoutingModel(RoutingConfig config, int experts, int layers, int iterations, std::uint64_t seed)
    : config_(std::move(config)), experts_(experts), seed_(seed) {
  if (config_.kind == RoutingKind::Process)
    table_ = std::make_shared<const PopularityTable>(generate_popularity(config_.process, experts, layers, iterations, seed));
  if (config_.kind == RoutingKind::Trace) table_ = config_.trace;
  if (table_ && (table_->experts() != experts || table_->layers() < layers || table_->iterations() < iterations))
    invariant_failed("routing: the popularity table does not cover the run's experts, layers and iterations");
}

std::vector<double> RoutingModel::popularity(int iteration, int layer) const {
  if (table_) {
    const auto shares = table_->at(iteration, layer);
    return {shares.begin(), shares.end()};
  }
  if (config_.kind == RoutingKind::Uniform) return std::vector<double>(experts_, 1.0 / experts_);
  const std::vector<double> ranked = zipf_weights(static_cast<std::size_t>(experts_), config_.zipf_exponent);
  std::vector<int> order(experts_);
  std::iota(order.begin(), order.end(), 0);
  const int epoch = config_.resample_each_iteration ? iteration : 0;
  Rng rng = Rng::derive(seed_, "routing", (static_cast<std::uint64_t>(epoch) << 32) | static_cast<std::uint32_t>(layer));
  rng.shuffle(order);
  std::vector<double> p(experts_);
  for (int rank = 0; rank < experts_; ++rank) p[order[rank]] = ranked[rank];
  return p;
}

bool RoutingModel::sampled() const {
  return config_.sampling != RoutingSampling::Expected;
}

Rng RoutingModel::sampler(int iteration, int layer, int microbatch) const {
  return Rng::derive(seed_, "routing/sample",
                     (static_cast<std::uint64_t>(iteration) << 40) | (static_cast<std::uint64_t>(layer) << 20) |
                         static_cast<std::uint32_t>(microbatch));
}

namespace {

// Binomial(n, p) from the seeded stream.
double binomial(Rng& rng, double n, double p) {
  if (n <= 0 || p <= 0) return 0;
  if (p >= 1) return n;
  const double mean = n * p;
  if (mean < 30 || n * (1 - p) < 30) {
    if (p > 0.5) return n - binomial(rng, n, 1 - p);
    // Inversion: walk the pmf from 0; expected O(n·p) steps.
    double u = rng.uniform();
    double q = std::pow(1 - p, n);
    const double ratio = p / (1 - p);
    double k = 0;
    while (u > q && k < n) {
      u -= q;
      q *= (n - k) / (k + 1) * ratio;
      ++k;
    }
    return k;
  }
  // Normal approximation with continuity correction.
  const double z = rng.normal();
  return std::clamp(std::floor(mean + z * std::sqrt(mean * (1 - p)) + 0.5), 0.0, n);
}

}  // namespace

std::vector<double> sample_copies(const std::vector<double>& popularity, double copies, Rng& rng) {
  std::vector<double> out(popularity.size(), 0.0);
  double left = std::round(copies), mass = 1.0;
  for (std::size_t e = 0; e < popularity.size() && left > 0; ++e) {
    const double p = mass > 0 ? std::min(1.0, popularity[e] / mass) : 1.0;
    const double x = e + 1 == popularity.size() ? left : binomial(rng, left, p);
    out[e] = x;
    left -= x;
    mass -= popularity[e];
  }
  return out;
}

std::vector<double> expert_capacities(double copies, double capacity_factor, std::size_t experts,
                                      const std::vector<double>& shares) {
  if (!shares.empty() && shares.size() != experts) invariant_failed("capacity shares of another expert count");
  std::vector<double> out(experts, 0.0);
  if (capacity_factor <= 0) return out;
  for (std::size_t e = 0; e < experts; ++e) {
    const double share = shares.empty() ? 1.0 / static_cast<double>(experts) : shares[e];
    // f·copies/E written as GShard does, so the uniform case keeps its exact value.
    out[e] = std::ceil(shares.empty() ? capacity_factor * copies / static_cast<double>(experts) : capacity_factor * copies * share);
  }
  return out;
}

AliasTable::AliasTable(const std::vector<double>& weights) : slots_(weights.size()) {
  const std::size_t n = weights.size();
  double sum = 0;
  for (const double w : weights) sum += std::max(0.0, w);
  if (n == 0 || sum <= 0) invariant_failed("alias table over no weight");
  // Scaled to mean 1: a slot below 1 takes the rest from a category above 1 (its alias).
  std::vector<double> scaled(n);
  std::vector<std::uint32_t> small, large;
  for (std::size_t i = 0; i < n; ++i) {
    scaled[i] = std::max(0.0, weights[i]) * static_cast<double>(n) / sum;
    slots_[i] = {UINT32_MAX, static_cast<std::uint32_t>(i)};
    (scaled[i] < 1.0 ? small : large).push_back(static_cast<std::uint32_t>(i));
  }
  while (!small.empty() && !large.empty()) {
    const std::uint32_t s = small.back(), l = large.back();
    small.pop_back();
    slots_[s] = {static_cast<std::uint32_t>(std::clamp(std::ldexp(scaled[s], 32), 0.0, 4294967295.0)), l};
    scaled[l] -= 1.0 - scaled[s];
    if (scaled[l] < 1.0) {
      large.pop_back();
      small.push_back(l);
    }
  }
  // What is left is 1 up to rounding: always kept.
}

void SparseCopySampler::draw(const std::vector<double>& popularity, const AliasTable& table, double copies,
                             SparseCopies& out) {
  out.clear();
  // A categorical draw (one 64-bit number and a table look-up) costs a fraction of a binomial by
  // inversion (a pow() and a walk of the pmf): up to 4 copies per category the draws are cheaper.
  const double n = std::round(copies);
  const std::size_t categories = popularity.size();
  if (n >= 4.0 * static_cast<double>(categories)) return sparse_copies(sample_copies(popularity, copies, rng_), out);
  if (count_.size() < categories) {
    count_.resize(categories, 0);
    drawn_.resize((categories + 63) / 64, 0);
  }
  const auto draws = static_cast<std::size_t>(n);
  FastBits bits = bits_;  // in registers: the counts' stores cannot alias it
  std::uint32_t* count = count_.data();
  std::uint64_t* drawn = drawn_.data();
  for (std::size_t i = 0; i < draws; ++i) {
    const std::uint32_t e = table.sample(bits);
    ++count[e];
    drawn[e >> 6] |= std::uint64_t{1} << (e & 63);
  }
  bits_ = bits;
  // In category order, so that what the caller does per category walks its tables in order.
  for (std::size_t w = 0; w < (categories + 63) / 64; ++w) {
    for (std::uint64_t b = drawn[w]; b; b &= b - 1) {
      const auto e = static_cast<std::uint32_t>(w * 64 + static_cast<std::size_t>(std::countr_zero(b)));
      out.emplace_back(e, static_cast<double>(count[e]));
      count[e] = 0;
    }
    drawn[w] = 0;
  }
}

void sparse_copies(const std::vector<double>& dense, SparseCopies& out) {
  out.clear();
  for (std::size_t e = 0; e < dense.size(); ++e)
    if (dense[e] > 0) out.emplace_back(static_cast<std::uint32_t>(e), dense[e]);
}

DispatchPlan apply_capacity(std::vector<double> copies, double capacity) {
  std::vector<double> each(copies.size(), capacity);
  return apply_capacity(std::move(copies), each);
}

DispatchPlan apply_capacity(std::vector<double> copies, const std::vector<double>& capacity) {
  if (capacity.size() != copies.size()) invariant_failed("a capacity per expert of another expert count");
  DispatchPlan plan;
  plan.kept_per_expert = std::move(copies);
  for (std::size_t e = 0; e < plan.kept_per_expert.size(); ++e) {
    double& c = plan.kept_per_expert[e];
    const double kept = capacity[e] > 0 ? std::min(c, capacity[e]) : c;
    plan.capacity = std::max(plan.capacity, capacity[e]);
    plan.dropped += c - kept;
    plan.kept += kept;
    c = kept;
  }
  return plan;
}

DispatchPlan plan_dispatch(const std::vector<double>& popularity, double tokens, int top_k, double capacity_factor,
                           const std::vector<double>& capacity_shares) {
  const double copies = tokens * top_k;
  std::vector<double> want(popularity.size());
  for (std::size_t e = 0; e < popularity.size(); ++e) want[e] = copies * popularity[e];
  return apply_capacity(std::move(want), expert_capacities(copies, capacity_factor, popularity.size(), capacity_shares));
}

}  // namespace moesim::workload
