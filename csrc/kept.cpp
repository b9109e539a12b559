// kept.h: this thread's CPU statistics workspace.
#include "kept.h"

#include "graphs.h"
#include "settings.h"

#include <ATen/ops/zeros.h>

#include <algorithm>

namespace aoti_debug_printer::kept {
namespace {
thread_local at::Tensor workspace;
}  // namespace

bool records_take_them() {
  if (level_now(runtime_level(), Level::Print) != Level::Print) return false;
  const Settings& settings = settings_now();
  return settings.rank_selected() && settings.guard == 0 && !graphs::capturing();
}

const at::Tensor* cpu_workspace() { return &workspace; }

int64_t* keep_cpu(int64_t first, int64_t fields) {
  if (first < 0 || fields <= 0 || !records_take_them()) return nullptr;
  const int64_t needed = first + fields;
  const int64_t held = workspace.defined() ? workspace.numel() : 0;
  if (held < needed) {
    // The slots of the run's earlier kernels, which later records may still
    // read, come along.
    at::Tensor grown =
        at::zeros({std::max<int64_t>(needed, 2 * held)}, at::TensorOptions().dtype(at::kLong));
    if (held > 0) grown.narrow(0, 0, held).copy_(workspace);
    workspace = std::move(grown);
  }
  int64_t* slots = workspace.data_ptr<int64_t>() + first;
  std::fill(slots, slots + fields, int64_t{0});
  return slots;
}

}  // namespace aoti_debug_printer::kept
