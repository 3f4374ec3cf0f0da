// Parm's analytic model (seed 003, §IV–V): the collectives of one MoE layer under MP+EP+ESP in the
// baseline schedule (Fig. 3a) and in Parm's S1 (Fig. 3b) and S2 (Fig. 3c), each with the size the
// paper passes to it, and Algorithm 1 choosing between S1 and S2 with α-β costs.
// Symbols (Table I): B samples per GPU, L tokens per sample, M embedding size, E experts, k top-k,
// f capacity factor, T = k·f·B·L/E tokens per expert, so the gate output of one GPU is E·T·M.
//   Baseline  t_B  = AG_ESP(BLM·N_ESP) + AR_ESP(ETM·N_ESP) + 2·A2A_EP(ETM·N_ESP)           (Eq. 1)
//   N_MP = 1  t_D  = 2·A2A_EP&ESP(ETM·N_ESP)                                                 (Eq. 2)
//   S1        t_D1 = 2·A2A_EP&ESP(ETM·N_ESP/N_MP) + AG_MP(BLM)                              (Eq. 11, 13)
//   S2        t_D2 = A2A_EP&ESP(ETM·N_ESP/N_MP) + Overlap(ETM·N_ESP/N_MP) [+ AG_MP(ETM)]   (Eq. 7, 14)
//             where Overlap is the combine all-to-all run with the MP all-gather by SAA (§III-D).
// Sizes here are in bytes (elements × bytes per element); "per GPU" is the x of α + β·x (Eq. 12),
// the tensor each GPU hands to the collective, not the bytes it puts on the wire.
// Choices where the paper is inconsistent (each is cited where it is made):
//   * Algorithm 1 line 2 writes T = k·f·B·L·M/E; Table I and §II-A write T = k·f·B·L/E, and line 3
//     multiplies by M again. We use Table I's T.
//   * Eq. 13's second line drops N_ESP (β·ETM/N_MP); its first line, Eq. 11 and Algorithm 1 line 4
//     (y = ETM·N_ESP, β·y/N_MP) keep it. We keep it.
//   * Eq. 14 adds AG_MP(ETM) beside Overlap(·) with β_o·ETM·N_ESP/N_MP; Algorithm 1 line 5 has no
//     AG_MP term and charges β_o·y with y = ETM·N_ESP. choose_schedule follows Algorithm 1 (what
//     Parm runs); the S2 communication list carries the MP all-gather of ETM as in Eq. 7/14.
//   * With N_MP = 1 the MP group is one GPU and its all-gather moves nothing: S1 and S2 both reduce
//     to Eq. 2, so the lists leave the MP all-gather out there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moesim::strategies::parm {

struct ParmInputs {
  std::uint64_t batch = 1;         // B: samples per GPU
  std::uint64_t seq_len = 1;       // L: tokens per sample
  std::uint64_t embed = 1;         // M: embedding size of a token
  std::uint32_t experts = 1;       // E: experts in the layer
  std::uint32_t top_k = 1;         // k
  double capacity_factor = 1;      // f
  double bytes_per_element = 2;    // element size of activations
  std::uint32_t n_mp = 1;          // N_MP
  std::uint32_t n_ep = 1;          // N_EP (no volume equation uses it; P = N_EP·N_ESP, Fig. 2)
  std::uint32_t n_esp = 1;         // N_ESP

  double tokens_per_expert() const;  // T = k·f·B·L/E (Table I)
  double token_bytes() const;        // BLM: one GPU's MoE input in bytes
  double dispatch_bytes() const;     // ETM: one GPU's gate output in bytes (= k·f·BLM)
};

enum class Collective { AllGather, AllReduce, AllToAll };
enum class Group { MP, EP, ESP, EP_ESP };
enum class Schedule { Baseline, S1, S2 };
std::string to_string(Collective c);
std::string to_string(Group g);
std::string to_string(Schedule s);

struct Communication {
  std::string name;          // the paper's name, e.g. "ESP-AllGather"
  Collective collective = Collective::AllToAll;
  Group group = Group::EP;
  double bytes = 0;          // x of the collective per GPU (Eq. 1, 2, 11, 13, 14)
  bool overlapped = false;   // runs simultaneously with the neighbouring one (SAA, §III-D)
};

// The forward communications of one MoE layer in order, as Eq. 1 (baseline), Eq. 11 (S1) and
// Eq. 7/14 (S2) charge them. The two S2 entries marked overlapped form the SAA pair.
std::vector<Communication> communications(const ParmInputs& in, Schedule s);
// Sum of the sizes in communications(in, s) (overlapped ones counted in full: Eq. 7's upper bound).
double total_bytes(const ParmInputs& in, Schedule s);

// α-β parameters of one collective in one group (Eq. 12): time = alpha + beta·bytes.
struct AlphaBeta {
  double alpha = 0;  // seconds
  double beta = 0;   // seconds per byte
  double time(double bytes) const { return alpha + beta * bytes; }
};

// Algorithm 1's inputs besides the sizes.
struct ChoiceParams {
  AlphaBeta ag_mp;       // α_MP^AG, β_MP^AG
  AlphaBeta a2a_ep_esp;  // α_EP&ESP^A2A, β_EP&ESP^A2A
  AlphaBeta overlap;     // α_o, β_o: EP&ESP-AlltoAll overlapped with MP-AllGather (SAA)
};

struct Choice {
  double t_d1 = 0;  // Algorithm 1 line 4
  double t_d2 = 0;  // Algorithm 1 line 5
  Schedule schedule = Schedule::S1;  // S1 when t_D1 ≤ t_D2 (line 6)
};

Choice choose_schedule(const ParmInputs& in, const ChoiceParams& p);

}  // namespace moesim::strategies::parm
