// aoti-debug-printer: the statistics a C++ kernel that Inductor generates
// keeps of what it stores (AOTI_DEBUG_PRINTER_STATS_IN_KERNELS; the code
// that calls this: aoti_debug_printer/inductor/kept_cpp.py).
//
// Spliced into the kernels' source after aoti_debug_printer.h (the slot's
// fields, the keys, kernel_statistics), where Inductor's cpp_prefix.h has
// already brought ATen's vectors. Each thread of a kernel keeps one
// KeptStats per buffer the kernel stores whole, in registers where it can:
// per-lane minima, maxima, zero counts and float64 sums, shifted by the
// first finite value the thread stored. When the thread's share of the
// loops is done it merges them into the buffer's slot, one thread at a time;
// the record after the kernel reads the slot (aoti_debug_printer_tensor_stored)
// instead of reading the tensor again.
#ifndef AOTI_DEBUG_PRINTER_KERNEL_H
#define AOTI_DEBUG_PRINTER_KERNEL_H

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <utility>

namespace aoti_debug_printer {

class KeptStats {
 public:
  // One value as the kernel stored it.
  void add(float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    // Bit tests, not std::isfinite: the kernels may be compiled with
    // -ffinite-math-only, under which that test is folded away.
    if ((bits & 0x7f800000u) == 0x7f800000u) {
      if (bits & 0x007fffffu) {
        ++nan_;
      } else if (bits >> 31) {
        ++neg_inf_;
      } else {
        ++pos_inf_;
      }
      return;
    }
    shift_if_first(value);
    ++finite_;
    zeros_ += value == 0.0f;
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
    const double d = static_cast<double>(value) - shift_;
    s1_ += d;
    s2_ += d * d;
  }

  // The first `n` lanes of a vector as stored (`n` below the vector's
  // width in a tail loop): any of ATen's Vectorized or VectorizedN types.
  template <typename V>
  void add_vector(const V& v, int64_t n) {
    using T = typename V::value_type;
    constexpr int64_t width = V::size();
    alignas(64) T stored[width];
    v.store(stored, static_cast<int>(n));
    const float* values;
    alignas(64) float widened[width];
    if constexpr (std::is_same_v<T, float>) {
      values = stored;
    } else {
      for (int64_t i = 0; i < n; ++i) widened[i] = static_cast<float>(stored[i]);
      values = widened;
    }
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) add_lanes(values + i);
    for (; i < n; ++i) add(values[i]);
  }

  // Merges this thread's statistics into `slot` (the caller holds the lock).
  void merge_into(int64_t* slot) const {
    int64_t finite = finite_, zeros = zeros_, nan = nan_, pos_inf = pos_inf_, neg_inf = neg_inf_;
    float mn = min_, mx = max_;
    double s1 = s1_, s2 = s2_;
    for (int l = 0; l < kLanes; ++l) {
      // Lanes count -1 for each.
      finite -= lane_finite_[l];
      zeros -= lane_zeros_[l];
      nan -= lane_nan_[l];
      pos_inf -= lane_pos_inf_[l];
      neg_inf -= lane_neg_inf_[l];
      mn = std::min(mn, lane_min_[l]);
      mx = std::max(mx, lane_max_[l]);
    }
    for (int l = 0; l < kLanes / 2; ++l) {
      s1 += lane_s1_[0][l] + lane_s1_[1][l];
      s2 += lane_s2_[0][l] + lane_s2_[1][l];
    }
    slot[AOTI_DEBUG_PRINTER_STORED_NAN] += nan;
    slot[AOTI_DEBUG_PRINTER_STORED_POS_INF] += pos_inf;
    slot[AOTI_DEBUG_PRINTER_STORED_NEG_INF] += neg_inf;
    slot[AOTI_DEBUG_PRINTER_STORED_ZEROS] += zeros;
    if (finite == 0) return;
    slot[AOTI_DEBUG_PRINTER_STORED_MAX_KEY] =
        std::max(slot[AOTI_DEBUG_PRINTER_STORED_MAX_KEY], stored_key(mx));
    slot[AOTI_DEBUG_PRINTER_STORED_MIN_KEY] =
        std::max(slot[AOTI_DEBUG_PRINTER_STORED_MIN_KEY], (int64_t{1} << 33) - stored_key(mn));
    const int64_t before = slot[AOTI_DEBUG_PRINTER_STORED_FINITE];
    double sum = s1, squares = s2;
    if (before == 0) {
      set_double(slot, AOTI_DEBUG_PRINTER_STORED_SHIFT, shift_);
    } else {
      // Ours moved to the slot's shift: the same sums, about another value.
      const double delta = shift_ - get_double(slot, AOTI_DEBUG_PRINTER_STORED_SHIFT);
      const double n = static_cast<double>(finite);
      squares += 2 * delta * s1 + n * delta * delta;
      sum += n * delta;
    }
    set_double(slot, AOTI_DEBUG_PRINTER_STORED_SUM,
               get_double(slot, AOTI_DEBUG_PRINTER_STORED_SUM) + sum);
    set_double(slot, AOTI_DEBUG_PRINTER_STORED_SUM_OF_SQUARES,
               get_double(slot, AOTI_DEBUG_PRINTER_STORED_SUM_OF_SQUARES) + squares);
    slot[AOTI_DEBUG_PRINTER_STORED_FINITE] = before + finite;
  }

 private:
  static constexpr int kLanes = 8;
  typedef float Floats __attribute__((vector_size(kLanes * sizeof(float))));
  typedef int32_t Ints __attribute__((vector_size(kLanes * sizeof(int32_t))));
  typedef float HalfFloats __attribute__((vector_size(kLanes / 2 * sizeof(float))));
  typedef int32_t HalfInts __attribute__((vector_size(kLanes / 2 * sizeof(int32_t))));
  typedef double Doubles __attribute__((vector_size(kLanes / 2 * sizeof(double))));

  void shift_if_first(float value) {
    if (!shifted_) {
      shift_ = value;
      shifted_ = true;
    }
  }

  // kLanes values, branch-free: a lane that is not finite counts as NaN or
  // an infinity and adds nothing else.
  void add_lanes(const float* values) {
    if (!shifted_) {
      for (int l = 0; l < kLanes; ++l) {
        if (is_finite(values[l])) {
          shift_if_first(values[l]);
          break;
        }
      }
    }
    Floats x;
    memcpy(&x, values, sizeof x);
    Ints bits;
    memcpy(&bits, &x, sizeof bits);
    const Ints finite = (bits & 0x7f800000) != 0x7f800000;
    const float inf = __builtin_inff();
    lane_nan_ += x != x;  // lanes count -1 for each
    lane_pos_inf_ += x == inf;
    lane_neg_inf_ += x == -inf;
    lane_zeros_ += x == 0.0f;
    lane_finite_ += finite;
    lane_min_ = finite & (x < lane_min_) ? x : lane_min_;
    lane_max_ = finite & (x > lane_max_) ? x : lane_max_;
    const float shift = static_cast<float>(shift_);
    for (int h = 0; h < 2; ++h) {
      HalfFloats part;
      memcpy(&part, values + h * (kLanes / 2), sizeof part);
      HalfInts keep;
      memcpy(&keep, reinterpret_cast<const int32_t*>(&finite) + h * (kLanes / 2), sizeof keep);
      const HalfFloats kept = keep ? part : HalfFloats{} + shift;
      const Doubles e = __builtin_convertvector(kept, Doubles) - shift_;
      lane_s1_[h] += e;
      lane_s2_[h] += e * e;
    }
  }

  static bool is_finite(float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return (bits & 0x7f800000u) != 0x7f800000u;
  }

  static double get_double(const int64_t* slot, int field) {
    double d;
    memcpy(&d, slot + field, sizeof d);
    return d;
  }
  static void set_double(int64_t* slot, int field, double d) { memcpy(slot + field, &d, sizeof d); }

  int64_t nan_ = 0, pos_inf_ = 0, neg_inf_ = 0, zeros_ = 0, finite_ = 0;
  float min_ = __builtin_inff(), max_ = -__builtin_inff();
  double shift_ = 0, s1_ = 0, s2_ = 0;
  bool shifted_ = false;
  Floats lane_min_ = Floats{} + __builtin_inff(), lane_max_ = Floats{} - __builtin_inff();
  Ints lane_nan_ = Ints{}, lane_pos_inf_ = Ints{}, lane_neg_inf_ = Ints{}, lane_zeros_ = Ints{},
       lane_finite_ = Ints{};
  Doubles lane_s1_[2] = {}, lane_s2_[2] = {};
};

inline std::mutex& kept_lock() {
  static std::mutex lock;
  return lock;
}

// What one thread of a kernel keeps of the K buffers it stores whole, each
// in the slot after the last's.
template <int K>
struct Kept {
  KeptStats buffers[K];
  KeptStats& operator[](int i) { return buffers[i]; }
  // Into the kernel's slots (kernel_statistics as the kernel started):
  // once a thread's share of the loops is done, and once on the kernel's
  // own thread at its end.
  void merge_into(int64_t* slots) const {
    if (slots == nullptr) return;
    std::lock_guard<std::mutex> hold(kept_lock());
    for (int i = 0; i < K; ++i) buffers[i].merge_into(slots + i * AOTI_DEBUG_PRINTER_STORED_SLOT);
  }
};

}  // namespace aoti_debug_printer

#endif  // AOTI_DEBUG_PRINTER_KERNEL_H
