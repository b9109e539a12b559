// device.h for builds without CUDA: nothing runs on a device, so callers
// take the host path (one copy to the CPU, then compute_stats).
#include "device.h"

#include <c10/util/Exception.h>

namespace aoti_debug_printer::device {

bool computes_stats_on(const at::Tensor&) {
  return false;
}

Snapshot snapshot(const at::Tensor&, bool) {
  TORCH_CHECK(false, "aoti-debug-printer was built without CUDA");
}

std::string check_current_stream() {
  return "";
}

Allocation allocation_of(const void*) {
  return {};
}

} // namespace aoti_debug_printer::device
