// The C++ side of the C ABI, shared by the exported functions and the Python
// bindings so that both paths run the same code.
#pragma once

#include "finding.h"
#include "record.h"
#include "settings.h"

#include <ATen/core/Tensor.h>
#include <c10/util/FunctionRef.h>

#include <cstdint>
#include <optional>
#include <string>

namespace aoti_debug_printer {

// `with_end`: end_run will end the run (see aoti_debug_printer_begin_run_with_end).
void begin_run(bool with_end = false);
void end_run();
// A part of this thread's run that a CUDA graph may capture: a function of
// the JIT wrapper that cudagraph trees capture (a graph partition's, or the
// whole call). Where the current stream is capturing, its records go to a
// capture until end_capturable, which captures the host call that writes
// them at each replay (graphs.h); elsewhere both do nothing. Returns
// whether a capture began: one already begun (a subgraph's function called
// inside a partition's) goes on, and only its own part ends it.
bool begin_capturable();
void end_capturable();
// What the trap found at a replay of a captured CUDA graph, which the graph
// could not stop, for this run to stop with (STOPPED_BY_EARLIER_REPLAY),
// taken once; none where the printer is off or this rank unselected, or
// while the current stream is capturing.
Stop stop_for_an_earlier_replay();
// The end of the last launch event's records (AOTI_DEBUG_PRINTER_RECORDS_END):
// the statistics they left in the device's batch are launched.
void records_end();
// The digest of the Inductor config this thread's run's program was compiled
// with: its environment record says it.
void compiled_with(const std::string& inductor_config);
// A launch event of a model compiled at `compiled`; `flags`:
// AOTI_DEBUG_PRINTER_ANNOUNCE, _UNSELECTED, _WRITES_UNSEEN. Stops where the
// check after a kernel found a CUDA error, or a replay's trap waits for
// this run (stop_for_an_earlier_replay).
Stop launch(Level compiled, Phase phase, const std::string& kernel, int32_t flags);

// The Where of a record taken now on this thread.
Where where_now(Phase phase, std::string kernel, std::string arg);

// Where a generated kernel kept the statistics of what it stored
// (aoti_debug_printer_tensor_stored): the run's statistics workspace, and
// the slot's first field in it.
struct Stored {
  const at::Tensor* workspace;
  int64_t field;
};

// The run's statistics workspace, zeroed (aoti_debug_printer_statistics_workspace):
// switches the kernels' statistics on where this run's records print them.
void statistics_workspace(const at::Tensor* workspace);

// A record of a model compiled at `compiled`, which the run-time level
// turns into a save, a print or nothing (settings.h: action_at). `t ==
// nullptr` stands for a null handle. `where_of` makes the record's Where
// (its role then set to `role`, or to Unknown under roles=0), called only
// where a record or a check needs one: a call that takes nothing copies no
// name. Save failures are reported, never thrown. With `stored`, a printed
// record takes its statistics from there where it can (can_record_stored).
Stop record_tensor(Level compiled, Phase phase, Role role, const at::Tensor* t,
                   c10::function_ref<Where()> where_of,
                   const std::optional<Stored>& stored = std::nullopt);
void record_scalar(Level compiled, const Where& where, const char* type, const std::string& value);
// Model input `arg` (the program's input `name`) against `compiled_for`
// (aoti_debug_printer_check_input's grammar): a mismatch is reported, and
// stops the run unless the input_check setting says go on.
Stop check_input(Level compiled, const std::string& arg, const std::string& name,
                 const std::string& compiled_for, const at::Tensor* t);

}  // namespace aoti_debug_printer
