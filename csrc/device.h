// What only an accelerator needs: statistics computed where the tensor
// lives, the error check after a kernel, and where allocations begin and end.
// cuda.cu implements it for CUDA; no_cuda.cpp when the build has no CUDA.
#pragma once

#include "stats.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace aoti_debug_printer::device {

// True when this build can compute statistics on `t`'s device.
bool computes_stats_on(const at::Tensor& t);

// Statistics of `t` computed on its device, on the current stream, in one
// fused pass that writes them into host memory. With `with_values`, the
// elements come too, in one device-to-host copy: `values` is then a
// contiguous CPU tensor of `t`'s dtype and shape; else undefined. With
// `with_fingerprint`, the same pass adds stats.fingerprint.
struct Snapshot {
  TensorStats stats;
  at::Tensor values;
};
Snapshot snapshot(const at::Tensor& t, bool with_values, bool with_fingerprint = false);

// Waits for the current stream of the current device and returns CUDA's
// error state as "cudaErrorName: description", or "" when all is well or no
// CUDA context exists in this process (a check never creates one).
std::string check_current_stream();

// The driver allocation holding `address`: [base, base + size). `known` is
// false where it cannot be told (no CUDA, not device memory).
struct Allocation {
  bool known = false;
  uintptr_t base = 0;
  uint64_t size = 0;
};
Allocation allocation_of(const void* address);

} // namespace aoti_debug_printer::device
