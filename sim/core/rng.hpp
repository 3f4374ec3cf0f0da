// Seeded random streams. std::mt19937_64 produces the same sequence on every platform; the
// distributions here are written out (not std::*_distribution, whose output is implementation
// defined) so that a scenario gives byte-identical results everywhere.
#pragma once

#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

namespace moesim {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}
  // Independent stream derived from a seed and a name (e.g. "routing/layer3").
  static Rng derive(std::uint64_t seed, std::string_view stream, std::uint64_t index = 0);

  double uniform();                           // [0, 1), 53 random bits
  std::uint64_t bits() { return engine_(); }  // 64 random bits (inline: the routing's per-copy draws)
  std::uint64_t below(std::uint64_t n);       // [0, n), unbiased
  // Standard normal: Marsaglia's polar method (Marsaglia & Bray 1964), which needs no cosine; each
  // accepted pair gives two values, the second kept for the next call.
  double normal();
  template <typename T>
  void shuffle(std::vector<T>& v) {           // Fisher–Yates
    for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
  }

 private:
  std::mt19937_64 engine_;
  double spare_normal_ = 0;
  bool has_spare_normal_ = false;
};

// xoshiro256** (Blackman & Vigna, "Scrambled linear pseudorandom number generators", ACM TOMS
// 2021): 64 bits per call in a few instructions, for the millions of per-copy draws of sampled
// routing at scale; seeded from an Rng stream, so it is as deterministic as the scenario's seed.
class FastBits {
 public:
  explicit FastBits(Rng& from) {
    for (auto& w : s_) w = from.bits();
    if ((s_[0] | s_[1] | s_[2] | s_[3]) == 0) s_[0] = 1;  // the one state it must avoid
  }
  std::uint64_t bits() {
    const std::uint64_t out = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return out;
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

// Zipf popularity over n items with exponent s (s = 0 is uniform), normalised to sum 1, item 0
// the most popular.
std::vector<double> zipf_weights(std::size_t n, double s);

}  // namespace moesim
