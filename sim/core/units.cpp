#include "sim/core/units.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fmt/format.h>
#include <utility>

#include "sim/core/error.hpp"

namespace moesim {

void past_the_clock(double picoseconds) {
  throw InfeasibleError(fmt::format(
        "a duration of {} passes the {:.0f} days moesim's clock covers; check the bandwidths and rates for a value "
        "in the wrong unit (Gbps for GB/s) or far too small",
        std::isfinite(picoseconds) ? fmt::format("{:.3g} s", picoseconds * 1e-12) : std::string("∞"),
      static_cast<double>(kMaxTime) * 1e-12 / 86400));
}

Time ps_to_time(double picoseconds) {
  if (!(picoseconds > -0.5 && picoseconds <= static_cast<double>(kMaxTime))) past_the_clock(picoseconds);
  return static_cast<Time>(std::llround(picoseconds));
}

Time Bandwidth::transfer_time(double bytes) const { return ps_to_time(bytes * 1e12 / bytes_per_second); }

std::optional<double> parse_number(std::string_view text) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

Time seconds_to_time(double seconds) { return ps_to_time(seconds * 1e12); }
double time_to_seconds(Time t) { return static_cast<double>(t) * 1e-12; }
double time_to_ms(Time t) { return static_cast<double>(t) * 1e-9; }

namespace {

// Splits "12.5 GB/s" into 12.5 and "GB/s". Fails on an empty unit (a bare number).
std::optional<std::pair<double, std::string>> split_number(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  double value = 0.0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr == text.data()) return std::nullopt;
  std::string_view unit(ptr, static_cast<std::size_t>(text.data() + text.size() - ptr));
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.front()))) unit.remove_prefix(1);
  if (unit.empty() || !std::isfinite(value) || value < 0) return std::nullopt;
  return std::make_pair(value, std::string(unit));
}

template <std::size_t N>
std::optional<double> lookup(const std::array<std::pair<const char*, double>, N>& table, const std::string& unit) {
  for (const auto& [name, scale] : table)
    if (unit == name) return scale;
  return std::nullopt;
}

const std::array<std::pair<const char*, double>, 6> kTimeUnits{{
    {"ps", 1.0}, {"ns", 1e3}, {"us", 1e6}, {"ms", 1e9}, {"s", 1e12}, {"min", 60e12}}};

const std::array<std::pair<const char*, double>, 16> kBandwidthUnits{{
    {"bps", 1.0 / 8}, {"Kbps", 1e3 / 8}, {"Mbps", 1e6 / 8}, {"Gbps", 1e9 / 8}, {"Tbps", 1e12 / 8},
    {"B/s", 1.0}, {"KB/s", 1e3}, {"MB/s", 1e6}, {"GB/s", 1e9}, {"TB/s", 1e12},
    {"KiB/s", 1024.0}, {"MiB/s", 1048576.0}, {"GiB/s", 1073741824.0}, {"TiB/s", 1099511627776.0},
    {"Gb/s", 1e9 / 8}, {"Mb/s", 1e6 / 8}}};

const std::array<std::pair<const char*, double>, 9> kByteUnits{{
    {"B", 1.0}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
    {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}}};

const std::array<std::pair<const char*, double>, 5> kFlopsUnits{{
    {"FLOPS", 1.0}, {"GFLOPS", 1e9}, {"TFLOPS", 1e12}, {"PFLOPS", 1e15}, {"MFLOPS", 1e6}}};

}  // namespace

std::optional<double> parse_time_ps(std::string_view text) {
  auto split = split_number(text);
  if (!split) return std::nullopt;
  auto scale = lookup(kTimeUnits, split->second);
  if (!scale) return std::nullopt;
  return split->first * *scale;
}

std::optional<Time> parse_time(std::string_view text) {
  const auto ps = parse_time_ps(text);
  if (!ps || *ps > static_cast<double>(kMaxTime)) return std::nullopt;
  return static_cast<Time>(std::llround(*ps));
}

std::optional<Bandwidth> parse_bandwidth(std::string_view text) {
  auto split = split_number(text);
  if (!split) return std::nullopt;
  auto scale = lookup(kBandwidthUnits, split->second);
  if (!scale) return std::nullopt;
  return Bandwidth{split->first * *scale};
}

std::optional<double> parse_bytes(std::string_view text) {
  auto split = split_number(text);
  if (!split) return std::nullopt;
  auto scale = lookup(kByteUnits, split->second);
  if (!scale) return std::nullopt;
  return split->first * *scale;
}

std::optional<double> parse_flops(std::string_view text) {
  auto split = split_number(text);
  if (!split) return std::nullopt;
  auto scale = lookup(kFlopsUnits, split->second);
  if (!scale) return std::nullopt;
  return split->first * *scale;
}

namespace {
template <std::size_t N>
std::vector<std::string> names_in(const std::array<std::pair<const char*, double>, N>& table) {
  std::vector<std::string> out;
  for (const auto& [name, scale] : table) out.emplace_back(name);
  return out;
}
}  // namespace

std::vector<std::string> unit_names(UnitKind kind) {
  switch (kind) {
    case UnitKind::Time: return names_in(kTimeUnits);
    case UnitKind::Bandwidth: return names_in(kBandwidthUnits);
    case UnitKind::Bytes: return names_in(kByteUnits);
    case UnitKind::Flops: return names_in(kFlopsUnits);
  }
  return {};
}

std::string unit_help(UnitKind kind) {
  switch (kind) {
    case UnitKind::Time: return "a time with a unit, e.g. \"5us\" (ps, ns, us, ms, s)";
    case UnitKind::Bandwidth:
      return "a bandwidth with a unit, e.g. \"10Gbps\" (bits/s: bps, Mbps, Gbps, Tbps) or \"50GB/s\" "
             "(bytes/s: MB/s, GB/s, TB/s, GiB/s)";
    case UnitKind::Bytes: return "a size with a unit, e.g. \"80GiB\" (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)";
    case UnitKind::Flops: return "a compute rate with a unit, e.g. \"312TFLOPS\" (GFLOPS, TFLOPS, PFLOPS)";
  }
  return "a value with a unit";
}

std::string format_time(Time t) {
  const double v = static_cast<double>(t);
  if (std::llabs(t) >= kSecond) return fmt::format("{:.4g} s", v / 1e12);
  if (std::llabs(t) >= kMillisecond) return fmt::format("{:.4g} ms", v / 1e9);
  if (std::llabs(t) >= kMicrosecond) return fmt::format("{:.4g} us", v / 1e6);
  if (std::llabs(t) >= kNanosecond) return fmt::format("{:.4g} ns", v / 1e3);
  return fmt::format("{} ps", t);
}

std::string format_bytes(double bytes) {
  const std::array<const char*, 5> names{"B", "KiB", "MiB", "GiB", "TiB"};
  std::size_t i = 0;
  while (bytes >= 1024.0 && i + 1 < names.size()) {
    bytes /= 1024.0;
    ++i;
  }
  return fmt::format("{:.4g} {}", bytes, names[i]);
}

std::string format_bandwidth(Bandwidth bw) {
  const double gbps = bw.bytes_per_second * 8 / 1e9;
  return fmt::format("{:.4g}Gbps", gbps);
}

}  // namespace moesim
