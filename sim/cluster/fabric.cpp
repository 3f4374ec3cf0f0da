#include "sim/cluster/fabric.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "sim/core/error.hpp"

namespace moesim::cluster {

std::string_view to_string(Fabric f) { return name_of(kFabricNames, f); }

namespace {

class SwitchFabric final : public TierFabric {
 public:
  explicit SwitchFabric(const Tier& t)
      : count_(t.count), ports_(t.ports), bw_(t.bandwidth.bytes_per_second), oversubscription_(t.oversubscription) {}
  bool switched() const override { return true; }
  double port_capacity() const override { return bw_; }
  double core_capacity() const override { return oversubscription_ > 1 ? count_ * ports_ * bw_ / oversubscription_ : 0.0; }
  double worker_bandwidth() const override { return ports_ * bw_ / oversubscription_; }

 private:
  std::uint32_t count_, ports_;
  double bw_, oversubscription_;
};

class MeshFabric final : public TierFabric {
 public:
  explicit MeshFabric(const Tier& t) : n_(t.count), bw_(t.bandwidth.bytes_per_second) {}
  std::uint32_t links() const override { return n_ * n_; }  // every ordered pair gets a slot (the diagonal unused)
  double link_capacity() const override { return bw_; }
  void route(std::uint32_t i, std::uint32_t j, std::vector<std::uint32_t>& out) const override { out.push_back(i * n_ + j); }
  double worker_bandwidth() const override { return bw_ * std::max(1.0, n_ - 1.0); }
  std::vector<std::pair<std::uint32_t, std::uint32_t>> direct_links() const override {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> out;
    for (std::uint32_t a = 0; a < n_; ++a)
      for (std::uint32_t b = a + 1; b < n_; ++b) out.emplace_back(a, b);
    return out;
  }

 private:
  std::uint32_t n_;
  double bw_;
};

class RingFabric final : public TierFabric {
 public:
  explicit RingFabric(const Tier& t) : n_(t.count), bw_(t.bandwidth.bytes_per_second) {}
  std::uint32_t links() const override { return n_ * n_; }  // the slots of neighbour pairs are used
  double link_capacity() const override { return bw_; }
  void route(std::uint32_t i, std::uint32_t j, std::vector<std::uint32_t>& out) const override {
    // Hop by hop, the shorter way round.
    const std::uint32_t forward = (j + n_ - i) % n_;
    const bool clockwise = forward <= n_ - forward;
    for (std::uint32_t a = i; a != j;) {
      const std::uint32_t b = clockwise ? (a + 1) % n_ : (a + n_ - 1) % n_;
      out.push_back(a * n_ + b);
      a = b;
    }
  }
  double worker_bandwidth() const override { return 2 * bw_ / std::max(1.0, n_ / 4.0); }
  std::vector<std::pair<std::uint32_t, std::uint32_t>> direct_links() const override {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> out;
    for (std::uint32_t c = 0; n_ > 1 && c < n_; ++c)
      if (!(n_ == 2 && c == 1)) out.emplace_back(c, (c + 1) % n_);
    return out;
  }

 private:
  std::uint32_t n_;
  double bw_;
};

}  // namespace

std::unique_ptr<TierFabric> TierFabric::make(const Tier& tier) {
  switch (tier.fabric) {
    case Fabric::Switch: return std::make_unique<SwitchFabric>(tier);
    case Fabric::FullMesh: return std::make_unique<MeshFabric>(tier);
    case Fabric::Ring: return std::make_unique<RingFabric>(tier);
  }
  invariant_failed("unknown fabric");
}

}  // namespace moesim::cluster
