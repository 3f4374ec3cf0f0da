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

// Zipf popularity over n items with exponent s (s = 0 is uniform), normalised to sum 1, item 0
// the most popular.
std::vector<double> zipf_weights(std::size_t n, double s);

}  // namespace moesim
