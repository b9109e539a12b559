// The NaN/Inf trap (AOTI_DEBUG_PRINTER_TRAP=1): stops a run at the first
// kernel whose outputs gain NaN or Inf, and at a model input that holds
// them, with the kernel's inputs as they were before launch, saved for a
// one-kernel repro.
#pragma once

#include "finding.h"
#include "record.h"
#include "settings.h"

#include <optional>
#include <string>
#include <vector>

namespace aoti_debug_printer::trap {

// The elements of `stats` the trap fires on: NaN and infinities, or with
// `nan_only` NaN alone.
int64_t fires_on(const TensorStats& stats, bool nan_only);
// What fired at `where`, a model input or a kernel's argument after its
// launch: the trap record's `what`, and the start of the stop's message.
std::string what_fired(const Where& where);
std::string stop_message(const Where& where);
// What the stop's message says next where the trap fired on `stats` with
// infinities only: what to do when they are meant; else "".
std::string where_only_infinities(const TensorStats& stats);

// After a record whose statistics are `stats`, while settings.trap is on.
// `watched`: the kernel's arguments, with the host copies taken before its
// launch, and those it only reads kept (taken here where it fires; the
// kernel's inputs are saved for its repro then). Returns the finding, for
// stop_at, where the trap fires: the run must stop.
std::optional<Finding> check(const Settings& settings, const Where& where, const TensorStats& stats,
                             std::vector<WatchedArg>& watched);

}  // namespace aoti_debug_printer::trap
