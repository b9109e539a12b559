// device.h's driver queries: CUDA's error state after a kernel, the
// thread's context, the allocation that holds an address, a device's name.
#include "device.h"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include <string>

namespace aoti_debug_printer::device {

std::string check_current_stream() {
  // Only a process that already uses CUDA is checked: the check must never
  // create a context (or initialize CUDA) for a CPU model.
  static const int devices = c10::cuda::device_count();
  if (devices == 0) return "";
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) return "";
  if (!c10::cuda::hasPrimaryContext(static_cast<c10::DeviceIndex>(dev))) return "";
  cudaError_t err = cudaStreamSynchronize(
      c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(dev)).stream());
  // A failed launch is not sticky: peek, so that the caller's own check
  // still sees it.
  if (err == cudaSuccess) err = cudaPeekAtLastError();
  if (err == cudaSuccess) return "";
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

bool capturing() {
  static const int devices = c10::cuda::device_count();
  if (devices == 0) return false;
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (!c10::cuda::hasPrimaryContext(static_cast<c10::DeviceIndex>(dev))) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(
          c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(dev)).stream(), &status) !=
      cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return status == cudaStreamCaptureStatusActive;
}

void capture_host_call(void (*fn)(void*), void* arg) {
  C10_CUDA_CHECK(cudaLaunchHostFunc(c10::cuda::getCurrentCUDAStream().stream(), fn, arg));
}

namespace {
// A driver function, from the runtime's driver entry points, so this library
// never links libcuda itself (torch does not either); nullptr where the
// driver has none.
template <typename Function>
Function driver_function(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
  const cudaError_t err =
      cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found);
#else
  const cudaError_t err = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &found);
#endif
  return err == cudaSuccess && found == cudaDriverEntryPointSuccess ? reinterpret_cast<Function>(fn)
                                                                    : nullptr;
}
}  // namespace

int bind_context() {
  // Only a process that already uses CUDA: this must never create a context
  // (or initialize CUDA) for a CPU model.
  static const int devices = c10::cuda::device_count();
  if (devices == 0) return -1;
  using GetCurrent = CUresult (*)(CUcontext*);
  static const GetCurrent get_current = driver_function<GetCurrent>("cuCtxGetCurrent");
  CUcontext current = nullptr;
  if (!get_current || get_current(&current) != CUDA_SUCCESS || current != nullptr) return -1;
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) return -1;
  // A device this process has not used yet gets its context from the
  // package's own first runtime call (its first allocation).
  if (!c10::cuda::hasPrimaryContext(static_cast<c10::DeviceIndex>(dev))) return -1;
  // cudaSetDevice makes the device's primary context current on this thread
  // even where the device already is the current one (CUDA 12 and later).
  if (cudaSetDevice(dev) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return dev;
}

Allocation allocation_of(const void* address) {
  using GetRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  static const GetRange get_range = driver_function<GetRange>("cuMemGetAddressRange");
  Allocation a;
  CUdeviceptr base = 0;
  size_t size = 0;
  if (get_range && address &&
      get_range(&base, &size, reinterpret_cast<CUdeviceptr>(address)) == CUDA_SUCCESS) {
    a.known = true;
    a.base = static_cast<uintptr_t>(base);
    a.size = size;
  }
  return a;
}

std::string cuda_statistics_unavailable() { return ""; }

Facts facts_of(int index) {
  Facts f;
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
    cudaGetLastError();  // asked of a device that is not there: no sticky error left
    return f;
  }
  f.name = prop.name;
  f.capability = std::to_string(prop.major) + "." + std::to_string(prop.minor);
  return f;
}

}  // namespace aoti_debug_printer::device
