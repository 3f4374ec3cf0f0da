// Parm (seed 003): the collectives of the baseline (Fig. 3a), S1 (Fig. 3b) and S2 (Fig. 3c) with
// the sizes of Eq. 1, 2, 11 and 14 on small cases derived by hand, the inequalities of Eq. 6 and
// Eq. 10 over the configuration grid of Table III, and Algorithm 1 at both ends of T (§IV-B).
#include <gtest/gtest.h>

#include "sim/strategies/parm/parm_model.hpp"

using namespace moesim::strategies::parm;

namespace {
// B = 2, L = 4, M = 8, E = 4, k = 2, f = 1.5, 2-byte elements.
//   T   = k·f·B·L/E = 2·1.5·2·4/4 = 6 tokens per expert
//   BLM = 2·4·8·2 B = 128 B
//   ETM = 4·6·8·2 B = 384 B (= k·f·BLM = 3·128)
ParmInputs small(std::uint32_t n_mp, std::uint32_t n_ep, std::uint32_t n_esp) {
  ParmInputs in;
  in.batch = 2;
  in.seq_len = 4;
  in.embed = 8;
  in.experts = 4;
  in.top_k = 2;
  in.capacity_factor = 1.5;
  in.bytes_per_element = 2;
  in.n_mp = n_mp;
  in.n_ep = n_ep;
  in.n_esp = n_esp;
  return in;
}

void expect_comm(const Communication& c, const char* name, Collective coll, Group group, double bytes,
                 bool overlapped) {
  EXPECT_EQ(c.name, name);
  EXPECT_EQ(c.collective, coll) << name;
  EXPECT_EQ(c.group, group) << name;
  EXPECT_DOUBLE_EQ(c.bytes, bytes) << name;
  EXPECT_EQ(c.overlapped, overlapped) << name;
}
}  // namespace

TEST(ParmModel, DerivedSizes) {
  const ParmInputs in = small(2, 2, 2);
  EXPECT_DOUBLE_EQ(in.tokens_per_expert(), 6);
  EXPECT_DOUBLE_EQ(in.token_bytes(), 128);
  EXPECT_DOUBLE_EQ(in.dispatch_bytes(), 384);
}

TEST(ParmModel, BaselineEq1) {
  // N_MP = N_EP = N_ESP = 2 (Fig. 2). Eq. 1:
  //   AG_ESP(BLM·N_ESP) = 128·2 = 256; A2A_EP(ETM·N_ESP) = 384·2 = 768 (dispatch and combine);
  //   AR_ESP(ETM·N_ESP) = 768. Total 256 + 3·768 = 2560.
  const auto c = communications(small(2, 2, 2), Schedule::Baseline);
  ASSERT_EQ(c.size(), 4u);
  expect_comm(c[0], "ESP-AllGather", Collective::AllGather, Group::ESP, 256, false);
  expect_comm(c[1], "EP-AlltoAll dispatch", Collective::AllToAll, Group::EP, 768, false);
  expect_comm(c[2], "ESP-AllReduce", Collective::AllReduce, Group::ESP, 768, false);
  expect_comm(c[3], "EP-AlltoAll combine", Collective::AllToAll, Group::EP, 768, false);
  EXPECT_DOUBLE_EQ(total_bytes(small(2, 2, 2), Schedule::Baseline), 2560);
  // The baseline repeats the work inside the MP group: N_MP changes nothing.
  EXPECT_DOUBLE_EQ(total_bytes(small(4, 2, 2), Schedule::Baseline), 2560);
}

TEST(ParmModel, S1Eq11) {
  // Eq. 11: 2·A2A_EP&ESP(ETM·N_ESP/N_MP) + AG_MP(BLM) = 2·(384·2/2) + 128 = 768 + 128 = 896.
  const auto c = communications(small(2, 2, 2), Schedule::S1);
  ASSERT_EQ(c.size(), 3u);
  expect_comm(c[0], "EP&ESP-AlltoAll dispatch", Collective::AllToAll, Group::EP_ESP, 384, false);
  expect_comm(c[1], "EP&ESP-AlltoAll combine", Collective::AllToAll, Group::EP_ESP, 384, false);
  expect_comm(c[2], "MP-AllGather", Collective::AllGather, Group::MP, 128, false);
  EXPECT_DOUBLE_EQ(total_bytes(small(2, 2, 2), Schedule::S1), 896);
  // N_MP = 4, N_ESP = 2: 2·(384·2/4) + 128 = 384 + 128 = 512.
  EXPECT_DOUBLE_EQ(total_bytes(small(4, 2, 2), Schedule::S1), 512);
}

TEST(ParmModel, S2Eq14) {
  // Eq. 7/14: A2A_EP&ESP(ETM·N_ESP/N_MP) = 384, then Overlap(384) — the combine A2A of 384 with
  // AG_MP(ETM) = 384 under SAA. Total (overlapped counted in full) 384 + 384 + 384 = 1152.
  const auto c = communications(small(2, 2, 2), Schedule::S2);
  ASSERT_EQ(c.size(), 3u);
  expect_comm(c[0], "EP&ESP-AlltoAll dispatch", Collective::AllToAll, Group::EP_ESP, 384, false);
  expect_comm(c[1], "EP&ESP-AlltoAll combine", Collective::AllToAll, Group::EP_ESP, 384, true);
  expect_comm(c[2], "MP-AllGather", Collective::AllGather, Group::MP, 384, true);
  EXPECT_DOUBLE_EQ(total_bytes(small(2, 2, 2), Schedule::S2), 1152);
  // N_MP = 4, N_ESP = 1: 384/4 + 384/4 + 384 = 96 + 96 + 384 = 576.
  EXPECT_DOUBLE_EQ(total_bytes(small(4, 4, 1), Schedule::S2), 576);
}

TEST(ParmModel, NoMpReducesToEq2) {
  // N_MP = 1, N_ESP = 4: Eq. 2 gives 2·A2A_EP&ESP(ETM·N_ESP) = 2·(384·4) = 3072 for S1 and S2
  // (the MP all-gather of one GPU moves nothing). Baseline (Eq. 1): 128·4 + 3·1536 = 5120.
  // Eq. 6: t_B − t_D = 5120 − 3072 = 2048 ≥ AG_ESP(BLM·N_ESP) = 512.
  const ParmInputs in = small(1, 2, 4);
  for (Schedule s : {Schedule::S1, Schedule::S2}) {
    const auto c = communications(in, s);
    ASSERT_EQ(c.size(), 2u) << to_string(s);
    expect_comm(c[0], "EP&ESP-AlltoAll dispatch", Collective::AllToAll, Group::EP_ESP, 1536, false);
    expect_comm(c[1], "EP&ESP-AlltoAll combine", Collective::AllToAll, Group::EP_ESP, 1536, false);
    EXPECT_DOUBLE_EQ(total_bytes(in, s), 3072) << to_string(s);
  }
  EXPECT_DOUBLE_EQ(total_bytes(in, Schedule::Baseline), 5120);
}

TEST(ParmModel, Eq6And10OverTableIII) {
  // Over Table III (N_MP, N_ESP ∈ {1,2,4}, B ∈ {2,4,8}, L ∈ {512,1024,2048}, M ∈ {1024,2048,4096},
  // f ∈ {1.2,2.4}) with k ∈ {1,2} and E ∈ {2,8} (§VI-D's expert counts):
  //   N_MP = 1 (Eq. 6): baseline − S ≥ BLM·N_ESP; S1 = S2 = 2·ETM·N_ESP (Eq. 2).
  //   N_MP ≥ 2 (Eq. 10): S2 ≤ 2·ETM·N_ESP ≤ baseline, since 2·ETM·N_ESP·(N_MP−1)/N_MP ≥ ETM.
  //   S1's all-to-all volume is the baseline's divided by N_MP (§III-B), and S1 ≤ baseline because
  //   AG_MP(BLM) ≤ AG_ESP(BLM·N_ESP) (our consequence of Eq. 1 and 11, not an equation of the paper).
  int cases = 0;
  for (std::uint32_t n_mp : {1u, 2u, 4u})
    for (std::uint32_t n_esp : {1u, 2u, 4u})
      for (std::uint64_t b : {2u, 4u, 8u})
        for (std::uint64_t l : {512u, 1024u, 2048u})
          for (std::uint64_t m : {1024u, 2048u, 4096u})
            for (double f : {1.2, 2.4})
              for (std::uint32_t k : {1u, 2u})
                for (std::uint32_t e : {2u, 8u}) {
                  ParmInputs in;
                  in.batch = b;
                  in.seq_len = l;
                  in.embed = m;
                  in.experts = e;
                  in.top_k = k;
                  in.capacity_factor = f;
                  in.n_mp = n_mp;
                  in.n_ep = 2;
                  in.n_esp = n_esp;
                  const double base = total_bytes(in, Schedule::Baseline);
                  const double s1 = total_bytes(in, Schedule::S1);
                  const double s2 = total_bytes(in, Schedule::S2);
                  const double t_d = 2 * in.dispatch_bytes() * n_esp;
                  if (n_mp == 1) {
                    EXPECT_GE(base - s1, in.token_bytes() * n_esp);
                    EXPECT_DOUBLE_EQ(s1, t_d);
                    EXPECT_DOUBLE_EQ(s2, t_d);
                  } else {
                    EXPECT_LE(s2, t_d);
                    EXPECT_LE(t_d, base);
                  }
                  EXPECT_LE(s1, base);
                  const auto bc = communications(in, Schedule::Baseline);
                  const auto c1 = communications(in, Schedule::S1);
                  EXPECT_DOUBLE_EQ(c1[0].bytes + c1[1].bytes, (bc[1].bytes + bc[3].bytes) / n_mp);
                  ++cases;
                }
  EXPECT_EQ(cases, 3 * 3 * 3 * 3 * 3 * 2 * 2 * 2);
}

TEST(ParmModel, Algorithm1HandCase) {
  // small(2,2,2): x = BLM = 128, y = ETM·N_ESP = 768, y/N_MP = 384.
  // AG_MP = 1 + 0.01·x, A2A_EP&ESP = 2 + 0.1·x, overlap = 3 + 0.05·x.
  //   t_D1 = 2·(2 + 0.1·384) + (1 + 0.01·128) = 2·40.4 + 2.28 = 83.08   (line 4)
  //   t_D2 = (2 + 0.1·384) + (3 + 0.05·768)   = 40.4 + 41.4  = 81.8    (line 5)
  // t_D1 > t_D2: S2.
  ChoiceParams p;
  p.ag_mp = {1, 0.01};
  p.a2a_ep_esp = {2, 0.1};
  p.overlap = {3, 0.05};
  const Choice c = choose_schedule(small(2, 2, 2), p);
  EXPECT_NEAR(c.t_d1, 83.08, 1e-9);
  EXPECT_NEAR(c.t_d2, 81.8, 1e-9);
  EXPECT_EQ(c.schedule, Schedule::S2);
  // A dearer overlap, β_o = 0.1: t_D2 = 40.4 + 3 + 0.1·768 = 120.2 > 83.08 (t_D1 unchanged): S1.
  p.overlap.beta = 0.1;
  const Choice d = choose_schedule(small(2, 2, 2), p);
  EXPECT_NEAR(d.t_d2, 120.2, 1e-9);
  EXPECT_EQ(d.schedule, Schedule::S1);
}

TEST(ParmModel, Algorithm1ExtremesOfT) {
  // §IV-B: with N_ESP = 1 and T → 0, S2 wins (t_D2 → α terms while t_D1 → AG_MP(BLM)); as T → ∞,
  // S1 wins because AG_MP(BLM) does not grow with T. T grows with f at fixed BLM. The AG_MP terms
  // are the paper's testbed A fit (§VI-B); the all-to-all ones are assumed, with β_o ≥ β_A2A (an
  // all-to-all sharing links with an all-gather is no faster). Under Algorithm 1 S1 wins for large
  // T exactly when β_o > β_A2A/N_MP (slope of t_D1 − t_D2 in y: 2β_A2A/N_MP − β_A2A/N_MP − β_o).
  ChoiceParams p;
  p.ag_mp = {6.64e-4, 5.38e-10};
  p.a2a_ep_esp = {2e-4, 1e-9};
  p.overlap = {2e-4, 1.2e-9};
  ParmInputs in;
  in.batch = 8;
  in.seq_len = 2048;
  in.embed = 4096;
  in.experts = 8;
  in.top_k = 2;
  in.n_mp = 2;
  in.n_ep = 4;
  in.n_esp = 1;
  in.capacity_factor = 1e-12;  // T → 0
  const Choice low = choose_schedule(in, p);
  EXPECT_EQ(low.schedule, Schedule::S2);
  EXPECT_NEAR(low.t_d2, 4e-4, 1e-9);                                    // α_A2A + α_o
  EXPECT_NEAR(low.t_d1, 2 * 2e-4 + p.ag_mp.time(in.token_bytes()), 1e-9);  // 2α_A2A + AG_MP(BLM)
  in.capacity_factor = 1e6;  // T → ∞
  EXPECT_EQ(choose_schedule(in, p).schedule, Schedule::S1);
  // t_D1 − t_D2 is affine in T: as f grows the choice switches once, from S2 to S1.
  int switches = 0;
  Schedule prev = Schedule::S2;
  for (double f = 1e-12; f < 1e7; f *= 1.5) {
    in.capacity_factor = f;
    const Schedule s = choose_schedule(in, p).schedule;
    if (s != prev) {
      ++switches;
      EXPECT_EQ(s, Schedule::S1);
    }
    prev = s;
  }
  EXPECT_EQ(switches, 1);
}
