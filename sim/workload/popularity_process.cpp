#include "sim/workload/popularity_process.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <boost/math/distributions/normal.hpp>
#include <charconv>
#include <cmath>
#include <numeric>
#include <string_view>

#include "sim/core/error.hpp"
#include "sim/core/input_file.hpp"
#include "sim/core/rng.hpp"

namespace moesim::workload {

PopularityTable::PopularityTable(int experts, int layers, int iterations)
    : experts_(experts),
      layers_(layers),
      iterations_(iterations),
      shares_(static_cast<std::size_t>(experts) * layers * iterations, 0.0) {}

std::span<const double> PopularityTable::at(int iteration, int layer) const {
  const auto offset = (static_cast<std::size_t>(iteration) * layers_ + layer) * experts_;
  return {shares_.data() + offset, static_cast<std::size_t>(experts_)};
}

std::span<double> PopularityTable::at(int iteration, int layer) {
  const auto offset = (static_cast<std::size_t>(iteration) * layers_ + layer) * experts_;
  return {shares_.data() + offset, static_cast<std::size_t>(experts_)};
}

namespace {

// Shares ∝ exp(logits), computed from the largest logit down so no term overflows.
void softmax(const std::vector<double>& logits, std::span<double> out) {
  const double top = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (std::size_t e = 0; e < logits.size(); ++e) sum += out[e] = std::exp(logits[e] - top);
  for (double& p : out) p /= sum;
}

}  // namespace

PopularityTable generate_popularity(const PopularityProcessParams& params, int experts, int layers, int iterations,
                                    std::uint64_t seed) {
  PopularityTable table(experts, layers, iterations);
  const boost::math::normal_distribution<double> standard;
  const double keep = 1.0 - params.reversion;
  // The walk's stationary spread around the long-run level (without spikes): σ/√(1 − (1 − θ)²).
  const double stationary = params.volatility / std::sqrt(std::max(1e-12, 1.0 - keep * keep));
  for (int layer = 0; layer < layers; ++layer) {
    Rng rng = Rng::derive(seed, "popularity", static_cast<std::uint64_t>(layer));
    std::vector<int> order(experts);
    std::iota(order.begin(), order.end(), 0);
    rng.shuffle(order);
    std::vector<double> level(experts), logit(experts);
    for (int i = 0; i < experts; ++i)
      level[order[i]] = params.spread * boost::math::quantile(standard, (i + 0.5) / experts);
    for (int e = 0; e < experts; ++e) logit[e] = level[e] + stationary * rng.normal();
    for (int it = 0; it < iterations; ++it) {
      softmax(logit, table.at(it, layer));
      for (int e = 0; e < experts; ++e) {
        const double step = params.volatility * rng.normal();
        const double spike = rng.uniform() < params.spike_probability ? params.spike_size : 0.0;
        logit[e] = level[e] + keep * (logit[e] - level[e]) + step + spike;
      }
    }
  }
  return table;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> cells;
  for (std::size_t start = 0;;) {
    const std::size_t comma = line.find(',', start);
    cells.push_back(trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) return cells;
    start = comma + 1;
  }
}

}  // namespace

PopularityTable read_popularity_trace(const std::string& path, int experts, int layers, int iterations,
                                      const std::vector<int>& moe_layers) {
  const std::string text = read_input_file(path);
  constexpr std::array<std::string_view, 4> kColumns{"iteration", "layer", "expert", "tokens"};
  const std::string example = "a header \"iteration,layer,expert,tokens\", then rows such as \"0,1,5,2048\"";
  std::array<int, 4> column{-1, -1, -1, -1};
  PopularityTable table(experts, layers, iterations);
  std::vector<char> seen(static_cast<std::size_t>(layers) * iterations, 0);
  std::size_t line_no = 0, width = 0;
  std::string_view rest = text;
  while (!rest.empty()) {
    const std::size_t end = rest.find('\n');
    const std::string_view line = trim(rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    const auto cells = split(line);
    const std::string where = fmt::format("line {}", line_no);
    if (column[0] < 0) {  // the header
      for (std::size_t c = 0; c < cells.size(); ++c)
        for (std::size_t k = 0; k < kColumns.size(); ++k)
          if (cells[c] == kColumns[k]) column[k] = static_cast<int>(c);
      for (std::size_t k = 0; k < kColumns.size(); ++k)
        if (column[k] < 0)
          throw InputError(path, where, fmt::format("the header has no column \"{}\"", kColumns[k]), example);
      width = cells.size();
      continue;
    }
    if (cells.size() != width)
      throw InputError(path, where, fmt::format("{} cells where the header has {}", cells.size(), width), example);
    std::array<double, 4> value{};
    for (std::size_t k = 0; k < kColumns.size(); ++k) {
      const std::string_view cell = cells[static_cast<std::size_t>(column[k])];
      const auto [ptr, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), value[k]);
      if (ec != std::errc{} || ptr != cell.data() + cell.size() || !std::isfinite(value[k]) || value[k] < 0 ||
          (k < 3 && value[k] != std::floor(value[k])))
        throw InputError(path, fmt::format("{}, column {}", where, kColumns[k]),
                         fmt::format("\"{}\" is not a {}", cell, k < 3 ? "whole number ≥ 0" : "token count ≥ 0"),
                         example);
    }
    const double it = value[0], layer = value[1], expert = value[2];
    if (it >= iterations) continue;  // beyond the run: not needed
    if (layer >= layers)
      throw InputError(path, fmt::format("{}, column layer", where),
                       fmt::format("layer {} is past the model's {} layers", layer, layers),
                       "number layers from 0 as the model does");
    if (expert >= experts)
      throw InputError(path, fmt::format("{}, column expert", where),
                       fmt::format("expert {} is past the model's {} experts", expert, experts),
                       "number experts from 0, one trace per model (model.experts)");
    table.at(static_cast<int>(it), static_cast<int>(layer))[static_cast<std::size_t>(expert)] += value[3];
    seen[static_cast<std::size_t>(it) * layers + static_cast<std::size_t>(layer)] = 1;
  }
  if (column[0] < 0) throw InputError(path, "line 1", "the trace is empty", example);
  for (int it = 0; it < iterations; ++it)
    for (const int layer : moe_layers) {
      auto shares = table.at(it, layer);
      const double total = std::accumulate(shares.begin(), shares.end(), 0.0);
      if (!seen[static_cast<std::size_t>(it) * layers + layer] || total <= 0)
        throw InputError(path, "rows",
                         fmt::format("no tokens for iteration {}, layer {} (the run has {} iterations)", it, layer,
                                     iterations),
                         "give every MoE layer's tokens for each iteration the run simulates, or set "
                         "training.iterations to the iterations the trace covers");
      for (double& p : shares) p /= total;
    }
  return table;
}

}  // namespace moesim::workload
