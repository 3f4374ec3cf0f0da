#include "sim/scenario/plausibility.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace moesim::scenario {

namespace {

constexpr double kFastestGpuLink = 900e9;   // B/s: NVLink 5 per direction (gpus.json, B200 / GB200)
constexpr double kFastestNicPerGpu = 100e9;  // B/s: 800 Gb/s, NVIDIA ConnectX-8 SuperNIC
constexpr double kSlowestGpuLink = 16e9;     // B/s: PCIe Gen3 x16 per direction (gpus.json)
constexpr double kFar = 2.0;                 // "far outside": past a bound by this factor

std::string gbs(double bytes_per_second) { return fmt::format("{:.4g} GB/s", bytes_per_second / 1e9); }

// "450Gbps" → {"450", "Gbps"}.
std::pair<std::string, std::string> number_and_unit(const std::string& text) {
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.' || text[i] == 'e' ||
                             text[i] == 'E' || text[i] == '+' || text[i] == '-'))
    ++i;
  std::size_t j = i;
  while (j < text.size() && text[j] == ' ') ++j;
  return {text.substr(0, i), text.substr(j)};
}

bool in_bits(const std::string& unit) { return unit.size() >= 3 && (unit.ends_with("bps") || unit.ends_with("b/s")); }

// The same number in the other family of units: "450Gbps" → "450GB/s", "3200GB/s" → "3200Gbps".
std::string swapped(const std::string& text) {
  const auto [number, unit] = number_and_unit(text);
  if (unit.empty()) return "";
  const std::string prefix = unit.substr(0, 1);
  if (in_bits(unit)) return number + (unit.size() > 3 ? prefix : "") + "B/s";
  return number + (unit.size() > 3 ? prefix : "") + "bps";
}

}  // namespace

std::vector<std::string> plausibility_warnings(const Scenario& s) {
  std::vector<std::string> out;
  const auto warn = [&](const std::string& path, const std::string& problem, const std::string& hint) {
    out.push_back(fmt::format("{}: {}: {}; {}", s.file, path, problem, hint));
  };
  const auto& levels_json = s.effective.at("cluster").at("levels");
  const std::size_t last = s.levels.size() - 1;
  const double own = s.levels[last].bandwidth.bytes_per_second;  // each GPU's link to its neighbours
  std::uint64_t below = 1;  // GPUs in one worker of the level
  for (std::size_t i = s.levels.size(); i-- > 0;) {
    const cluster::Level& lv = s.levels[i];
    const std::string path = fmt::format("$.cluster.levels[{}].bandwidth", i);
    const std::string text = levels_json[i].at("bandwidth").get<std::string>();
    const double per_gpu = lv.bandwidth.bytes_per_second / static_cast<double>(below);
    const std::string share = below == 1 ? fmt::format("\"{}\" ({})", text, gbs(per_gpu))
                                         : fmt::format("\"{}\" ({} for each of a {}'s {} GPUs)", text, gbs(per_gpu),
                                                       lv.name, below);
    const std::string check = fmt::format("check the unit (1 GB/s = 8 Gbps): did you mean \"{}\"?", swapped(text));
    if (per_gpu > kFar * kFastestGpuLink) {
      warn(path, fmt::format("{} is more than twice the fastest GPU link in the catalogue (NVLink 5, 900 GB/s)", share),
           check);
    } else if (i < last && per_gpu > kFar * kFastestNicPerGpu) {
      warn(path, fmt::format("{} is more than twice the fastest network port per GPU (800 Gb/s, ConnectX-8)", share),
           check + fmt::format(" (if level {} is an NVLink fabric, ignore this)", lv.name));
    } else if (i < last && per_gpu > own) {
      warn(path,
           fmt::format("{} beats each GPU's own link at level {} (\"{}\", {})", share, s.levels[last].name,
                       levels_json[last].at("bandwidth").get<std::string>(), gbs(own)),
           "check the units of both levels (an inter-node or inter-DC link is slower than the GPUs' own)");
    } else if (i == last && per_gpu < kSlowestGpuLink / 16) {
      warn(path, fmt::format("{} is under 1 GB/s, slower than any GPU link in the catalogue (PCIe Gen3 x16, 16 GB/s)", share),
           check);
    }
    if (i == last && in_bits(number_and_unit(text).second)) {
      // An NVLink level written in Gbps: the number, read as GB/s, is exactly a GPU's NVLink.
      const double as_bytes = lv.bandwidth.bytes_per_second * 8;
      for (const auto& k : s.kinds)
        if (k.nvlink.bytes_per_second > 0 && std::abs(as_bytes / k.nvlink.bytes_per_second - 1) < 0.01) {
          warn(path,
               fmt::format("\"{}\" is {}, an eighth of the NVLink of {} ({} per direction)", text, gbs(per_gpu), k.key,
                           gbs(k.nvlink.bytes_per_second)),
               fmt::format("NVLink is quoted in bytes: did you mean \"{}\"? (keep Gbps if the GPUs are joined by a "
                           "network at that rate)",
                           swapped(text)));
          break;
        }
    }
    if (lv.domains.size > 0 && lv.domains.bandwidth.bytes_per_second > kFar * kFastestGpuLink)
      warn(fmt::format("$.cluster.levels[{}].domains.bandwidth", i),
           fmt::format("{} per GPU is more than twice the fastest GPU link in the catalogue (NVLink 5, 900 GB/s)",
                       gbs(lv.domains.bandwidth.bytes_per_second)),
           "check the unit (1 GB/s = 8 Gbps)");
    below *= lv.count;
  }
  return out;
}

std::optional<std::string> profile_gpu_warning(const Scenario& s, const calibration::Profile& profile) {
  if (!profile.provenance.is_object() || !profile.provenance.contains("gpu") || !profile.provenance.at("gpu").is_string())
    return std::nullopt;
  const std::string measured = profile.provenance.at("gpu").get<std::string>();
  const auto lower = [](std::string t) {
    for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return t;
  };
  // The model: the first word with a digit ("NVIDIA H100 80GB HBM3" → "h100", "GeForce RTX 4090" → "4090").
  std::string model;
  std::string word;
  for (const char c : lower(measured) + " ") {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      word += c;
      continue;
    }
    if (std::any_of(word.begin(), word.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); })) {
      model = word;
      break;
    }
    word.clear();
  }
  if (model.empty()) return std::nullopt;
  std::vector<std::string> kinds;
  for (const auto& k : s.kinds) {
    if (lower(k.key).find(model) != std::string::npos || lower(k.name).find(model) != std::string::npos) return std::nullopt;
    kinds.push_back(k.key);
  }
  return fmt::format("{}: $.calibration: profile {} was measured on {}, but the cluster's GPUs are {}; its collective fits "
                     "and GeMM tables describe other hardware",
                     s.file, profile.name, measured, fmt::join(kinds, ", ")) +
         "; calibrate on this cluster's GPUs (`moesim calibrate fit`), or use a profile of the same GPU";
}

}  // namespace moesim::scenario
