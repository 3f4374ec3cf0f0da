// A queue of records addressed by a number that only grows (task and collective ids): appended at
// the back, retired from the front, stored in blocks of 2^kShift records. Retiring a block's last
// record gives the block back for reuse, so a long run cycles through a few blocks instead of
// allocating per record (std::deque allocates every 512 bytes).
//
// Blocks are carved from chunks of 2 MiB (or more) aligned to 2 MiB and advised for transparent
// huge pages (madvise(MADV_HUGEPAGE), Linux's "madvise" THP mode, Debian's default): a 9216-GPU
// program holds 19 M tasks, and with 4 KiB pages the first touch of each page (a fault, the page
// zeroed) and the TLB misses of walking them cost a fifth of its run time (measured with perf;
// the README's speed table). The first chunk holds one block on small pages: a small run (a sweep
// point) touches a few hundred KiB instead of faulting in 2 MiB per queue, which measured half
// its peak memory and most of its system time. A chunk is never given back before the queue
// goes; its blocks are reused, so a long run's memory stays that of the blocks it holds at once.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace moesim::engine {

template <typename T, unsigned kShift = 12>
class BlockQueue {
  static_assert(std::is_trivially_destructible_v<T>, "records are never destroyed one by one");

 public:
  static constexpr std::size_t kBlock = std::size_t{1} << kShift;

  // Number of the first live record, and one past the last.
  std::uint64_t front() const { return front_; }
  std::uint64_t end() const { return end_; }
  std::size_t size() const { return static_cast<std::size_t>(end_ - front_); }
  bool empty() const { return front_ == end_; }
  bool live(std::uint64_t i) const { return i >= front_ && i < end_; }

  T& operator[](std::uint64_t i) { return blocks_[(i >> kShift) - offset_][i & (kBlock - 1)]; }
  const T& operator[](std::uint64_t i) const { return blocks_[(i >> kShift) - offset_][i & (kBlock - 1)]; }

  T& push_back() {
    if ((end_ & (kBlock - 1)) == 0) {
      if (spare_.empty()) {
        blocks_.push_back(allocate());
      } else {
        blocks_.push_back(spare_.back());
        spare_.pop_back();
      }
    }
    T* slot = &(*this)[end_++];
    return *::new (static_cast<void*>(slot)) T{};
  }
  // Retires the front record.
  void pop_front() {
    ++front_;
    if ((front_ & (kBlock - 1)) == 0 || front_ == end_) release();
  }

  // Resident bytes of a queue holding at most `live` records at once of the `written` it is given
  // in all, for the host-memory estimate. Up to a block: the records written, on small pages.
  // Beyond: the first block, and every further block held at once from the 2 MiB chunks (live
  // records straddle one block more once the front retires: written > live), whole chunks where
  // they get huge pages, else the blocks touched.
  static double resident_bytes(double live, double written, bool huge_pages) {
    if (written <= static_cast<double>(kBlock)) return written * sizeof(T);
    const double blocks = std::max(2.0, std::ceil(live / kBlock) + (written > live ? 1 : 0));
    const double carved = blocks - 1;  // blocks from the chunks
    const double chunks = std::ceil(carved / kPerChunk);
    return static_cast<double>(kBytes) + (huge_pages ? chunks * kChunkBytes : carved * kBytes);
  }

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;
  static constexpr std::size_t kBytes = kBlock * sizeof(T);
  // Each chunk holds this many blocks: 2 MiB's worth, or one block when a block is larger.
  static constexpr std::size_t kPerChunk = kBytes >= kHugePage ? 1 : kHugePage / kBytes;
  static constexpr std::size_t kChunkBytes = (kPerChunk * kBytes + kHugePage - 1) / kHugePage * kHugePage;

  // Raw storage for kBlock records (each constructed when pushed): the next block of the current
  // chunk, or a fresh chunk's first.
  T* allocate() {
    if (carved_ == capacity_) {
      const bool first = chunks_.empty();
      void* p = first ? std::malloc(kBytes) : std::aligned_alloc(kHugePage, kChunkBytes);
      if (!p) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
      if (!first) madvise(p, kChunkBytes, MADV_HUGEPAGE);  // advice only: without THP the pages stay small
#endif
      chunks_.emplace_back(p);
      carved_ = 0;
      capacity_ = first ? 1 : kPerChunk;
    }
    return static_cast<T*>(chunks_.back().get()) + kBlock * carved_++;
  }
  // Gives back the blocks wholly before front_. Retired blocks leave the front of blocks_ by
  // advancing head_; the vector is compacted once they are half of it.
  void release() {
    while (head_ < blocks_.size() && ((first_block_ + 1) << kShift) <= front_ && ((first_block_ + 1) << kShift) <= end_) {
      spare_.push_back(blocks_[head_++]);
      ++first_block_;
    }
    if (head_ > 0 && 2 * head_ >= blocks_.size()) {
      blocks_.erase(blocks_.begin(), blocks_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
      offset_ = first_block_;
    }
  }

  std::vector<std::unique_ptr<void, Free>> chunks_;
  std::size_t carved_ = 0, capacity_ = 0;  // blocks taken from chunks_.back(), and its blocks
  std::vector<T*> blocks_;  // blocks_[head_] holds block first_block_, blocks_[k] block k + offset_
  std::vector<T*> spare_;
  std::size_t head_ = 0;
  std::uint64_t first_block_ = 0, offset_ = 0;
  std::uint64_t front_ = 0, end_ = 0;
};

}  // namespace moesim::engine
