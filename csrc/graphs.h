// CUDA graphs (docs/cuda.md): a run captured into a graph runs none of this
// library's host code when the graph replays. So its records are taken at
// capture, as device work and a host call captured into the graph: each
// tensor's statistics kernel lands its results in slots of the capture's
// own ring (device.h), or, at level 1, a copy of the tensor lands in pinned
// memory; the run's end captures one host call that, at each replay,
// writes that replay's records, with its index, fires the NaN/Inf trap
// where a kernel made NaN/Inf in it, and compares the write guard's pairs
// of fingerprints (guard.h), which the capture's statistics passes hold.
#pragma once

#include "device.h"
#include "finding.h"
#include "format.h"
#include "record.h"
#include "settings.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace aoti_debug_printer::graphs {

// A check's finding at the replay whose fingerprints differed: its record
// (as JSON or text), note and message, made by the write guard.
using FindingAt = std::function<Finding(int64_t replay, bool json)>;

// One captured run: its records in the order they were taken, written at
// each replay. Host work only (the tests drive it on the CPU, with records
// whose statistics are already known).
class Capture {
 public:
  explicit Capture(const Settings& settings);
  ~Capture();
  // A tensor's record, with the landing its replays fill (nullptr: written
  // as `r` is, its statistics those it holds); a kernel's announcement
  // (level 3); a scalar. Tensors' return their item's index.
  size_t add(TensorRecord r, std::shared_ptr<device::Landing> landing);
  void add_launch(const Where& where);
  void add_scalar(const Where& where, const char* type, const std::string& value,
                  bool saved = false);
  // Level 1's record: saved to the dump at each replay, from the copy its
  // replays fill (none: only its manifest line, as `r` is).
  size_t add_saved(TensorRecord r, std::optional<device::CapturedCopy> copy);
  // The write guard's (guard.h): a fingerprint its replays fill, of a
  // tensor no record reads then (an argument its kernel only reads, after
  // launch), written nowhere; and a check: the fingerprints of items
  // `first` and `second` (each a landing's, or a level-1 copy's, which the
  // host call fingerprints; a record's statistics where it has neither)
  // must be equal at each replay, or `finding_at(replay, json)` is that
  // replay's (the guard makes it: graphs.cpp knows no guard). `second` is
  // the last item added.
  size_t add_fingerprint(std::shared_ptr<device::Landing> landing);
  void add_check(size_t first, size_t second, FindingAt finding_at);
  // One replay, which the graph's host call runs after the replay's
  // kernels (it makes no CUDA call): the replay's records, with its index
  // from 0. The call only takes their statistics from the landings; the
  // writer thread (output.h) formats and writes them, in one write, while
  // the GPU goes on (past kMostUnwritten replays not written yet, the call
  // writes them itself: nothing is dropped, and memory stays bounded). With
  // the trap on, the first value a kernel made NaN/Inf in (or a model input
  // that holds them), and with the guard on, the first check whose
  // fingerprints differ, ends the replay's records with the finding's,
  // written before the call returns, noted in the dump, and left for
  // take_stop; the later replays write nothing. Level 1's copies are taken
  // into host memory by the call, and saved by the writer thread.
  void write_replay() noexcept;
  // Replays taken but not yet written, over every capture, and the bytes
  // of their level-1 copies.
  static constexpr int64_t kMostUnwritten = 64;
  static constexpr int64_t kMostUnwrittenBytes = int64_t{1} << 30;

 private:
  struct Item;
  struct Check {
    size_t first, second;
    FindingAt finding_at;
  };
  class Replay;
  // What ends a replay's records where a finding does: its record, written
  // with them, and the stop's message; "" where nothing fired.
  struct Ended {
    std::string text, message;
  };
  Ended trap_at(const Item& item, const TensorStats& stats, int64_t replay,
                std::set<std::pair<int64_t, std::string>>& non_finite_before) const;
  Ended guard_at(const Check& check, int64_t replay) const;
  // The text of the replay's first `count` items, `taken` holding the
  // statistics of those with a landing, in order; `copies` the host copies
  // of the saved ones with a copy, which it saves to the dump.
  std::string replay_text(int64_t replay, std::vector<device::Snapshot>& taken,
                          const std::vector<at::Tensor>& copies, size_t count) const;
  std::string output_, dump_dir_;
  bool json_ = false;
  bool trap_ = false;
  bool trap_nan_only_ = false;
  std::vector<Item> items_;    // not changed once the capture ends
  std::vector<Check> checks_;  // by `second`, as added
  // Replays run one at a time on the graph's stream, and CUDA calls a
  // graph's host nodes in order; atomic all the same.
  std::atomic<int64_t> replays_{0};
  std::atomic<bool> stopped_{false};
};

// Whether this thread's run is being captured (begin saw the current stream
// capturing).
bool capturing();
// A run that will be ended begins: where the current stream is capturing,
// this thread's records go to the capture until end(). What cannot run
// inside a graph (the sync after kernels; the guard's naming of who
// overwrote a buffer) is said once per process, and left out. What the
// write guard held outside the graph is forgotten by the caller (shim.cpp:
// guard::forget), at the capture's end too: a fingerprint taken at capture
// is not one of a replay.
void begin(const Settings& settings);
// A tensor's record in the captured run (`action` Save or Print): its
// statistics kernel, reading `reads`'s landing (`batched`: as there), or at
// level 1 its copy, captured. With `with_fingerprint` (the write guard on),
// a pass of its own that adds the fingerprint. Returns the item whose
// landing or copy holds its fingerprint at each replay, where it has one.
std::optional<size_t> record(Action action, const Settings& settings, Where&& where,
                             const at::Tensor& t, bool unwritten_output, ReadsWhileUnchanged& reads,
                             bool batched, bool with_fingerprint);
// The captured run's other records (Capture's).
void add(TensorRecord r, std::shared_ptr<device::Landing> landing);
void add_launch(const Where& where);
void add_scalar(const Where& where, const char* type, const std::string& value, bool saved);
// The write guard's: a fingerprint of `t` of its own at each replay
// (nullopt where `t` has none there: not a CUDA tensor, no elements); a
// check of two items' fingerprints at each replay (Capture::add_check).
std::optional<size_t> add_fingerprint(const at::Tensor& t);
void add_check(size_t first, size_t second, FindingAt finding_at);
// The captured run ends: the host call that writes its records at each
// replay is captured. Its records, landings and rings are kept for the
// process's life, since the graph may be replayed until then.
void end();
// Returns once every replay whose host call has run is written (the
// writer thread's work; at most kMostUnwritten replays). A run that begins
// outside a graph calls it, so its records follow the replays' (a replay
// still on the GPU is written when its host call runs).
void wait_for_replays();
// What the trap or the guard found at a replay, which the graph could not stop: the
// message, taken once, for the next run outside the graph to stop with
// (shim.cpp); "" where none.
std::string take_stop();
// Whether take_stop has a message to give.
bool stop_pending();

}  // namespace aoti_debug_printer::graphs
