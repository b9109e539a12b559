// graphs.h: a captured run's records, taken at each replay by a host call
// the graph holds, and written by the writer thread.
#include "graphs.h"

#include "finding.h"
#include "format.h"
#include "output.h"
#include "save.h"
#include "stats.h"
#include "trap.h"

#include <ATen/ops/empty_strided.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

namespace aoti_debug_printer::graphs {

struct Capture::Item {
  enum class Kind { Tensor, Launch, Scalar };
  Kind kind = Kind::Tensor;
  TensorRecord record;  // a launch's or a scalar's: its where only
  std::shared_ptr<device::Landing> landing;
  std::string type, value;  // a scalar's
  // Level 1's: to the dump, not the output; a tensor's from its copy.
  bool saved = false;
  std::optional<device::CapturedCopy> copy;
};

namespace {

thread_local std::shared_ptr<Capture> current;

// Kept until the process ends: CUDA never says when a graph is destroyed.
std::mutex kept_mu;
std::vector<std::shared_ptr<Capture>> kept;

std::mutex stop_mu;
std::string pending_stop;

// Replays taken by host calls and not yet written (Capture::Replay), and
// the bytes of their level-1 copies.
std::atomic<int64_t> unwritten{0};
std::atomic<int64_t> unwritten_bytes{0};

void write_replay_of(void* capture) noexcept { static_cast<Capture*>(capture)->write_replay(); }

// A level-1 record's tensor as this replay's copy holds it, in host memory
// of its own: the same sizes and strides, so the same bytes.
at::Tensor host_copy(const TensorRecord& r, const device::CapturedCopy& copy) {
  at::Tensor host = at::empty_strided(r.shape, r.stride, at::TensorOptions().dtype(r.dtype));
  TORCH_CHECK(static_cast<int64_t>(host.storage().nbytes()) == copy.bytes,
              "a captured copy's size is not its tensor's");
  if (copy.bytes > 0) std::memcpy(host.storage().mutable_data(), copy.host.get(), copy.bytes);
  return host;
}

}  // namespace

Capture::Capture(const Settings& settings)
    : output_(settings.output),
      dump_dir_(settings.dump_dir),
      json_(settings.format == Format::Jsonl),
      trap_(settings.trap),
      trap_nan_only_(settings.trap_nan_only) {}

Capture::~Capture() = default;

void Capture::add(TensorRecord r, std::shared_ptr<device::Landing> landing) {
  items_.push_back({Item::Kind::Tensor, std::move(r), std::move(landing), {}, {}, false, {}});
}

void Capture::add_saved(TensorRecord r, std::optional<device::CapturedCopy> copy) {
  items_.push_back({Item::Kind::Tensor, std::move(r), nullptr, {}, {}, true, std::move(copy)});
}

void Capture::add_launch(const Where& where) {
  TensorRecord r;
  r.where = where;
  items_.push_back({Item::Kind::Launch, std::move(r), nullptr, {}, {}, false, {}});
}

void Capture::add_scalar(const Where& where, const char* type, const std::string& value,
                         bool saved) {
  TensorRecord r;
  r.where = where;
  items_.push_back({Item::Kind::Scalar, std::move(r), nullptr, type, value, saved, {}});
}

// One replay's records as its host call took them, made into text and
// written by the writer thread.
class Capture::Replay final : public LateRecord {
 public:
  Replay(const Capture& capture, int64_t replay, std::vector<device::Snapshot> taken,
         std::vector<at::Tensor> copies, size_t count, std::string trap)
      : capture_(capture),
        replay_(replay),
        taken_(std::move(taken)),
        copies_(std::move(copies)),
        count_(count),
        trap_(std::move(trap)) {
    for (const at::Tensor& c : copies_) bytes_ += static_cast<int64_t>(c.nbytes());
    unwritten.fetch_add(1, std::memory_order_relaxed);
    unwritten_bytes.fetch_add(bytes_, std::memory_order_relaxed);
  }
  ~Replay() override {
    unwritten_bytes.fetch_sub(bytes_, std::memory_order_relaxed);
    unwritten.fetch_sub(1, std::memory_order_relaxed);
  }
  bool ready() const override { return true; }
  void wait() override {}
  std::string text() override {
    return capture_.replay_text(replay_, taken_, copies_, count_) + trap_;
  }

 private:
  const Capture& capture_;  // kept for the process's life (end())
  int64_t replay_;
  std::vector<device::Snapshot> taken_;
  std::vector<at::Tensor> copies_;
  int64_t bytes_ = 0;
  size_t count_;
  std::string trap_;
};

std::string Capture::replay_text(int64_t replay, std::vector<device::Snapshot>& taken,
                                 const std::vector<at::Tensor>& copies, size_t count) const {
  std::string text;
  size_t next = 0, next_copy = 0;
  for (size_t i = 0; i < count; ++i) {
    const Item& item = items_[i];
    if (item.kind != Item::Kind::Tensor) {
      Where w = item.record.where;
      w.replay = replay;
      if (item.kind == Item::Kind::Launch) {
        text += format_launch(w, json_);
      } else if (item.saved) {
        // No file holds a scalar: its manifest line carries the value.
        saving([&] {
          append_to_manifest(dump_dir_, format_scalar(w, item.type.c_str(), item.value, true));
        });
      } else {
        text += format_scalar(w, item.type.c_str(), item.value, json_);
      }
      continue;
    }
    if (item.saved) {
      TensorRecord r = item.record;
      r.where.replay = replay;
      if (!item.copy) {
        saving([&] { append_to_manifest(dump_dir_, format_json(r) + "\n"); });
        continue;
      }
      const at::Tensor& host = copies[next_copy++];
      r = replayed(item.record, {host_contents(host, 0).stats, {}}, replay);
      saving([&] { save_snapshot(dump_dir_, r, host); });
      continue;
    }
    TensorRecord r =
        item.landing ? replayed(item.record, std::move(taken[next++]), replay) : item.record;
    r.where.replay = replay;
    text += format_record(r, json_);
  }
  return text;
}

void Capture::write_replay() noexcept {
  try {
    if (stopped_.load(std::memory_order_acquire)) return;
    const int64_t replay = replays_.fetch_add(1);
    std::vector<device::Snapshot> taken;
    taken.reserve(items_.size());
    std::vector<at::Tensor> copies;
    size_t count = items_.size();
    std::string trap_text, message;
    // (launch, argument) that held NaN/Inf before their kernel ran: the
    // kernel did not make them.
    std::set<std::pair<int64_t, std::string>> non_finite_before;
    for (size_t i = 0; i < items_.size(); ++i) {
      const Item& item = items_[i];
      if (item.kind != Item::Kind::Tensor) continue;
      const TensorStats* stats = &item.record.stats;
      TensorStats copied;
      if (item.landing) {
        taken.push_back(device::take(*item.landing, ""));
        stats = &taken.back().stats;
      } else if (item.copy) {
        // The next replay overwrites the pinned copy: the writer saves this one.
        copies.push_back(host_copy(item.record, *item.copy));
        if (trap_) {
          copied = compute_stats(copies.back());
          stats = &copied;
        }
      }
      if (!trap_ || !item.record.defined || !stats->unsupported.empty() ||
          trap::fires_on(*stats, trap_nan_only_) == 0)
        continue;
      Where w = item.record.where;
      w.replay = replay;
      if (w.phase == Phase::BeforeLaunch) {
        non_finite_before.emplace(w.launch, w.arg);
        continue;
      }
      if (w.phase != Phase::ModelInput &&
          (w.phase != Phase::AfterLaunch || non_finite_before.count({w.launch, w.arg})))
        continue;
      // The trap fires: its record ends this replay's, and the graph's
      // later replays write nothing, as a run outside a graph stops here.
      stopped_.store(true, std::memory_order_release);
      count = i + 1;
      const bool input = w.phase == Phase::ModelInput;
      const std::string what = trap::what_fired(w);
      // Its record is written with the replay's, in their order.
      trap_text = format_trap(w, *stats, what, {}, json_);
      Finding f;
      f.code = AOTI_DEBUG_PRINTER_STOPPED_BY_TRAP;
      f.noted = format_trap(w, *stats, what, {}, true);
      f.kernel = !input;
      const std::string repro = note(output_, dump_dir_, f);
      const std::string at = " at replay " + std::to_string(replay) + " of a captured CUDA graph";
      message =
          trap::stop_message(w) + at + trap::where_only_infinities(*stats) +
          (input ? ""
                 : repro + ", run outside the graph; this graph's later replays write no records");
      break;
    }
    emit_later(output_, std::make_unique<Replay>(*this, replay, std::move(taken), std::move(copies),
                                                 count, trap_text));
    publish_records();
    if (message.empty()) {
      if (unwritten.load(std::memory_order_relaxed) > kMostUnwritten ||
          unwritten_bytes.load(std::memory_order_relaxed) > kMostUnwrittenBytes)
        flush_records();
      return;
    }
    // The stop follows the records, as outside a graph.
    flush_records();
    report_stop(output_, message);
    std::lock_guard<std::mutex> lock(stop_mu);
    if (pending_stop.empty()) pending_stop = message;
  } catch (const std::exception& e) {
    report_error(std::string("a captured CUDA graph's records at its replay: ") + e.what());
  } catch (...) {
    report_error("a captured CUDA graph's records at its replay: unknown exception");
  }
}

bool capturing() { return current != nullptr; }

void wait_for_replays() {
  // Polled: the writer polls its queues likewise, and a replay's text takes
  // microseconds.
  while (unwritten.load(std::memory_order_relaxed) > 0)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

void begin(const Settings& settings) {
  current.reset();
  if (!device::capturing()) {
    wait_for_replays();
    return;
  }
  current = std::make_shared<Capture>(settings);
  device::begin_capture();
  static std::once_flag told;
  std::call_once(told, [] {
    report_note(
        "a run is being captured into a CUDA graph: its records are written (at level 1 "
        "saved) at each replay, with the replay's index; inside the graph the write guard and "
        "the sync after kernels are off (each needs the host between two kernels)");
  });
}

void add(TensorRecord r, std::shared_ptr<device::Landing> landing) {
  current->add(std::move(r), std::move(landing));
}

void add_launch(const Where& where) { current->add_launch(where); }

void add_scalar(const Where& where, const char* type, const std::string& value, bool saved) {
  current->add_scalar(where, type, value, saved);
}

void add_saved(TensorRecord r, std::optional<device::CapturedCopy> copy) {
  current->add_saved(std::move(r), std::move(copy));
}

void end() {
  if (!current) return;
  std::shared_ptr<Capture> c = std::move(current);
  current.reset();
  device::end_capture();
  {
    std::lock_guard<std::mutex> lock(kept_mu);
    kept.push_back(c);
  }
  device::capture_host_call(&write_replay_of, c.get());
}

bool stop_pending() {
  std::lock_guard<std::mutex> lock(stop_mu);
  return !pending_stop.empty();
}

std::string take_stop() {
  std::lock_guard<std::mutex> lock(stop_mu);
  return std::exchange(pending_stop, {});
}

}  // namespace aoti_debug_printer::graphs
