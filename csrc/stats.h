// Fused per-tensor statistics: one pass over the elements, no float copy.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

// Every dtype with a numeric value per element, for AT_DISPATCH_V2: the
// statistics and the printed values cover the same set.
#define AOTI_DEBUG_PRINTER_DTYPES                                                  \
  AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), AT_EXPAND(AT_FLOAT8_TYPES),                 \
      AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES), at::kHalf, at::kBFloat16, at::kBool, \
      at::kComplexHalf

namespace aoti_debug_printer {

// A real floating value in double, exactly: Half, BFloat16 and the float8
// types widen through float; double must not go through float.
template <typename scalar_t>
inline double widen(scalar_t v) {
  if constexpr (std::is_same_v<scalar_t, double>) {
    return v;
  } else {
    return static_cast<double>(static_cast<float>(v));
  }
}

// The type min and max are kept in, exactly: int64 for signed integers and
// bool, uint64 for unsigned ones, double for everything else (complex: the
// modulus). int64 and uint64 must not round through double.
template <typename scalar_t>
using exact_t =
    std::conditional_t<std::is_integral_v<scalar_t> && !std::is_same_v<scalar_t, bool>,
                       std::conditional_t<std::is_signed_v<scalar_t>, int64_t, uint64_t>,
                       std::conditional_t<std::is_same_v<scalar_t, bool>, int64_t, double>>;

struct TensorStats {
  int64_t numel = 0;
  // Elements that are neither NaN nor infinite; min..absmax cover only these.
  int64_t finite = 0;
  int64_t nan = 0;
  int64_t pos_inf = 0;
  int64_t neg_inf = 0;
  int64_t zeros = 0;
  // Exact in the tensor's own type (int64 and uint64 do not round through
  // double). Empty when there is no finite element.
  std::optional<c10::Scalar> min;
  std::optional<c10::Scalar> max;
  double mean = 0;
  // Sample standard deviation (correction 1, as torch.std); NaN below two
  // finite elements.
  double std = 0;
  double absmax = 0;
  // Complex tensors: every statistic is of the modulus |z|; an element with
  // an infinite part counts as +Inf, one with a NaN part (and no infinite
  // part) as NaN, and a zero is 0+0j.
  bool of_modulus = false;
  // Set when the dtype or layout has no statistics (quantized, sparse, ...);
  // the record then carries metadata only.
  std::string unsupported;
  // The write guard's fingerprint (fingerprint.h), when it was asked for and
  // the pass read the tensor's own memory.
  std::optional<uint64_t> fingerprint;
};

// `host` must be a CPU tensor. Uses TensorIterator, so any strides work,
// including zero strides, and at::parallel_for for large tensors. With
// `with_fingerprint`, the same pass adds the elements' fingerprint.
TensorStats compute_stats(const at::Tensor& host, bool with_fingerprint = false);

// The statistics of a tensor of `numel` elements that a C++ kernel kept as
// it stored it, from its slot (aoti_debug_printer.h: AOTI_DEBUG_PRINTER_STORED_*).
TensorStats stats_of_kept_slot(const int64_t* slot, int64_t numel);

// The fingerprint alone, of a CPU tensor; empty for dtypes and layouts with
// no statistics.
std::optional<uint64_t> compute_fingerprint(const at::Tensor& host);

}  // namespace aoti_debug_printer
