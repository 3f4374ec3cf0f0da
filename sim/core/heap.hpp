// What an allocation holds on the heap, for the host-memory estimate (simulation/memory_estimate.hpp).
#pragma once

#include <algorithm>
#include <cmath>

namespace moesim {

// A malloc block of `bytes`: glibc's chunk, its 8-byte size header added and rounded up to 16
// bytes, 32 at least (malloc/malloc.c: SIZE_SZ, MALLOC_ALIGNMENT and MINSIZE on 64-bit Linux).
inline double heap_block_bytes(double bytes) { return std::max(32.0, std::ceil((bytes + 8) / 16) * 16); }

// The capacity of a std::vector grown to `n` elements by push_back: libstdc++ doubles it from 1
// (bits/stl_vector.h, _M_check_len), so the next power of two.
inline double grown_capacity(double n) { return n <= 1 ? n : std::exp2(std::ceil(std::log2(n))); }

}  // namespace moesim
