#include "sim/core/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

namespace moesim::core {

namespace {
unsigned hardware_threads() { return std::max(1u, std::thread::hardware_concurrency()); }
std::atomic<unsigned> g_threads{0};  // 0: hardware_threads()
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
  std::vector<std::exception_ptr> failed(slots);
  for (std::size_t first = 0; first < chunks; first += slots) {
    const unsigned wave = static_cast<unsigned>(std::min<std::size_t>(slots, chunks - first));
    const auto run = [&](unsigned slot) {
      try {
        work(first + slot, slot);
      } catch (...) {
        failed[slot] = std::current_exception();
      }
    };
    {
      std::vector<std::jthread> helpers;
      helpers.reserve(wave - 1);
      for (unsigned slot = 1; slot < wave; ++slot) helpers.emplace_back(run, slot);
      run(0);
    }  // joined
    for (unsigned slot = 0; slot < wave; ++slot)
      if (failed[slot]) std::rethrow_exception(failed[slot]);
    for (unsigned slot = 0; slot < wave; ++slot) merge(first + slot, slot);
  }
}

}  // namespace moesim::core
