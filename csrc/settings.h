// Run-time settings: the one table of options, and what each one means.
#pragma once

#include "aoti_debug_printer.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace aoti_debug_printer {

enum class Format { Text, Jsonl };

// The printer's levels, as AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER and
// the C header (AOTI_DEBUG_PRINTER_LEVEL_*) number them: generated code
// passes the level it was compiled at as itself. AsCompiled is the run-time
// switch's "as the model was compiled" (AOTI_DEBUG_PRINTER_LEVEL=-1).
enum class Level : int32_t {
  AsCompiled = -1,
  Off = 0,
  Save = AOTI_DEBUG_PRINTER_LEVEL_SAVE,
  Print = AOTI_DEBUG_PRINTER_LEVEL_PRINT,
  KernelNames = AOTI_DEBUG_PRINTER_LEVEL_KERNEL_NAMES,
};

// The level generated code passes, checked: Off for a number that is no
// compiled level.
Level compiled_level(int32_t level);
// The level a record or launch event runs at: the run-time switch
// (`runtime`, read once by the caller), unless it says "as compiled".
inline Level level_now(Level runtime, Level compiled) {
  return runtime == Level::AsCompiled ? compiled : runtime;
}
// What a record does: nothing, save a snapshot, print, or (level 3) note a
// tensor argument for the CUDA error check.
enum class Action { None, Save, Print, Watch };
// What a record of a model compiled at `compiled` does at `now`: level 3
// notes tensors before launch only, and a level-3 compile has no record to
// save or print at another level.
Action action_at(Level now, Level compiled, bool before_launch);

// What a model input that is not what the package was compiled for does
// (inputs.h): stop the run (default), be reported and run on, or go unchecked.
enum class InputCheck { Stop, Continue, Off };

// When to wait for the GPU after a kernel and check CUDA's error state.
enum class Sync {
  Auto,  // after every kernel of a model compiled at level 3
  On,    // after every kernel, at every level
  Off,
};

struct Settings {
  // AOTI_DEBUG_PRINTER_OUTPUT: "stdout" (default, as upstream), "stderr", or
  // a file path that records are appended to.
  std::string output = "stdout";
  // AOTI_DEBUG_PRINTER_FORMAT: "text" or "jsonl".
  Format format = Format::Text;
  // AOTI_DEBUG_PRINTER_DUMP_DIR: where level 1 saves; upstream's default.
  std::string dump_dir = "./tmp/aoti_torch/";
  // AOTI_DEBUG_PRINTER_SAVE_MEMORY, in MiB (fractions allowed), kept in
  // bytes: the bound of the host memory level 1 stages snapshots in (pinned
  // for CUDA tensors) while the saver's thread writes them (saver.h); the
  // model's thread waits only where it is full. 0: every snapshot is saved
  // on the model's thread, as it is taken.
  int64_t save_memory = int64_t{512} << 20;
  // AOTI_DEBUG_PRINTER_MAX_VALUES: tensors with at most this many elements
  // also print their values; 0 turns values off.
  int64_t max_values = 64;
  // AOTI_DEBUG_PRINTER_SYNC: "auto", "on"/"1", "off"/"0".
  Sync sync = Sync::Auto;
  // AOTI_DEBUG_PRINTER_REPLAY=1: while syncing, keep a host copy of each
  // kernel's tensor arguments until it has completed; a failing kernel's
  // are saved to dump_dir, so that it can be replayed on its own.
  bool replay = false;
  // AOTI_DEBUG_PRINTER_RANK, else RANK (torchrun's): this process's rank in
  // records and file names; -1 outside distributed runs.
  int64_t rank = -1;
  // AOTI_DEBUG_PRINTER_RANKS: the ranks that record, e.g. "0" or "0,2-3";
  // empty or "all" for every rank.
  std::string ranks;
  std::vector<std::pair<int64_t, int64_t>> rank_ranges;

  // Run-time switches of a model compiled with the printer on, no
  // recompiling: AOTI_DEBUG_PRINTER_LEVEL, -1 (as compiled), 0 (off), 1
  // (save), 2 (print), 3 (kernel names); AOTI_DEBUG_PRINTER_KERNELS, kernel
  // names or globs like the compile-time filter, narrowing it further.
  Level level = Level::AsCompiled;
  std::string kernels;
  std::vector<std::string> kernel_patterns;
  // AOTI_DEBUG_PRINTER_TRAP=1: stop at the first kernel whose outputs gain
  // NaN or Inf (levels 1 and 2), and at model inputs that hold them; =nan:
  // NaN only (an attention mask's -inf is made on purpose).
  bool trap = false;
  bool trap_nan_only = false;
  // AOTI_DEBUG_PRINTER_GUARD (levels 1 and 2): 1 stops at a kernel that
  // changes an argument it only reads, and at a buffer whose value changed
  // between the kernel that wrote it and the next that reads it; 2 also
  // checks every live buffer around each kernel, to name the one that did.
  int guard = 0;
  // AOTI_DEBUG_PRINTER_ROLES=0: ignore what the code generator knows of each
  // argument's role (read, write, read-write), and record every argument in
  // full before and after launch, as upstream does: for a role in doubt,
  // and to measure what roles save.
  bool roles = true;
  // AOTI_DEBUG_PRINTER_END_JOB=0: in a torch.distributed job, a rank that
  // stops (trap, guard, CUDA error) stops its own run only, and the others
  // wait in their next collective; by default it ends the job (job.h).
  bool end_job = true;
  // AOTI_DEBUG_PRINTER_INPUT_CHECK: "stop" (default), "continue" or "off":
  // each model input is checked against what the package was compiled for
  // (sizes, strides where fixed, dtype, device) before its first kernel.
  InputCheck input_check = InputCheck::Stop;

  // Whether this process records at all under `ranks`.
  bool rank_selected() const;
  // Whether the run-time kernel filter selects `kernel`.
  bool kernel_selected(const std::string& kernel) const;
};

// The kernel filter's grammar, defined here once for the compile-time filter
// (AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT, applied by the Python codegen
// through _C) and the run-time one (AOTI_DEBUG_PRINTER_KERNELS):
// comma-separated names or glob patterns, braces and blanks around each
// dropped ("{a, b*}"), matched case-insensitively; none selects every kernel.
std::vector<std::string> kernel_patterns(const std::string& spec);
bool kernel_filter_selects(const std::vector<std::string>& patterns, const std::string& kernel);

// The run-time level from settings_now(): the one check every emitted call
// makes first, so that a model switched off costs next to nothing.
Level runtime_level();

// A copy, so callers never hold the lock while they format or write.
Settings current_settings();
// This thread's copy, refreshed only when a setting changed: what the
// per-kernel paths read (no lock, no copy). Valid until this thread next
// calls set_option.
const Settings& settings_now();

// One run-time option. The table of them (settings.cpp) is the only place
// an option is defined.
struct OptionInfo {
  const char* key;
  const char* env;           // its environment variable
  const char* fallback_env;  // read first when set, "" for none (torchrun's RANK)
  const char* doc;
  void (*apply)(Settings&, const std::string&);  // throws std::invalid_argument
  std::string (*show)(const Settings&);
};
const std::vector<OptionInfo>& options();

// Throws std::invalid_argument on an unknown key or a bad value.
void set_option(const std::string& key, const std::string& value);
std::string get_option(const std::string& key);

}  // namespace aoti_debug_printer
