#include "sim/core/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace moesim::core {

namespace {
unsigned hardware_threads() { return std::max(1u, std::thread::hardware_concurrency()); }
std::atomic<unsigned> g_threads{0};  // 0: hardware_threads()

// fn(), or the exception it threw.
template <typename Fn>
std::exception_ptr attempt(Fn&& fn) {
  try {
    fn();
    return nullptr;
  } catch (...) {
    return std::current_exception();
  }
}
}  // namespace

unsigned worker_threads() {
  const unsigned n = g_threads.load(std::memory_order_relaxed);
  return n ? n : hardware_threads();
}

void set_worker_threads(unsigned n) { g_threads.store(n, std::memory_order_relaxed); }

unsigned chunk_slots(std::size_t chunks) {
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(worker_threads(), chunks)));
}

void for_chunks_in_order(std::size_t chunks, const std::function<void(std::size_t, unsigned)>& work,
                         const std::function<void(std::size_t, unsigned)>& merge) {
  const unsigned slots = chunk_slots(chunks);
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};  // a chunk failed: begin no more
  std::mutex mutex;
  std::condition_variable turn;
  std::size_t merged = 0;  // chunks merged or passed over, in order (under `mutex`)
  std::exception_ptr failure;  // the earliest failed chunk's: recorded in chunk order, at its turn
  const auto run = [&](unsigned slot) {
    for (std::size_t c; (c = next.fetch_add(1)) < chunks;) {
      const std::exception_ptr failed = stop.load() ? nullptr : attempt([&] { work(c, slot); });
      if (failed) stop = true;
      {
        std::unique_lock lock(mutex);
        turn.wait(lock, [&] { return merged == c; });
      }
      // Its turn: no other slot merges or records until `merged` moves on.
      if (failed && !failure) failure = failed;
      if (!failure && !stop.load() && (failure = attempt([&] { merge(c, slot); }))) stop = true;
      {
        std::lock_guard lock(mutex);
        ++merged;
      }
      turn.notify_all();
    }
  };
  {
    std::vector<std::jthread> helpers;
    helpers.reserve(slots - 1);
    for (unsigned slot = 1; slot < slots; ++slot) helpers.emplace_back(run, slot);
    run(0);
  }  // joined
  if (failure) std::rethrow_exception(failure);
}

}  // namespace moesim::core
