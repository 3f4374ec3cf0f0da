// A queue of records addressed by a number that only grows (task and collective ids): appended at
// the back, retired from the front, stored in blocks of 2^kShift records. Retiring a block's last
// record gives the block back for reuse, so a long run cycles through a few blocks instead of
// allocating per record (std::deque allocates every 512 bytes).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

namespace moesim::engine {

template <typename T, unsigned kShift = 12>
class BlockQueue {
 public:
  static constexpr std::size_t kBlock = std::size_t{1} << kShift;

  // Number of the first live record, and one past the last.
  std::uint64_t front() const { return front_; }
  std::uint64_t end() const { return end_; }
  std::size_t size() const { return static_cast<std::size_t>(end_ - front_); }
  bool empty() const { return front_ == end_; }
  bool live(std::uint64_t i) const { return i >= front_ && i < end_; }

  T& operator[](std::uint64_t i) { return blocks_[(i >> kShift) - first_block_][i & (kBlock - 1)]; }
  const T& operator[](std::uint64_t i) const { return blocks_[(i >> kShift) - first_block_][i & (kBlock - 1)]; }

  T& push_back() {
    if ((end_ & (kBlock - 1)) == 0) {
      if (spare_.empty()) {
        blocks_.push_back(std::make_unique<T[]>(kBlock));
      } else {
        blocks_.push_back(std::move(spare_.back()));
        spare_.pop_back();
      }
    }
    T& t = (*this)[end_++];
    t = T{};
    return t;
  }
  // Retires the front record.
  void pop_front() {
    ++front_;
    if ((front_ & (kBlock - 1)) == 0 || front_ == end_) release();
  }

 private:
  // Gives back the blocks wholly before front_.
  void release() {
    while (!blocks_.empty() && ((first_block_ + 1) << kShift) <= front_ && ((first_block_ + 1) << kShift) <= end_) {
      spare_.push_back(std::move(blocks_.front()));
      blocks_.pop_front();
      ++first_block_;
    }
  }

  std::deque<std::unique_ptr<T[]>> blocks_;
  std::vector<std::unique_ptr<T[]>> spare_;
  std::uint64_t first_block_ = 0;  // block number of blocks_.front()
  std::uint64_t front_ = 0, end_ = 0;
};

}  // namespace moesim::engine
