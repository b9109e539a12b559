// The write guard (AOTI_DEBUG_PRINTER_GUARD): finds the kernel that changed
// memory it had no right to change, a bug that faults nowhere (the memory
// belongs to a live neighbour) and that no statistic shows.
//
// It uses what the code generator knows of each argument (its role):
// - a kernel must not change an argument it only reads: a copy taken before
//   launch is compared with the argument after it;
// - a buffer holds what its writer stored until the next kernel that reads
//   it: the writer's fingerprint is compared with the reader's. At guard 2
//   every buffer the guard holds a fingerprint of is checked before and
//   after each kernel, so the first place it changed is known.
// A check is made only where the answer is sure: a buffer whose memory a
// kernel writes under another name, or a kernel the printer does not see,
// ends what the guard claims of it.
#pragma once

#include "finding.h"
#include "record.h"
#include "settings.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>

namespace aoti_debug_printer::guard {

// The fingerprint of `t`'s elements (fingerprint.h), computed where `t`
// lives when this build can (CPU; CUDA with the statistics kernel), else from
// a copy on the host. Empty for dtypes and layouts without statistics. The
// records' own statistics pass computes it too, when the guard is on: the
// hooks below take that one rather than read the tensor again.
std::optional<uint64_t> fingerprint(const at::Tensor& t);

// How `after` differs from `before` (one shape and dtype), element by
// element and by bits, so a NaN that stays the same NaN is unchanged.
struct Difference {
  int64_t changed = 0;
  int64_t first_index = -1;  // row-major; -1 when nothing changed
};
Difference difference(const at::Tensor& before, const at::Tensor& after);

// The shim's hooks, called only while settings.guard > 0 at levels 1 and 2.
// The *_use hooks return, where they found a violation (its copies saved
// already), the finding, for stop_at: the run must stop.
void begin_run();
// `seen`: this kernel's arguments are recorded (selected by the filters).
void before_launch(const Settings& settings, const Where& launch, bool seen);
void after_launch(const Settings& settings, const Where& launch);
// A model input, or an argument before its kernel's launch. `print`: `t`'s
// fingerprint when its record computed one.
std::optional<Finding> before_use(const Settings& settings, const Where& where, const at::Tensor& t,
                                  std::optional<uint64_t> print);
// An argument after its kernel's launch.
std::optional<Finding> after_use(const Settings& settings, const Where& where, const at::Tensor& t,
                                 std::optional<uint64_t> print);

}  // namespace aoti_debug_printer::guard
