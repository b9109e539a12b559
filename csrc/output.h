// Where records go: the output stream (stdout, stderr or a file), each
// thread's queue of records that wait for the GPU, and the one line for the
// user on stderr. Settings say which output; this unit owns writing to it.
#pragma once

#include <memory>
#include <string>

namespace aoti_debug_printer {

// `output`: "stdout", "stderr" or a file path (Settings::output).
// Writes one whole record (one or more lines) with a single write under a
// process-wide lock, then flushes: records of concurrent threads never
// interleave, and a record is out before a crash that follows it. While this
// thread has records waiting for the GPU (emit_later), the text waits behind
// them: a thread's records come out in the order they were taken.
void emit(const std::string& output, const std::string& text);
// As emit, but the text may be held with the rest of this thread's launch
// event, to be written with them in one write by release_held_records. The
// caller releases them before anything else can run (the event's
// records_end): a record is still out before the kernel that follows it.
void emit_held(const std::string& output, const std::string& text);
void release_held_records();

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
// Queues `record` on this thread, to be written to `output` in its turn:
// by the writer thread as records become ready, once published
// (publish_records), and at the latest by flush_records or when the thread
// exits.
void emit_later(const std::string& output, std::unique_ptr<LateRecord> record);
// Hands the records this thread queued since the last call to the writer
// thread, all at once (a launch event calls it, not every record).
void publish_records();
// Writes every text this thread has queued, waiting for the GPU as needed.
void flush_records();
// Whether this thread has records waiting.
bool records_waiting();

// The one place user-facing errors go (stderr, whatever the output is).
void report_error(const std::string& message);
// What stopped a run (the trap, the guard, a CUDA error, a wrong input),
// also on stderr where the records go elsewhere (`output`): the generated
// code's exception names no more than the kernel or the input.
void report_stop(const std::string& output, const std::string& message);
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
