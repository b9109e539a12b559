// Pinned and scratch memory (memory.cuh).
#include "cuda/memory.cuh"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>
#include <vector>

namespace aoti_debug_printer::device::detail {

// Mapped pinned host memory, kept per host thread: the kernel writes the
// partials into it directly (no copy call), and small tensors' values are
// copied into it; no allocator call on the per-tensor path. Each snapshot waits for its own
// kernels before returning, so one buffer per thread is never written by two
// tensors at once. Grows to the largest size asked for.
uint8_t* host_result_buffer(size_t bytes) {
  struct Buffer {
    void* data = nullptr;
    size_t size = 0;
    ~Buffer() {
      // At process exit the CUDA runtime may already be gone: nothing to report.
      if (data) (void)cudaFreeHost(data);
    }
  };
  thread_local Buffer buffer;
  if (bytes > buffer.size) {
    if (buffer.data) C10_CUDA_CHECK(cudaFreeHost(buffer.data));
    buffer.data = nullptr;
    buffer.size = 0;
    const size_t size = std::max<size_t>(bytes, 4096);
    // Portable: every device's kernels may write it (unified addressing makes
    // the host pointer the device pointer).
    C10_CUDA_CHECK(cudaHostAlloc(&buffer.data, size, cudaHostAllocMapped | cudaHostAllocPortable));
    buffer.size = size;
  }
  return static_cast<uint8_t*>(buffer.data);
}

// Device memory for a non-contiguous tensor's values, made contiguous before
// they are copied back; kept per host thread and device like the pinned
// buffer (no allocator call per tensor), returned when the thread exits.
ScratchBuffer& scratch_of(int device) {
  struct Buffers {
    std::vector<ScratchBuffer> per_device;
    ~Buffers() {
      for (const ScratchBuffer& b : per_device) {
        if (b.data) (void)cudaFree(b.data);
      }
    }
  };
  thread_local Buffers buffers;
  if (buffers.per_device.size() <= static_cast<size_t>(device))
    buffers.per_device.resize(device + 1);
  return buffers.per_device[device];
}

uint8_t* device_scratch(int device, int64_t bytes) {
  ScratchBuffer& b = scratch_of(device);
  if (bytes > b.size) {
    if (b.data) C10_CUDA_CHECK(cudaFree(b.data));
    b = ScratchBuffer{};
    C10_CUDA_CHECK(cudaMalloc(&b.data, bytes));
    b.size = bytes;
  }
  return static_cast<uint8_t*>(b.data);
}

const int64_t* device_one(int device) {
  static std::mutex mu;
  static std::vector<int64_t*> ones;
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<int>(ones.size()) <= device) ones.resize(device + 1, nullptr);
  if (!ones[device]) {
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    int64_t* one = nullptr;
    C10_CUDA_CHECK(cudaMalloc(&one, sizeof(int64_t)));
    const int64_t value = 1;
    C10_CUDA_CHECK(cudaMemcpy(one, &value, sizeof value, cudaMemcpyHostToDevice));
    ones[device] = one;  // kept for the process
  }
  return ones[device];
}

}  // namespace aoti_debug_printer::device::detail
