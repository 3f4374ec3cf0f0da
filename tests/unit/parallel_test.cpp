// core::for_chunks_in_order: every chunk worked once, on a slot no other chunk holds at the time,
// merged strictly in chunk order one at a time, whatever the thread count; a failure rethrown.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "sim/core/parallel.hpp"

namespace moesim {
namespace {

// Restores the process-wide thread budget after a test.
struct Threads {
  explicit Threads(unsigned n) { core::set_worker_threads(n); }
  ~Threads() { core::set_worker_threads(0); }
};

// Chunks of uneven length (chunk c sleeps (c % 3) ms, so later chunks often finish first): the
// merges still come in chunk order, each after its own work, each slot's scratch used by one
// chunk at a time.
TEST(ForChunksInOrder, MergesInChunkOrderWhateverFinishesFirst) {
  for (const unsigned threads : {1u, 2u, 4u}) {
    Threads budget(threads);
    constexpr std::size_t kChunks = 23;
    const unsigned slots = core::chunk_slots(kChunks);
    EXPECT_EQ(slots, threads);
    std::vector<std::atomic<int>> busy(slots);  // chunks on each slot now
    std::vector<int> worked(kChunks, 0), slot_of(kChunks, -1);
    std::vector<std::size_t> merged;
    std::atomic<int> merging{0};
    core::for_chunks_in_order(
        kChunks,
        [&](std::size_t c, unsigned slot) {
          ASSERT_LT(slot, slots);
          EXPECT_EQ(++busy[slot], 1) << "two chunks on slot " << slot;
          std::this_thread::sleep_for(std::chrono::milliseconds(c % 3));
          ++worked[c];
          slot_of[c] = static_cast<int>(slot);
          --busy[slot];
        },
        [&](std::size_t c, unsigned slot) {
          EXPECT_EQ(++merging, 1) << "two merges at once";
          EXPECT_EQ(worked[c], 1);
          EXPECT_EQ(slot_of[c], static_cast<int>(slot)) << "merged from another slot than it was worked on";
          merged.push_back(c);
          --merging;
        });
    std::vector<std::size_t> order(kChunks);
    for (std::size_t c = 0; c < kChunks; ++c) order[c] = c;
    EXPECT_EQ(merged, order) << threads << " threads";
    EXPECT_EQ(worked, std::vector<int>(kChunks, 1));
  }
}

// A sum of doubles merged per chunk is the same bytes on 1 and 3 threads (the chunk count, not the
// thread count, decides the order of the additions).
TEST(ForChunksInOrder, SameSumOnAnyThreadCount) {
  const auto sum = [](unsigned threads) {
    Threads budget(threads);
    std::vector<double> part(core::chunk_slots(64), 0.0);
    double total = 0;
    core::for_chunks_in_order(
        64,
        [&](std::size_t c, unsigned slot) {
          for (int i = 1; i <= 1000; ++i) part[slot] += 1.0 / (static_cast<double>(c) * 1000 + i);
        },
        [&](std::size_t, unsigned slot) {
          total += part[slot];
          part[slot] = 0;
        });
    return total;
  };
  EXPECT_EQ(sum(1), sum(3));
  EXPECT_GT(sum(1), 10.0);  // the harmonic number H(64000) ≈ ln 64000 + 0.577 = 11.64
}

// A chunk that throws: no merge of it or after it, the exception rethrown to the caller.
TEST(ForChunksInOrder, FailureIsRethrownAndLaterChunksAreNotMerged) {
  for (const unsigned threads : {1u, 2u}) {
    Threads budget(threads);
    std::vector<std::size_t> merged;
    EXPECT_THROW(core::for_chunks_in_order(
                     16,
                     [&](std::size_t c, unsigned) {
                       if (c == 5) throw std::runtime_error("chunk 5");
                     },
                     [&](std::size_t c, unsigned) { merged.push_back(c); }),
                 std::runtime_error);
    for (const std::size_t c : merged) EXPECT_LT(c, 5u) << threads << " threads";
  }
}

}  // namespace
}  // namespace moesim
