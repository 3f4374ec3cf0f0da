// HybridEP's stream-based model (seed 000, §III): for one MoE block on G GPUs, a proportion p of
// each GPU's outgoing data chunks travels as data (all-to-all) and 1 − p as experts (all-gather).
//   Lat_A2A(p) = p·D·(G−1)/(G·B)            (Eq. 3, the p share of it)
//   Lat_AG(p)  = (1 − p)·P_E·(G−1)/B         (Eq. 4)
//   Lat_final  = Lat_comp + Lat_comm − Lat_ovlp (Eq. 8 with Eq. 2, 5, 7)
//              = max(Lat_PE, Lat_AG(p)) + 2·Lat_A2A(p)   (expert compute is fully overlapped)
// with p ∈ {0/(G−1), …, (G−1)/(G−1)}. Solution (Eq. 10–12), with p* = (P_E(G−1) − B·Lat_PE) / (P_E(G−1)):
//   Case 1   p* ≤ 0: the whole expert all-gather hides under pre-expert compute: p = 0;
//   Case 2.1 p* > 0 and 2D < G·P_E: Eq. 12 falls towards p*, Eq. 11 rises from it: p = ⌈p*(G−1)⌉/(G−1)
//            (both all-to-all and all-gather; the paper's Mix-1/Mix-2 of Table IV);
//   Case 2.2 p* > 0 and 2D ≥ G·P_E: Eq. 12's slope is ≥ 0: p = 0, Lat = (G−1)·P_E/B (AG-only-1/2).
// (The case names follow §III-E and §V-B: "2D − G·P_E < 0 … maximum p, Case 2.1".)
//
// The same model over the levels of a multi-level cluster (domain_latency), to rank candidate
// domain sizes as moesim simulates them: the paper's B is one bandwidth for all peers, while the
// domain-based partition (§IV-A) moves each level's traffic over that level's links.
//   - all-gather, coarsest level first: at level l each GPU sends what it holds, P_E·Π_{j<l} S_j,
//     to S_l − 1 peers over its share of level l: Σ_l P_E·Π_{j<l} S_j·(S_l − 1) / B_l;
//   - all-to-all among one GPU of every domain: of D, the share bound for domains that first
//     differ from the sender's at level l crosses level l; levels drain at once, the slowest
//     bounds: max_l D·n_l / (N·B_l), n_l of the N domains;
//   - forward max(Lat_PE, Lat_AG) + 2·Lat_A2A (Eq. 8) and, for what moesim also simulates, the
//     backward: the gathered experts' gradients return by the reverse path (Lat_AG scaled by the
//     gradient's to the parameters' wire bytes), hidden under the pre-expert backward
//     (backward_factor × Lat_PE) as far as it lasts, and the two all-to-alls again.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moesim::strategies::hybridep {

struct StreamInputs {
  double data_bytes = 0;          // D: dispatch bytes of one GPU
  double expert_bytes = 0;        // P_E: bytes of one GPU's experts as transmitted
  double bandwidth = 0;           // B: bytes per second between GPUs
  double pre_expert_seconds = 0;  // Lat_PE
  std::uint32_t gpus = 2;         // G
};

enum class StreamCase { Case1, Case2_1, Case2_2 };
std::string to_string(StreamCase c);

struct StreamSolution {
  StreamCase which = StreamCase::Case1;
  double p = 1;             // on the grid k/(G−1)
  double p_star = 0;        // the boundary of Eq. 11/12
  double latency = 0;       // Lat_final(p) in seconds
  std::uint32_t domain = 1; // expert-domain size on one level: G − p·(G−1)
};

double final_latency(const StreamInputs& in, double p);
StreamSolution solve(const StreamInputs& in);

struct LevelShare {
  std::uint32_t count = 1;   // workers of the level (SF^l)
  double bandwidth = 0;      // bytes per second of one GPU's share of a worker's link
};

struct MultiLevelInputs {
  double data_bytes = 0;           // D
  double expert_bytes = 0;         // P_E as transmitted
  double gradient_bytes = 0;       // one GPU's experts' gradients as they return
  double pre_expert_seconds = 0;   // Lat_PE, the slowest GPU kind's
  double backward_factor = 2;      // pre-expert backward / forward
  std::vector<LevelShare> levels;  // coarsest first
};

// One MoE block's forward and backward latency with expert-domain sizes `sizes` (coarsest first).
double domain_latency(const MultiLevelInputs& in, const std::vector<std::uint32_t>& sizes);

}  // namespace moesim::strategies::hybridep
