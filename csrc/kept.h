// This thread's CPU statistics workspace: where the C++ kernels that
// Inductor generates keep the statistics of what they store
// (aoti_debug_printer_cpu_statistics and _keep_cpu_statistics;
// inductor/kept_cpp.py), and when a run's records take what kernels keep.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace aoti_debug_printer::kept {

// Whether this run's records take what the generated kernels keep, on
// either device: only a printed record takes its statistics from a slot,
// and never where the write guard reads every tensor, the rank is not
// selected or a capture's replays read them.
bool records_take_them();

// The workspace: int64, undefined until a kernel first keeps statistics on
// the thread, grown as the run's kernels ask for more and never moved
// otherwise.
const at::Tensor* cpu_workspace();

// Zeroes `fields` fields of the workspace from `first`, grown to hold them,
// and returns where they start; nullptr where records_take_them() says no.
int64_t* keep_cpu(int64_t first, int64_t fields);

}  // namespace aoti_debug_printer::kept
