// Plausibility of a scenario's link rates: warnings, not refusals, for values far outside every
// GPU link and network in the catalogue, so the unit mix-up users make most (Gbps for GB/s) is
// caught before it costs a sweep. Each warning reads "FILE: $.PATH: problem; hint".
//
// The bounds, per GPU and direction:
//  - the fastest GPU link: NVLink 5, 900 GB/s (HGX B200 / GB200 NVL72 specifications, gpus.json);
//  - the fastest network port per GPU: 800 Gb/s (NVIDIA ConnectX-8 SuperNIC, one per GPU);
//  - the slowest GPU link: PCIe Gen3 x16, 16 GB/s (V100, T4 and RTX 2080 Ti in gpus.json).
// A value is flagged when it passes a bound by 2x (or is below a GPU link's by 16x, i.e. under
// 1 GB/s), when a GPU's share of an outer level's link beats its own link to its neighbours, or
// when a GPU level written in bits per second reads, as bytes, exactly the NVLink figure of its GPU.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/calibration/profile.hpp"
#include "sim/scenario/scenario.hpp"

namespace moesim::scenario {

std::vector<std::string> plausibility_warnings(const Scenario& s);

// A calibration profile measured on another GPU than the cluster's (its provenance.gpu, e.g.
// "NVIDIA B200", names a model, "b200", that no GPU kind of the cluster has in its key or name):
// its collective fits and GeMM tables describe other hardware.
std::optional<std::string> profile_gpu_warning(const Scenario& s, const calibration::Profile& profile);

}  // namespace moesim::scenario
