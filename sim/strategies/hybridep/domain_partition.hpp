// HybridEP's domain-based partition (seed 000, §IV-A). At each level l of the multi-level cluster
// the workers are cut into expert domains of S_ED^l consecutive workers; a worker's domain is
// x_l / S_ED^l and its offset x_l mod S_ED^l (x = the Eq. 13 location). Algorithm 1: two GPUs
// talk at level l only if their locations differ at l and agree at every other level (the
// paper's listing checks the finer levels; the coarser ones must agree too, or two GPUs of
// different DCs would all-gather over the GPU level); then GPUs of one domain (different offsets)
// all-gather experts, and GPUs of different domains with the same offset all-to-all data.
// S_ED = 1 everywhere is plain EP; S_ED = SF everywhere is pure expert all-gather.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/cluster/topology.hpp"

namespace moesim::strategies::hybridep {

enum class Pattern { None, AllGather, AllToAll };

// Algorithm 1 for GPUs m and n at `level`, with one domain size per level.
Pattern communication(const cluster::Topology& topology, const std::vector<std::uint32_t>& domain_sizes,
                      std::uint32_t m, std::uint32_t n, int level);

// The groups each level's collectives run over.
struct LevelGroups {
  std::vector<std::vector<std::uint32_t>> all_gather;  // one per domain (and per position at the other levels)
  std::vector<std::vector<std::uint32_t>> all_to_all;  // one per offset (and per position at the other levels)
};

std::vector<LevelGroups> build_groups(const cluster::Topology& topology, const std::vector<std::uint32_t>& domain_sizes);

// Ordered GPU pairs (m ≠ n) that Algorithm 1 connects, over all levels (HybridEP Table VII).
struct PairCounts {
  std::uint64_t all_to_all = 0;
  std::uint64_t all_gather = 0;
};
PairCounts count_pairs(const cluster::Topology& topology, const std::vector<std::uint32_t>& domain_sizes);

}  // namespace moesim::strategies::hybridep
