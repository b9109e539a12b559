#include "stats.h"

#include <ATen/Dispatch_v2.h>
#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>
#include <c10/util/complex.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <type_traits>
#include <vector>

namespace aoti_debug_printer {
namespace {

template <typename T>
struct is_complex_t : std::false_type {};
template <typename T>
struct is_complex_t<c10::complex<T>> : std::true_type {};

// Min and max are kept in a type that holds every value exactly: int64 for
// signed integers and bool, uint64 for unsigned, double for everything else.
template <typename scalar_t>
using exact_t = std::conditional_t<
    std::is_integral_v<scalar_t> && !std::is_same_v<scalar_t, bool>,
    std::conditional_t<std::is_signed_v<scalar_t>, int64_t, uint64_t>,
    std::conditional_t<std::is_same_v<scalar_t, bool>, int64_t, double>>;

// Moments use sums shifted by the chunk's first finite value, which keeps
// float32 data accurate in double without a division per element (Welford).
template <typename E>
struct Partial {
  int64_t finite = 0, nan = 0, pos_inf = 0, neg_inf = 0, zeros = 0;
  E min{}, max{};
  double shift = 0, s1 = 0, s2 = 0, absmax = 0;

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
  if constexpr (is_complex_t<scalar_t>::value) {
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
    // Half, BFloat16 and the float8 types widen to float exactly.
    const double x = static_cast<double>(static_cast<float>(v));
    if (std::isnan(x)) {
      ++p.nan;
    } else if (std::isinf(x)) {
      ++(x > 0 ? p.pos_inf : p.neg_inf);
    } else {
      p.add_finite(x, x);
    }
  }
}

template <typename E>
c10::Scalar to_scalar(E v) {
  return c10::Scalar(v);
}

template <typename scalar_t>
TensorStats reduce(at::TensorIterator& iter) {
  using E = exact_t<scalar_t>;
  std::mutex mu;
  // Chunks run serially inside, in parallel across chunks; the partials are
  // merged below in a fixed order so results do not depend on scheduling.
  std::vector<std::pair<int64_t, Partial<E>>> ordered;
  at::parallel_for(0, iter.numel(), at::internal::GRAIN_SIZE, [&](int64_t begin, int64_t end) {
    Partial<E> p;
    iter.serial_for_each(
        [&p](char** data, const int64_t* strides, int64_t size0, int64_t size1) {
          for (int64_t j = 0; j < size1; ++j) {
            const char* ptr = data[0] + j * strides[1];
            for (int64_t i = 0; i < size0; ++i) {
              accumulate<scalar_t>(p, *reinterpret_cast<const scalar_t*>(ptr + i * strides[0]));
            }
          }
        },
        {begin, end});
    std::lock_guard<std::mutex> lock(mu);
    ordered.emplace_back(begin, p);
  });
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });

  TensorStats s;
  int64_t n = 0;
  double mean = 0, m2 = 0;
  bool any = false;
  E mn{}, mx{};
  for (const auto& [_, p] : ordered) {
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
  s.std = n > 1 ? std::sqrt(m2 / static_cast<double>(n - 1))
                : std::numeric_limits<double>::quiet_NaN();
  if (any) {
    s.min = to_scalar(mn);
    s.max = to_scalar(mx);
  }
  s.of_modulus = is_complex_t<scalar_t>::value;
  return s;
}

} // namespace

TensorStats compute_stats(const at::Tensor& host) {
  TORCH_CHECK(host.device().is_cpu(), "compute_stats expects a CPU tensor");
  TensorStats s;
  s.numel = host.numel();
  if (host.layout() != at::kStrided) {
    s.unsupported = "no statistics for layout " + c10::str(host.layout());
    return s;
  }
  if (s.numel == 0) {
    s.mean = s.std = std::numeric_limits<double>::quiet_NaN();
    return s;
  }
  // A read-only iterator with no output, as ATen's own count_nonzero uses:
  // it coalesces dimensions and walks any strides, zero strides included.
  auto iter = at::TensorIteratorConfig()
                  .add_const_input(host)
                  .check_all_same_dtype(false)
                  .resize_outputs(false)
                  .build();
  const int64_t numel = s.numel;
  try {
    AT_DISPATCH_V2(
        host.scalar_type(), "aoti_debug_printer_stats", AT_WRAP([&] { s = reduce<scalar_t>(iter); }),
        AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), AT_EXPAND(AT_FLOAT8_TYPES),
        AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES), at::kHalf, at::kBFloat16, at::kBool,
        at::kComplexHalf);
  } catch (const c10::NotImplementedError&) {
    // Quantized, packed sub-byte and bit types have no numeric value per element.
    s.unsupported = std::string("no statistics for dtype ") + c10::toString(host.scalar_type());
  }
  s.numel = numel;
  return s;
}

} // namespace aoti_debug_printer
