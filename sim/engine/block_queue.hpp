// A queue of records addressed by a number that only grows (task and collective ids): appended at
// the back, retired from the front, stored in blocks of 2^kShift records. Retiring a block's last
// record gives the block back for reuse, so a long run cycles through a few blocks instead of
// allocating per record (std::deque allocates every 512 bytes).
//
// Blocks of 2 MiB or more are aligned to 2 MiB and advised for transparent huge pages
// (madvise(MADV_HUGEPAGE), Linux's "madvise" THP mode, Debian's default): a 9216-GPU program holds
// 19 M tasks, and with 4 KiB pages the first touch of each page (a fault, the page zeroed) and
// the TLB misses of walking them cost a fifth of its run time (measured with perf; the README's
// speed table).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
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

  T& operator[](std::uint64_t i) { return blocks_[(i >> kShift) - first_block_].get()[i & (kBlock - 1)]; }
  const T& operator[](std::uint64_t i) const { return blocks_[(i >> kShift) - first_block_].get()[i & (kBlock - 1)]; }

  T& push_back() {
    if ((end_ & (kBlock - 1)) == 0) {
      if (spare_.empty()) {
        blocks_.push_back(allocate());
      } else {
        blocks_.push_back(std::move(spare_.back()));
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

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  using Block = std::unique_ptr<T, Free>;
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;
  static constexpr std::size_t kBytes = kBlock * sizeof(T);

  // Raw storage for kBlock records (each constructed when pushed).
  static Block allocate() {
    const bool huge = kBytes >= kHugePage;
    const std::size_t align = huge ? kHugePage : alignof(std::max_align_t);
    const std::size_t bytes = (kBytes + align - 1) / align * align;
    void* p = std::aligned_alloc(align, bytes);
    if (!p) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (huge) madvise(p, bytes, MADV_HUGEPAGE);  // advice only: without THP the pages stay small
#endif
    return Block(static_cast<T*>(p));
  }
  // Gives back the blocks wholly before front_.
  void release() {
    while (!blocks_.empty() && ((first_block_ + 1) << kShift) <= front_ && ((first_block_ + 1) << kShift) <= end_) {
      spare_.push_back(std::move(blocks_.front()));
      blocks_.pop_front();
      ++first_block_;
    }
  }

  std::deque<Block> blocks_;
  std::vector<Block> spare_;
  std::uint64_t first_block_ = 0;  // block number of blocks_.front()
  std::uint64_t front_ = 0, end_ = 0;
};

}  // namespace moesim::engine
