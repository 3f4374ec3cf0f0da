#include "sim/core/rng.hpp"

#include <cmath>

namespace moesim {

namespace {
// FNV-1a, to fold a stream name into the seed.
std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}
// splitmix64 finaliser: decorrelates nearby seeds.
std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
}  // namespace

Rng Rng::derive(std::uint64_t seed, std::string_view stream, std::uint64_t index) {
  return Rng(mix(seed ^ mix(fnv1a(stream) + index)));
}

double Rng::uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

std::uint64_t Rng::below(std::uint64_t n) {
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  std::uint64_t x = 0;
  do x = engine_();
  while (x >= limit);
  return x % n;
}

double Rng::normal() {
  if (has_spare_normal_) {
    has_spare_normal_ = false;
    return spare_normal_;
  }
  double u = 0, v = 0, s = 0;
  do {
    u = 2 * uniform() - 1;
    v = 2 * uniform() - 1;
    s = u * u + v * v;
  } while (s >= 1 || s == 0);
  const double f = std::sqrt(-2 * std::log(s) / s);
  spare_normal_ = v * f;
  has_spare_normal_ = true;
  return u * f;
}

std::vector<double> zipf_weights(std::size_t n, double s) {
  std::vector<double> w(n);
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    w[i] = 1.0 / std::pow(static_cast<double>(i + 1), s);
    sum += w[i];
  }
  for (double& x : w) x /= sum;
  return w;
}

}  // namespace moesim
