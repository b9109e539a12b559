// Launch planning: how one tensor's statistics are computed (which kernel,
// how many blocks), where the results land in host memory (Layout), the
// launches themselves, and reading the results back.
#pragma once

#include "cuda/stats_kernels.cuh"
#include "device.h"

#include <ATen/TensorIterator.h>
#include <c10/cuda/CUDAException.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace aoti_debug_printer::device::detail {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline int64_t values_bytes(const at::Tensor& t, bool with_values) {
  return with_values ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

// The values' room in host memory and in the device scratch: whole 256-byte
// units, so that what follows stays aligned.
inline int64_t values_room(const at::Tensor& t, bool with_values) {
  return ceil_div(values_bytes(t, with_values), 256) * 256;
}

// What comes back to the host, in mapped pinned memory:
// [tickets: 8 bytes a partial | partials | values], each part 128-aligned.
struct Layout {
  int64_t parts = 0;        // blocks over every launch: one partial each
  int64_t values_room = 0;  // values_room(t, with_values)
};
inline int64_t round_up(int64_t bytes) { return ceil_div(bytes, 128) * 128; }
inline int64_t partials_at(const Layout& l) {
  return round_up(l.parts * static_cast<int64_t>(sizeof(unsigned long long)));
}
// Acc<double> is the largest partial of any dtype.
inline int64_t values_at(const Layout& l) {
  return partials_at(l) + round_up(l.parts * static_cast<int64_t>(sizeof(Acc<double>)));
}
inline int64_t result_bytes(const Layout& l) { return values_at(l) + l.values_room; }

// How one tensor's statistics are computed: which kernel, and how many
// blocks, hence partials. Decided before anything is queued, because the
// partials' room in host memory depends on it.
struct Plan {
  Layout layout;
  bool dense = false;
  std::vector<int64_t> blocks;  // strided: per 32-bit piece of `iter`
  std::optional<at::TensorIterator> iter;
  bool dependent_launch = false;  // programmatic dependent launches (sm_90+)
  int64_t scratch = 0;            // device scratch for the values made contiguous, 0: none needed
};

// nullopt when `t`'s dtype has no statistics. `t` has elements.
std::optional<Plan> plan_of(const at::Tensor& t, bool with_values);

// Launches `kernel` on `stream`; `dependent`: as a programmatic dependent
// launch (sm_90+), which may start before the kernel ahead of it ends.
template <typename Kernel, typename... Args>
void launch_kernel(Kernel kernel, int64_t blocks, int threads, cudaStream_t stream, bool dependent,
                   Args... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned int>(blocks));
  config.blockDim = dim3(threads);
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = dependent ? 1 : 0;
  C10_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args...));
}

// Queues on `stream`, by plan `p` (plan_of(t, with_values)): first the values
// (when asked) into back + values_at(p.layout), then the statistics kernels, whose
// blocks write their partials, and when `queued`, `ticket` after each.
void queue_snapshot(const at::Tensor& t, const Plan& p, cudaStream_t stream, bool with_values,
                    bool with_fingerprint, uint8_t* back, bool queued, unsigned long long ticket);

std::string no_stats_for(at::ScalarType dtype);

// The statistics (and values) written at `back` in `layout` for a tensor of
// `dtype` and `sizes`: the blocks' partials merged here.
Snapshot read_back(const uint8_t* back, const Layout& layout, at::ScalarType dtype,
                   at::IntArrayRef sizes, int64_t numel, bool with_values, bool with_fingerprint);

}  // namespace aoti_debug_printer::device::detail
