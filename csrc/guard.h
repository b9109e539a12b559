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
//
// Inside a captured CUDA graph nothing is compared at capture, where no
// kernel runs: the same bookkeeping holds, for each fingerprint, the
// capture's item whose statistics pass computes it at each replay, and
// each check becomes a pair of items the graph's host call compares at
// each replay (graphs.h). Guard 2 acts as guard 1 there: it would need a
// fingerprint of every buffer held, a pass each, at every kernel.
#pragma once

#include "finding.h"
#include "format.h"
#include "graphs.h"
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

// A tensor's fingerprint as its record took it: `value`, taken now; or,
// inside a captured CUDA graph, `item`, the capture's item whose landing or
// copy holds it at each replay. Neither: outside a graph the guard reads
// the tensor itself; inside, it vouches for nothing of that tensor.
struct Print {
  std::optional<uint64_t> value;
  std::optional<size_t> item;
  Print() = default;
  Print(std::optional<uint64_t> v) : value(v) {}  // NOLINT(google-explicit-constructor)
  static Print of_item(std::optional<size_t> item) {
    Print p;
    p.item = item;
    return p;
  }
};

// The shim's hooks, called only while settings.guard > 0 at levels 1 and 2.
// The *_use hooks return, where they found a violation (its copies saved
// already), the finding, for stop_at: the run must stop. Inside a captured
// graph they return none: they add their checks to the capture.
void begin_run();
// What the guard holds is forgotten: a captured part of a run begins or
// ends (graphs.h), and what it held are values of the other side.
void forget();
// `seen`: this kernel's arguments are recorded (selected by the filters).
void before_launch(const Settings& settings, const Where& launch, bool seen);
void after_launch(const Settings& settings, const Where& launch);
// A model input, or an argument before its kernel's launch. `print`: `t`'s
// fingerprint when its record computed one.
std::optional<Finding> before_use(const Settings& settings, const Where& where, const at::Tensor& t,
                                  Print print);
// An argument after its kernel's launch.
std::optional<Finding> after_use(const Settings& settings, const Where& where, const at::Tensor& t,
                                 Print print);
// A check made at capture (graphs::add_check), as the capture calls it at
// the replay whose fingerprints differed: the finding's record, note and
// message, as stop_at takes them outside graphs. It says what a replay can
// tell, and nothing else: no element counts, no saved copies.
graphs::FindingAt at_replay(GuardFinding f);

}  // namespace aoti_debug_printer::guard
