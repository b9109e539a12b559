// device.h for builds without the CUDA kernel: nothing runs on a device, so
// callers take the host path (one copy to the CPU, then compute_stats).
#include "device.h"

#include "no_cuda_reason.h"  // written by CMake: why this build has no CUDA kernel

#include <c10/util/Exception.h>

#include <cstdio>
#include <mutex>
#include <stdexcept>

namespace aoti_debug_printer::device {

std::string cuda_statistics_unavailable() { return AOTI_DEBUG_PRINTER_NO_CUDA_REASON; }

bool computes_stats_on(const at::Tensor& t) {
  if (t.is_cuda()) {
    // The build said why (CMake's warning), but pip hides build output: say
    // it again, once, where a user who wonders why the GPU path is slow looks.
    static std::once_flag told;
    std::call_once(told, [] {
      std::fprintf(
          stderr,
          "[aoti-debug-printer] this build has no CUDA statistics kernel (%s); statistics of "
          "CUDA tensors are computed after a copy to the host\n",
          AOTI_DEBUG_PRINTER_NO_CUDA_REASON);
    });
  }
  return false;
}

Snapshot snapshot(const at::Tensor&, bool, bool) {
  TORCH_CHECK(false, "aoti-debug-printer was built without CUDA");
}

struct Landing {};

bool can_snapshot_later(const at::Tensor&, bool) { return false; }

std::shared_ptr<Landing> snapshot_later(const at::Tensor&, bool, bool, bool) {
  TORCH_CHECK(false, "aoti-debug-printer was built without CUDA");
}

void launch_batch() {}

bool serves_for(const Landing&, const at::Tensor&, bool) { return false; }

bool landed(const Landing&) { return true; }

std::string wait_for(const Landing&) { return ""; }

Snapshot take(const Landing&, const std::string&) {
  TORCH_CHECK(false, "aoti-debug-printer was built without CUDA");
}

// No workspace is one: records of stored tensors read the tensor instead.
class StoredRun {};

bool is_statistics_workspace(const at::Tensor&) { return false; }

std::shared_ptr<StoredRun> stored_run(const at::Tensor&) {
  TORCH_CHECK(false, "aoti-debug-printer was built without CUDA");
}

void switch_on_stored(const at::Tensor&) {}

bool stored_run_serves(const StoredRun&, const at::Tensor&) { return false; }

void copy_back(StoredRun&) {}

bool landed(const StoredRun&) { return true; }

std::string wait_for(StoredRun&) { return ""; }

TensorStats stored_stats(const StoredRun&, int64_t, int64_t, const std::string&) {
  TORCH_CHECK(false, "aoti-debug-printer was built without CUDA");
}

TensorStats stored_stats_now(const at::Tensor&, int64_t, int64_t) {
  TORCH_CHECK(false, "aoti-debug-printer was built without CUDA");
}

std::shared_ptr<uint8_t> pinned_host_memory(int64_t) {
  throw std::runtime_error("this build has no CUDA");
}

struct HostCopy {};

std::shared_ptr<HostCopy> copy_to_host_later(const at::Tensor&, int64_t, void*, int64_t*) {
  throw std::runtime_error("this build has no CUDA");
}

std::string wait_for(const HostCopy&) { return ""; }

bool capturing() { return false; }

void begin_capture() {}

void end_capture() {}

void capture_host_call(void (*)(void*), void*) {
  TORCH_CHECK(false, "aoti-debug-printer was built without CUDA");
}

CapturedCopy capture_copy(const at::Tensor&) {
  TORCH_CHECK(false, "aoti-debug-printer was built without CUDA");
}

std::string check_current_stream() { return ""; }

int bind_context() { return -1; }

Allocation allocation_of(const void*) { return {}; }

Facts facts_of(int) { return {}; }

}  // namespace aoti_debug_printer::device
