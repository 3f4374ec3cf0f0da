// Deterministic parallel work: a fixed number of chunks, each with its own inputs (a seed, a range
// of sources), worked on by up to worker_threads() threads and merged strictly in chunk order, so
// that the result is the same bytes whatever the thread count (the chunk count, never the thread
// count, decides what is computed where). The thread budget is process-wide, as OpenMP's
// OMP_NUM_THREADS: `moesim run --threads`, and a sweep's cores divided among its jobs.
#pragma once

#include <cstddef>
#include <functional>

namespace moesim::core {

unsigned worker_threads();             // default: the machine's hardware threads
void set_worker_threads(unsigned n);   // 0: the machine's hardware threads

// work(chunk, slot) for every chunk in [0, chunks), slot < min(worker_threads(), chunks) naming the
// scratch a chunk may use (no two chunks run on one slot at once); merge(chunk, slot) after it, in
// chunk order, one merge at a time. Each slot is a thread that takes the next chunk as it comes
// free, works it, waits for the chunks before it to be merged and merges it: no slot waits for a
// whole wave, and merges overlap the other slots' work. An exception in work or merge stops the
// chunks not yet begun and is rethrown (the earliest chunk's) once every slot has stopped.
void for_chunks_in_order(std::size_t chunks, const std::function<void(std::size_t chunk, unsigned slot)>& work,
                         const std::function<void(std::size_t chunk, unsigned slot)>& merge);

// The slots for_chunks_in_order(chunks, ...) uses: size a per-slot scratch with it.
unsigned chunk_slots(std::size_t chunks);

}  // namespace moesim::core
