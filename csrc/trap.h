// The NaN/Inf trap (AOTI_DEBUG_PRINTER_TRAP=1): stops a run at the first
// kernel whose outputs gain NaN or Inf, and at a model input that holds
// them, with the kernel's inputs as they were before launch, saved for a
// one-kernel repro.
#pragma once

#include "record.h"
#include "settings.h"

#include <string>
#include <vector>

namespace aoti_debug_printer::trap {

// NaN and infinities among `stats`' elements: what the trap fires on.
int64_t non_finite(const TensorStats& stats);
// What fired at `where`, a model input or a kernel's argument after its
// launch: the trap record's `what`, and the start of the stop's message.
std::string what_fired(const Where& where);
std::string stop_message(const Where& where);

// After a record whose statistics are `stats`, while settings.trap is on.
// `watched`: the kernel's arguments, with the host copies taken before its
// launch. Returns "" or, when the trap fired (reported, and noted in the
// dump already), a message that names the kernel or the model input: the
// run must stop.
std::string check(const Settings& settings, const Where& where, const TensorStats& stats,
                  std::vector<WatchedArg>& watched);

}  // namespace aoti_debug_printer::trap
