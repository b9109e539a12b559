// What the printer finds that stops a run: the trap's NaN/Inf, the write
// guard's overwrite, a CUDA error after a kernel, a model input the package
// was not compiled for, a replay's trap a captured graph could not stop.
// Each takes one path, stop_at: its record written, noted in the dump for
// `aoti-debug repro`, the stop reported, a job's other ranks stopped, and
// the stop's message kept for the error its caller raises. A new finding
// words its own stop, and nothing else does.
#pragma once

#include "settings.h"

#include <cstdint>
#include <string>

namespace aoti_debug_printer {

// Why a call asks its caller to stop the run: `code` is 0 (go on) or an
// AOTI_DEBUG_PRINTER_STOPPED_BY_* code; `message` (reported already) says
// what was found and where.
struct Stop {
  int32_t code = 0;
  std::string message;
};

struct Finding {
  int32_t code = 0;     // AOTI_DEBUG_PRINTER_STOPPED_BY_*
  std::string record;   // its record as the output's format writes it; "" where none
  std::string noted;    // its JSON line for the dump's manifest; "" where none
  bool kernel = false;  // a kernel's: the note's line says how to repro it
  std::string message;  // the stop, in one line
  // What the message says next where the finding is not noted in the dump
  // (how to get a repro of it).
  std::string unnoted;
};

// The finding's record written to `output` and its note in `dump_dir`,
// with nothing stopped: a wrong input the settings let pass, a replay's
// trap that only the next run outside the graph can stop (graphs.h).
// Returns what the stop's message says of the note (the repro's command),
// or the finding's `unnoted`.
std::string note(const std::string& output, const std::string& dump_dir, const Finding& finding);
// A package this process loaded (the Python side tells, where
// torch._inductor.aoti_load_package loads it): the repro line of a finding
// names it where it is the only one.
void note_package_loaded(const std::string& path);

// Every stop: note, then the stop reported, kept for stop_message, and, in a
// torch.distributed job, the job stopped (job.h).
Stop stop_at(const Settings& settings, const Finding& finding);
// The message of this thread's last stop ("" where none): the error the
// caller raises says it (aoti_debug_printer_stop_message).
const std::string& stop_message();

}  // namespace aoti_debug_printer
