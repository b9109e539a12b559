// The write guard's fingerprint of a tensor's elements, defined once for
// every place that computes it: the CPU statistics pass (stats.cpp), the CUDA
// statistics kernel (cuda/stats_kernels.cuh), and the guard's own pass where neither ran.
//
// fingerprint = sum over elements of term(bits, position), wrapping in 64
// bits, then finish(sum, numel, dtype). An element's position is its offset,
// in elements, from the tensor's first element (data_ptr): the same view of
// the same memory gets the same fingerprint whatever order and however many
// threads visit its elements, so a statistics pass can add terms as it goes.
// A copy has the same fingerprint only where it keeps the strides.
#pragma once

#include <c10/macros/Macros.h>

#include <cstdint>
#include <cstring>

namespace aoti_debug_printer::fingerprint {

constexpr uint64_t kOdd = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kPositionOdd = 0xD6E8FEB86659FD93ull;

// For a fixed position, word -> term is a bijection (an xor, a multiply by an
// odd constant, an xor-shift), so changing any one element changes the sum.
// Mixing in the position makes two elements trading places change it too.
C10_HOST_DEVICE inline uint64_t term_of_word(uint64_t word, uint64_t position) {
  const uint64_t x = (word ^ (position * kPositionOdd)) * kOdd;
  return x ^ (x >> 32);
}

// One element's term, from its bits (zero-extended; complex128's two words
// take positions 2p and 2p + 1).
template <typename T>
C10_HOST_DEVICE inline uint64_t term(const T& v, int64_t position) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8 ||
                sizeof(T) == 16);
  const auto p = static_cast<uint64_t>(position);
  if constexpr (sizeof(T) == 16) {
    uint64_t w[2];
    memcpy(w, &v, sizeof w);
    return term_of_word(w[0], 2 * p) + term_of_word(w[1], 2 * p + 1);
  } else {
    uint64_t w = 0;
    memcpy(&w, &v, sizeof(T));
    return term_of_word(w, p);
  }
}

// The element count and dtype are part of what a buffer holds.
C10_HOST_DEVICE inline uint64_t finish(uint64_t sum, int64_t numel, int dtype) {
  return sum + static_cast<uint64_t>(numel) * kOdd + static_cast<uint64_t>(dtype);
}

}  // namespace aoti_debug_printer::fingerprint
