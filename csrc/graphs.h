// CUDA graphs (docs/cuda.md): a run captured into a graph runs none of this
// library's host code when the graph replays. So its records are taken at
// capture, as device work and a host call captured into the graph: each
// tensor's statistics kernel lands its results in slots of the capture's
// own ring (device.h), or, at level 1, a copy of the tensor lands in pinned
// memory; the run's end captures one host call that, at each replay,
// writes that replay's records, with its index, and fires the NaN/Inf trap
// where a kernel made NaN/Inf in it.
#pragma once

#include "device.h"
#include "record.h"
#include "settings.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace aoti_debug_printer::graphs {

// One captured run: its records in the order they were taken, written at
// each replay. Host work only (the tests drive it on the CPU, with records
// whose statistics are already known).
class Capture {
 public:
  explicit Capture(const Settings& settings);
  ~Capture();
  // A tensor's record, with the landing its replays fill (nullptr: written
  // as `r` is, its statistics those it holds); a kernel's announcement
  // (level 3); a scalar.
  void add(TensorRecord r, std::shared_ptr<device::Landing> landing);
  void add_launch(const Where& where);
  void add_scalar(const Where& where, const char* type, const std::string& value,
                  bool saved = false);
  // Level 1's record: saved to the dump at each replay, from the copy its
  // replays fill (none: only its manifest line, as `r` is).
  void add_saved(TensorRecord r, std::optional<device::CapturedCopy> copy);
  // One replay, which the graph's host call runs after the replay's
  // kernels (it makes no CUDA call): the replay's records, with its index
  // from 0. The call only takes their statistics from the landings; the
  // writer thread (output.h) formats and writes them, in one write, while
  // the GPU goes on (past kMostUnwritten replays not written yet, the call
  // writes them itself: nothing is dropped, and memory stays bounded). With
  // the trap on, the first value a kernel made NaN/Inf in (or a model input
  // that holds them) ends the replay's records with the trap's, written
  // before the call returns, noted in the dump, and left for take_stop; the
  // later replays write nothing. Level 1's copies are taken into host
  // memory by the call, and saved by the writer thread.
  void write_replay() noexcept;
  // Replays taken but not yet written, over every capture, and the bytes
  // of their level-1 copies.
  static constexpr int64_t kMostUnwritten = 64;
  static constexpr int64_t kMostUnwrittenBytes = int64_t{1} << 30;

 private:
  struct Item;
  class Replay;
  // The text of the replay's first `count` items, `taken` holding the
  // statistics of those with a landing, in order; `copies` the host copies
  // of the saved ones with a copy, which it saves to the dump.
  std::string replay_text(int64_t replay, std::vector<device::Snapshot>& taken,
                          const std::vector<at::Tensor>& copies, size_t count) const;
  std::string output_, dump_dir_;
  bool json_ = false;
  bool trap_ = false;
  bool trap_nan_only_ = false;
  std::vector<Item> items_;  // not changed once the capture ends
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
// inside a graph (the write guard, the sync after kernels) is said once
// per process, and left out.
void begin(const Settings& settings);
// The captured run's records (Capture's).
void add(TensorRecord r, std::shared_ptr<device::Landing> landing);
void add_launch(const Where& where);
void add_scalar(const Where& where, const char* type, const std::string& value, bool saved);
void add_saved(TensorRecord r, std::optional<device::CapturedCopy> copy);
// The captured run ends: the host call that writes its records at each
// replay is captured. Its records, landings and rings are kept for the
// process's life, since the graph may be replayed until then.
void end();
// Returns once every replay whose host call has run is written (the
// writer thread's work; at most kMostUnwritten replays). A run that begins
// outside a graph calls it, so its records follow the replays' (a replay
// still on the GPU is written when its host call runs).
void wait_for_replays();
// What the trap found at a replay, which the graph could not stop: the
// message, taken once, for the next run outside the graph to stop with
// (shim.cpp); "" where none.
std::string take_stop();
// Whether take_stop has a message to give.
bool stop_pending();

}  // namespace aoti_debug_printer::graphs
