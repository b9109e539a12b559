#include "stats.h"

#include "aoti_debug_printer.h"

#include "fingerprint.h"

#include <ATen/Dispatch_v2.h>
#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>
#include <c10/util/complex.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <type_traits>
#include <vector>

namespace aoti_debug_printer {
namespace {

// Moments use sums shifted by the chunk's first finite value, which keeps
// float32 data accurate in double without a division per element (Welford).
template <typename E>
struct Partial {
  int64_t finite = 0, nan = 0, pos_inf = 0, neg_inf = 0, zeros = 0;
  E min{}, max{};
  double shift = 0, s1 = 0, s2 = 0, absmax = 0;
  uint64_t fingerprint = 0;  // the sum of terms only (fingerprint.h)

  void add_finite(E exact, double x) {
    if (finite == 0) {
      min = max = exact;
      shift = x;
    } else {
      if (exact < min) min = exact;
      if (max < exact) max = exact;
    }
    ++finite;
    const double d = x - shift;
    s1 += d;
    s2 += d * d;
    const double a = std::abs(x);
    if (a > absmax) absmax = a;
    if (x == 0) ++zeros;
  }
};

template <typename scalar_t>
void accumulate(Partial<exact_t<scalar_t>>& p, scalar_t v) {
  if constexpr (c10::is_complex<scalar_t>::value) {
    const double re = static_cast<double>(v.real()), im = static_cast<double>(v.imag());
    if (std::isinf(re) || std::isinf(im)) {
      ++p.pos_inf;
    } else if (std::isnan(re) || std::isnan(im)) {
      ++p.nan;
    } else {
      const double m = std::hypot(re, im);
      p.add_finite(m, m);
    }
  } else if constexpr (std::is_integral_v<scalar_t>) {
    p.add_finite(static_cast<exact_t<scalar_t>>(v), static_cast<double>(v));
  } else {
    const double x = widen(v);
    if (std::isnan(x)) {
      ++p.nan;
    } else if (std::isinf(x)) {
      ++(x > 0 ? p.pos_inf : p.neg_inf);
    } else {
      p.add_finite(x, x);
    }
  }
}

// Contiguous runs of floating values, the hot case: kLanes independent
// lanes, element j of a block going to lane j % kLanes, folded into the
// partial every kBlock elements. Values are taken in float (double for
// double), sums in double, so results match the scalar path's accuracy.
constexpr int kLanes = 16;
constexpr int64_t kBlock = 1 << 14;

template <typename scalar_t>
using value_t = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;

// Lane l of a block's totals: a[l], or, where the lanes are vectors of
// `width`, a[l / width][l % width].
template <int width, typename A>
auto lane(const A* a, int l) {
  if constexpr (width == 1) {
    return a[l];
  } else {
    return a[l / width][l % width];
  }
}

// Folds a block's totals into the partial, lane by lane in order (the sums
// in lanes of `sum_width`, the rest in lanes of `width`). Returns the
// block's finite elements.
template <int sum_width, int width, typename S, typename E, typename C>
int64_t fold_lanes(Partial<double>& p, const S* s1, const S* s2, const E* mn, const E* mx,
                   const E* am, const C* fin, const C* zero) {
  int64_t finite = 0;
  for (int l = 0; l < kLanes; ++l) {
    p.s1 += lane<sum_width>(s1, l);
    p.s2 += lane<sum_width>(s2, l);
    finite += lane<width>(fin, l);
    p.zeros += lane<width>(zero, l);
    if (lane<width>(fin, l) > 0) {
      p.min = std::min(p.min, static_cast<double>(lane<width>(mn, l)));
      p.max = std::max(p.max, static_cast<double>(lane<width>(mx, l)));
      p.absmax = std::max(p.absmax, static_cast<double>(lane<width>(am, l)));
    }
  }
  return finite;
}

// One block [begin, end) by a loop over the lanes, which GCC vectorizes
// well for AVX-512 (32 registers). Returns its finite elements, or, with
// `all_finite` (nearly every block), -1 where the block holds a NaN or an
// Inf, having changed nothing: the loop then masks no element, and takes
// each lane's absmax from its extremes, which give it exactly; a NaN or an
// Inf makes its lane's sum not finite, which finite values never do, and the
// caller takes the block again without `all_finite`. Each sum, extreme and
// count is made the same way in both, so the results are the same bit for bit.
template <bool all_finite, typename scalar_t>
__attribute__((always_inline)) inline int64_t block_by_lanes(Partial<double>& p, const scalar_t* x,
                                                             int64_t begin, int64_t end) {
  using V = value_t<scalar_t>;
  constexpr V inf = std::numeric_limits<V>::infinity();
  const V shift = static_cast<V>(p.shift);
  double s1[kLanes] = {}, s2[kLanes] = {};
  V mn[kLanes], mx[kLanes], am[kLanes];
  int32_t fin[kLanes] = {}, zero[kLanes] = {};
  for (int l = 0; l < kLanes; ++l) {
    mn[l] = inf;
    mx[l] = -inf;
    am[l] = 0;
  }
  for (int64_t i = begin; i < end; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const V v = static_cast<V>(x[i + l]);
      if constexpr (all_finite) {
        const double d = static_cast<double>(v) - static_cast<double>(shift);
        s1[l] += d;
        s2[l] += d * d;
        mn[l] = v < mn[l] ? v : mn[l];
        mx[l] = v > mx[l] ? v : mx[l];
      } else {
        const bool finite = (v - v) == 0;  // false for NaN and +-Inf
        const V f = finite ? v : 0;
        const double d = static_cast<double>(f) - static_cast<double>(finite ? shift : 0);
        s1[l] += d;
        s2[l] += d * d;
        mn[l] = (finite & (v < mn[l])) ? v : mn[l];
        mx[l] = (finite & (v > mx[l])) ? v : mx[l];
        const V a = f < 0 ? -f : f;
        am[l] = a > am[l] ? a : am[l];
        fin[l] += finite;
      }
      zero[l] += v == 0;
    }
  }
  if constexpr (all_finite) {
    bool finite = true;
    for (int l = 0; l < kLanes; ++l) finite &= std::isfinite(s1[l]);
    if (!finite) return -1;
    for (int l = 0; l < kLanes; ++l) {
      const V low = mn[l] < 0 ? -mn[l] : mn[l], high = mx[l] < 0 ? -mx[l] : mx[l];
      am[l] = high > low ? high : low;
      fin[l] = static_cast<int32_t>((end - begin) / kLanes);
    }
  }
  return fold_lanes<1, 1>(p, s1, s2, mn, mx, am, fin, zero);
}

template <typename T, int N>
struct Vector {
  typedef T type __attribute__((vector_size(N * sizeof(T))));
};
using double4 = Vector<double, 4>::type;

// The same block with the lanes as GCC/Clang vectors of 32 bytes, for AVX2
// and older: there GCC 12 made the loop over the lanes scalar compares and
// branches (its float compares feeding double sums), three times slower.
// Each lane's arithmetic is the same, and no FMA contracts it on those
// targets, so the results are the loop's bit for bit (checked on AVX2).
template <typename scalar_t>
__attribute__((always_inline)) inline int64_t block_by_vectors(Partial<double>& p,
                                                               const scalar_t* x, int64_t begin,
                                                               int64_t end) {
  using V = value_t<scalar_t>;
  constexpr int kWidth = 32 / sizeof(V);  // lanes of V per vector: 8 floats, 4 doubles
  constexpr int kVectors = kLanes / kWidth;
  using VV = typename Vector<V, kWidth>::type;
  // A compare's result: integer lanes of V's width, all bits set where true.
  using Mask = decltype(VV{} == VV{});
  constexpr V inf = std::numeric_limits<V>::infinity();
  const VV shifts = VV{} + static_cast<V>(p.shift), zeros = VV{}, infs = VV{} + inf;
  const Mask magnitude =
      Mask{} + std::numeric_limits<std::remove_reference_t<decltype(Mask{}[0])>>::max();
  double4 s1[kLanes / 4] = {}, s2[kLanes / 4] = {};
  VV mn[kVectors], mx[kVectors], am[kVectors];
  // Counts as the compares' masks count them (-1 per true lane).
  Mask fin[kVectors] = {}, zero[kVectors] = {};
  for (int g = 0; g < kVectors; ++g) {
    mn[g] = infs;
    mx[g] = -infs;
    am[g] = zeros;
  }
  for (int64_t i = begin; i < end; i += kLanes) {
    for (int g = 0; g < kVectors; ++g) {
      VV v;
      for (int k = 0; k < kWidth; ++k) v[k] = static_cast<V>(x[i + g * kWidth + k]);
      const auto finite = (v - v) == 0;  // false for NaN and +-Inf
      const VV f = finite ? v : zeros;
      const VV shifted = finite ? shifts : zeros;
      for (int h = 0; h < kWidth / 4; ++h) {
        const double4 d =
            double4{f[4 * h], f[4 * h + 1], f[4 * h + 2], f[4 * h + 3]} -
            double4{shifted[4 * h], shifted[4 * h + 1], shifted[4 * h + 2], shifted[4 * h + 3]};
        s1[g * kWidth / 4 + h] += d;
        s2[g * kWidth / 4 + h] += d * d;
      }
      // A non-finite lane takes part as +-Inf, which moves neither
      // extreme: the same results as skipping it, in a min and a max.
      const VV low = finite ? v : infs, high = finite ? v : -infs;
      mn[g] = low < mn[g] ? low : mn[g];
      mx[g] = high > mx[g] ? high : mx[g];
      // |f| by the sign bit (-0 as +0: neither moves absmax from +0).
      const VV a = reinterpret_cast<VV>(reinterpret_cast<Mask>(f) & magnitude);
      am[g] = a > am[g] ? a : am[g];
      fin[g] -= finite;
      zero[g] -= v == 0;
    }
  }
  return fold_lanes<4, kWidth>(p, s1, s2, mn, mx, am, fin, zero);
}

template <bool by_vectors, typename scalar_t>
__attribute__((always_inline)) inline void accumulate_run(Partial<double>& p, const scalar_t* x,
                                                          int64_t n) {
  using V = value_t<scalar_t>;
  constexpr V inf = std::numeric_limits<V>::infinity();
  int64_t i = 0;
  // The scalar path picks the shift: the first finite value.
  for (; i < n && p.finite == 0; ++i) accumulate<scalar_t>(p, x[i]);
  while (n - i >= kLanes) {
    const int64_t begin = i;
    i += std::min<int64_t>(kBlock, (n - i) / kLanes * kLanes);
    int64_t finite;
    if constexpr (by_vectors) {
      finite = block_by_vectors(p, x, begin, i);
    } else if (finite = block_by_lanes<true>(p, x, begin, i); finite < 0) {
      finite = block_by_lanes<false>(p, x, begin, i);
    }
    p.finite += finite;
    // Non-finite values are rare: classify them only in blocks that have some.
    if (finite != i - begin) {
      for (int64_t j = begin; j < i; ++j) {
        const V v = static_cast<V>(x[j]);
        p.nan += v != v;
        p.pos_inf += v == inf;
        p.neg_inf += v == -inf;
      }
    }
  }
  for (; i < n; ++i) accumulate<scalar_t>(p, x[i]);
}

// One version per instruction set, picked at load time (GCC's function
// multiversioning, an ifunc), so a portable build still runs at the
// machine's vector width.
#define AOTI_DEBUG_PRINTER_RUN(T, name)                                                     \
  __attribute__((target("avx512f"))) void name(Partial<double>& p, const T* x, int64_t n) { \
    accumulate_run<false>(p, x, n);                                                         \
  }                                                                                         \
  __attribute__((target("avx2"))) void name(Partial<double>& p, const T* x, int64_t n) {    \
    accumulate_run<true>(p, x, n);                                                          \
  }                                                                                         \
  __attribute__((target("default"))) void name(Partial<double>& p, const T* x, int64_t n) { \
    accumulate_run<true>(p, x, n);                                                          \
  }
AOTI_DEBUG_PRINTER_RUN(float, run_float)
AOTI_DEBUG_PRINTER_RUN(double, run_double)
AOTI_DEBUG_PRINTER_RUN(c10::Half, run_half)
AOTI_DEBUG_PRINTER_RUN(c10::BFloat16, run_bfloat16)
#undef AOTI_DEBUG_PRINTER_RUN

// Returns false when scalar_t has no vectorized run.
template <typename scalar_t>
bool vectorized_run(Partial<exact_t<scalar_t>>& p, const char* data, int64_t n) {
  const auto* x = reinterpret_cast<const scalar_t*>(data);
  if constexpr (std::is_same_v<scalar_t, float>) {
    run_float(p, x, n);
  } else if constexpr (std::is_same_v<scalar_t, double>) {
    run_double(p, x, n);
  } else if constexpr (std::is_same_v<scalar_t, c10::Half>) {
    run_half(p, x, n);
  } else if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) {
    run_bfloat16(p, x, n);
  } else {
    return false;
  }
  return true;
}

// The fingerprint terms of `n` elements `stride` bytes apart from `ptr`;
// positions count from `base`, the tensor's first element.
template <typename scalar_t>
uint64_t fingerprint_run(const char* ptr, int64_t n, int64_t stride, const char* base) {
  const int64_t position = (ptr - base) / static_cast<int64_t>(sizeof(scalar_t));
  const int64_t step = stride / static_cast<int64_t>(sizeof(scalar_t));
  const auto* x = reinterpret_cast<const scalar_t*>(ptr);
  uint64_t sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += fingerprint::term(x[i * step], position + i * step);
  return sum;
}

// One row of `n` elements `stride` bytes apart into `p`; with a fingerprint,
// in slices small enough to be read a second time from cache.
template <typename scalar_t>
void accumulate_row(Partial<exact_t<scalar_t>>& p, const char* row, int64_t n, int64_t stride,
                    bool with_fingerprint, const char* base) {
  const int64_t slice = with_fingerprint ? kBlock : n;
  for (int64_t s = 0; s < n; s += slice) {
    const int64_t m = std::min(slice, n - s);
    const char* ptr = row + s * stride;
    if (!(stride == sizeof(scalar_t) && vectorized_run<scalar_t>(p, ptr, m))) {
      for (int64_t i = 0; i < m; ++i) {
        accumulate<scalar_t>(p, *reinterpret_cast<const scalar_t*>(ptr + i * stride));
      }
    }
    if (with_fingerprint) p.fingerprint += fingerprint_run<scalar_t>(ptr, m, stride, base);
  }
}

// The statistics of the chunks' partials, in the tensor's order.
template <typename scalar_t>
TensorStats merged(c10::ArrayRef<std::pair<int64_t, Partial<exact_t<scalar_t>>>> ordered,
                   bool with_fingerprint) {
  using E = exact_t<scalar_t>;
  TensorStats s;
  int64_t n = 0;
  double mean = 0, m2 = 0;
  bool any = false;
  E mn{}, mx{};
  uint64_t fingerprint = 0;
  for (const auto& [_, p] : ordered) {
    fingerprint += p.fingerprint;
    s.nan += p.nan;
    s.pos_inf += p.pos_inf;
    s.neg_inf += p.neg_inf;
    s.zeros += p.zeros;
    if (p.finite == 0) continue;
    // Chan et al.'s pairwise update of (count, mean, M2).
    const double pn = static_cast<double>(p.finite);
    const double pmean = p.shift + p.s1 / pn;
    const double pm2 = std::max(0.0, p.s2 - p.s1 * p.s1 / pn);
    const double total = static_cast<double>(n) + pn;
    const double delta = pmean - mean;
    mean += delta * pn / total;
    m2 += pm2 + delta * delta * static_cast<double>(n) * pn / total;
    n += p.finite;
    if (!any || p.min < mn) mn = p.min;
    if (!any || mx < p.max) mx = p.max;
    s.absmax = std::max(s.absmax, p.absmax);
    any = true;
  }
  s.finite = n;
  s.mean = n > 0 ? mean : std::numeric_limits<double>::quiet_NaN();
  s.std =
      n > 1 ? std::sqrt(m2 / static_cast<double>(n - 1)) : std::numeric_limits<double>::quiet_NaN();
  if (any) {
    s.min = c10::Scalar(mn);
    s.max = c10::Scalar(mx);
  }
  s.of_modulus = c10::is_complex<scalar_t>::value;
  if (with_fingerprint) s.fingerprint = fingerprint;  // finished by the caller
  return s;
}

template <typename scalar_t>
TensorStats reduce(at::TensorIterator& iter, bool with_fingerprint, const char* base) {
  using E = exact_t<scalar_t>;
  std::mutex mu;
  // Chunks run serially inside, in parallel across chunks; the partials are
  // merged below in a fixed order so results do not depend on scheduling.
  std::vector<std::pair<int64_t, Partial<E>>> ordered;
  at::parallel_for(0, iter.numel(), at::internal::GRAIN_SIZE, [&](int64_t begin, int64_t end) {
    Partial<E> p;
    iter.serial_for_each(
        [&](char** data, const int64_t* strides, int64_t size0, int64_t size1) {
          for (int64_t j = 0; j < size1; ++j) {
            accumulate_row<scalar_t>(p, data[0] + j * strides[1], size0, strides[0],
                                     with_fingerprint, base);
          }
        },
        {begin, end});
    std::lock_guard<std::mutex> lock(mu);
    ordered.emplace_back(begin, p);
  });
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return merged<scalar_t>(ordered, with_fingerprint);
}

// A contiguous tensor of one chunk's elements at most, as reduce takes it
// (its iterator coalesces it into one row, which parallel_for runs as one
// chunk), without building the iterator (a quarter of a microsecond a
// tensor on this project's CPU).
template <typename scalar_t>
TensorStats reduce_one_chunk(const char* base, int64_t numel, bool with_fingerprint) {
  std::pair<int64_t, Partial<exact_t<scalar_t>>> chunk{0, {}};
  accumulate_row<scalar_t>(chunk.second, base, numel, sizeof(scalar_t), with_fingerprint, base);
  return merged<scalar_t>(chunk, with_fingerprint);
}

template <typename scalar_t>
uint64_t fingerprint_sum(at::TensorIterator& iter, const char* base) {
  std::atomic<uint64_t> sum{0};  // wrapping addition: any order gives the same sum
  at::parallel_for(0, iter.numel(), at::internal::GRAIN_SIZE, [&](int64_t begin, int64_t end) {
    uint64_t part = 0;
    iter.serial_for_each(
        [&](char** data, const int64_t* strides, int64_t size0, int64_t size1) {
          for (int64_t j = 0; j < size1; ++j) {
            part += fingerprint_run<scalar_t>(data[0] + j * strides[1], size0, strides[0], base);
          }
        },
        {begin, end});
    sum += part;
  });
  return sum;
}

// A read-only iterator with no output, as ATen's own count_nonzero uses: it
// coalesces dimensions and walks any strides, zero strides included.
at::TensorIterator read_only_iterator(const at::Tensor& host) {
  return at::TensorIteratorConfig()
      .add_const_input(host)
      .check_all_same_dtype(false)
      .resize_outputs(false)
      .build();
}

}  // namespace

TensorStats compute_stats(const at::Tensor& host, bool with_fingerprint) {
  TORCH_CHECK(host.device().is_cpu(), "compute_stats expects a CPU tensor");
  TensorStats s;
  s.numel = host.numel();
  if (host.layout() != at::kStrided) {
    s.unsupported = "no statistics for layout " + c10::str(host.layout());
    return s;
  }
  const int64_t numel = s.numel;
  try {
    if (numel == 0) {
      if (with_fingerprint) s.fingerprint = 0;
      s.mean = s.std = std::numeric_limits<double>::quiet_NaN();
    } else {
      const auto* base = static_cast<const char*>(host.const_data_ptr());
      const bool one_chunk = host.is_contiguous() && numel <= at::internal::GRAIN_SIZE;
      AT_DISPATCH_V2(host.scalar_type(), "aoti_debug_printer_stats", AT_WRAP([&] {
                       if (one_chunk) {
                         s = reduce_one_chunk<scalar_t>(base, numel, with_fingerprint);
                       } else {
                         auto iter = read_only_iterator(host);
                         s = reduce<scalar_t>(iter, with_fingerprint, base);
                       }
                     }),
                     AOTI_DEBUG_PRINTER_DTYPES);
    }
  } catch (const c10::NotImplementedError&) {
    // Quantized, packed sub-byte and bit types have no numeric value per element.
    s.unsupported = std::string("no statistics for dtype ") + c10::toString(host.scalar_type());
  }
  s.numel = numel;
  if (s.fingerprint) {
    s.fingerprint =
        fingerprint::finish(*s.fingerprint, numel, static_cast<int>(host.scalar_type()));
  }
  return s;
}

TensorStats stats_of_kept_slot(const int64_t* slot, int64_t numel) {
  const auto as_double = [slot](int field) {
    double d;
    std::memcpy(&d, slot + field, sizeof d);
    return d;
  };
  // One partial, as the pass's chunks make: merged() is the one place that
  // turns partials into statistics. The dtypes kept (float32, float16,
  // bfloat16) are all exact in float, whose keys the slot holds.
  Partial<double> p;
  p.nan = slot[AOTI_DEBUG_PRINTER_STORED_NAN];
  p.pos_inf = slot[AOTI_DEBUG_PRINTER_STORED_POS_INF];
  p.neg_inf = slot[AOTI_DEBUG_PRINTER_STORED_NEG_INF];
  p.zeros = slot[AOTI_DEBUG_PRINTER_STORED_ZEROS];
  p.finite = numel - p.nan - p.pos_inf - p.neg_inf;
  if (p.finite > 0) {
    p.max = float_of_stored_key(slot[AOTI_DEBUG_PRINTER_STORED_MAX_KEY]);
    p.min = float_of_stored_key((int64_t{1} << 33) - slot[AOTI_DEBUG_PRINTER_STORED_MIN_KEY]);
    p.absmax = std::max(std::abs(p.min), std::abs(p.max));
  }
  p.shift = as_double(AOTI_DEBUG_PRINTER_STORED_SHIFT);
  p.s1 = as_double(AOTI_DEBUG_PRINTER_STORED_SUM);
  p.s2 = as_double(AOTI_DEBUG_PRINTER_STORED_SUM_OF_SQUARES);
  const std::pair<int64_t, Partial<double>> only{0, p};
  TensorStats s = merged<float>({only}, false);
  s.numel = numel;
  return s;
}

std::optional<uint64_t> compute_fingerprint(const at::Tensor& host) {
  TORCH_CHECK(host.device().is_cpu(), "compute_fingerprint expects a CPU tensor");
  if (host.layout() != at::kStrided) return std::nullopt;
  uint64_t sum = 0;
  try {
    AT_DISPATCH_V2(host.scalar_type(), "aoti_debug_printer_fingerprint", AT_WRAP([&] {
                     if (host.numel() == 0) return;
                     auto iter = read_only_iterator(host);
                     sum = fingerprint_sum<scalar_t>(
                         iter, static_cast<const char*>(host.const_data_ptr()));
                   }),
                   AOTI_DEBUG_PRINTER_DTYPES);
  } catch (const c10::NotImplementedError&) {
    return std::nullopt;
  }
  return fingerprint::finish(sum, host.numel(), static_cast<int>(host.scalar_type()));
}

}  // namespace aoti_debug_printer
