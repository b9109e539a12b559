// Run-time settings and the output stream every record goes to.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace aoti_debug_printer {

enum class Format { Text, Jsonl };

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
  int level = -1;
  std::string kernels;
  std::vector<std::string> kernel_patterns;
  // AOTI_DEBUG_PRINTER_TRAP=1: stop at the first kernel whose outputs gain
  // NaN or Inf (levels 1 and 2), and at model inputs that hold them.
  bool trap = false;
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
int runtime_level();

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

// Writes one whole record (one or more lines) with a single write under a
// process-wide lock, then flushes: records of concurrent threads never
// interleave, and a record is out before a crash that follows it. While this
// thread has records waiting for the GPU (emit_later), the text waits behind
// them: a thread's records come out in the order they were taken.
void emit(const Settings& settings, const std::string& text);

// A record whose text exists only once the GPU has computed its contents.
class LateRecord {
 public:
  virtual ~LateRecord() = default;
  // Whether the text can be made now, without waiting.
  virtual bool ready() const = 0;
  // Waits until it can (or the GPU failed, which the text then says).
  virtual void wait() = 0;
  virtual std::string text() = 0;
};
// Queues `record` on this thread, to be written to `settings`' output in
// its turn. Texts are written as they become ready, at flush_records, and at
// the latest when the thread exits.
void emit_later(const Settings& settings, std::unique_ptr<LateRecord> record);
// Writes this thread's queued texts whose turn has come and that are ready;
// with `wait`, every one, waiting as needed.
void flush_records(bool wait);
// Whether this thread has records waiting.
bool records_waiting();

// The one place user-facing errors go (stderr, whatever the output is).
void report_error(const std::string& message);
// A note for the user on stderr: something was done that they should know of.
void report_note(const std::string& message);

// 16 hex digits drawn once per process: a process's records and temporary
// files stay apart from another's that has the same PID (containers).
const std::string& process_token();

// Names are data, never markup: a kernel or argument name may hold any
// bytes. Json: the body of a JSON string, valid UTF-8 with every control
// character and every line separator (U+0085, U+2028, U+2029) escaped.
// Text: one line of the text format, no control character (ESC included)
// left raw. Either way, bytes that are not UTF-8 become "\xNN".
enum class Escape { Json, Text };
std::string escaped(const std::string& s, Escape how);

}  // namespace aoti_debug_printer
