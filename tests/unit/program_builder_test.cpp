// ProgramBuilder: its family cache (a run whose plans build their groups anew each iteration,
// adaptive replication, seed 004, must not keep every iteration's families alive: issue 19, memory
// flat over 1000 iterations) and its count of the kernel time measured tables gave.
#include <gtest/gtest.h>

#include "sim/blocks/program_builder.hpp"

namespace moesim {
namespace {

// A builder writing on one compute stream of `engine`.
blocks::ProgramBuilder compute_only(engine::Engine& engine, network::CollectiveProgram& program) {
  return blocks::ProgramBuilder(engine, program, std::make_shared<parallel::StreamSet>(
                                                     std::initializer_list<parallel::StreamRole>{parallel::StreamRole::Compute}));
}

TEST(ProgramBuilder, ForgetsFamiliesNoPlanHoldsButKeepsTheirGroups) {
  engine::Engine engine(4, 1);
  network::CollectiveProgram program;
  blocks::ProgramBuilder builder = compute_only(engine, program);
  const parallel::FamilyPtr kept = parallel::family({{0, 1}, {2, 3}});
  const network::GroupId first = builder.groups(kept).front();
  for (int it = 0; it < 100; ++it) {
    // One iteration's plan: a fresh family of the same groups plus one of a single GPU (skipped).
    const parallel::FamilyPtr fresh = parallel::family({{0, 1}, {2}});
    ASSERT_EQ(builder.groups(fresh), std::vector<network::GroupId>{first});
    builder.forget_unused_families();
    // Still held by `fresh`: both entries stay.
    EXPECT_EQ(builder.families_known(), 2u);
  }
  builder.forget_unused_families();
  EXPECT_EQ(builder.families_known(), 1u);  // only `kept`
  // The group {0, 1} stays interned under its id: tasks written earlier name it.
  EXPECT_EQ(builder.group_members(first), (std::vector<std::uint32_t>{0, 1}));
  EXPECT_EQ(builder.groups(parallel::family({{0, 1}})).front(), first);
}

TEST(ProgramBuilder, CountsTheKernelTimeMeasuredTablesGave) {
  // Three kernels on two GPUs, one of 30 us from a table and two of 10 and 20 us by the model
  // with 5 us of a table in the second: costed 60 us, measured 35 us (GPU kind 0 without a topology).
  engine::Engine engine(2, 1);
  network::CollectiveProgram program;
  blocks::ProgramBuilder builder = compute_only(engine, program);
  const engine::Label l = builder.label(engine::Phase::Forward, engine::WorkKind::Expert, "experts", 0, 0);
  builder.compute(0, compute::kernel(30 * kMicrosecond, true), l);
  builder.compute(0, compute::kernel(10 * kMicrosecond), l);
  builder.compute(1, compute::Work{20 * kMicrosecond, 2, 5 * kMicrosecond}, l);
  ASSERT_EQ(builder.kernel_time_by_kind().size(), 1u);
  EXPECT_EQ(builder.kernel_time_by_kind()[0].costed, 60 * kMicrosecond);
  EXPECT_EQ(builder.kernel_time_by_kind()[0].measured, 35 * kMicrosecond);
}

}  // namespace
}  // namespace moesim
