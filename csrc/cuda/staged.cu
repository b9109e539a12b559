// device.h's copies for level 1's saver (saver.h): a CUDA tensor's bytes
// into the pinned memory the saver stages them in, queued on the tensor's
// stream, so that the model's thread never waits for them; the saver's
// thread waits, and then writes them.
#include "device.h"

#include "cuda/memory.cuh"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cuda_runtime.h>

#include <atomic>
#include <thread>

namespace aoti_debug_printer::device {

using namespace detail;

std::shared_ptr<uint8_t> pinned_host_memory(int64_t bytes) {
  void* memory = nullptr;
  C10_CUDA_CHECK(cudaHostAlloc(&memory, static_cast<size_t>(bytes), cudaHostAllocPortable));
  // At process exit the CUDA runtime may already be gone: nothing to report.
  return {static_cast<uint8_t*>(memory), [](uint8_t* m) { (void)cudaFreeHost(m); }};
}

struct HostCopy {
  cudaStream_t stream;
  const int64_t* ticket;
};

std::shared_ptr<HostCopy> copy_to_host_later(const at::Tensor& t, int64_t bytes, void* host,
                                             int64_t* ticket) {
  const int device = t.device().index();
  const c10::cuda::CUDAGuard guard(t.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
  // The ticket's source first: nothing is queued where it cannot be had.
  const int64_t* one = device_one(device);
  *ticket = 0;
  if (bytes > 0) {
    C10_CUDA_CHECK(cudaMemcpyAsync(host, t.const_data_ptr(), static_cast<size_t>(bytes),
                                   cudaMemcpyDeviceToHost, stream));
  }
  C10_CUDA_CHECK(cudaMemcpyAsync(ticket, one, sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
  return std::make_shared<HostCopy>(HostCopy{stream, ticket});
}

std::string wait_for(const HostCopy& copy) {
  // The ticket, not the whole stream: the saver writes each tensor as it
  // lands, while the GPU runs what was queued after it.
  while (reinterpret_cast<const volatile int64_t&>(*copy.ticket) != 1) {
    const cudaError_t err = cudaStreamQuery(copy.stream);
    if (err == cudaSuccess) break;  // all of the stream ran: the ticket is in
    if (err != cudaErrorNotReady)
      return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    std::this_thread::yield();
  }
  // The ticket was read first; the bytes before it must not be read before.
  std::atomic_thread_fence(std::memory_order_acquire);
  return "";
}

}  // namespace aoti_debug_printer::device
