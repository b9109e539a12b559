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
  // Fingerprint: the guard's, taken at each replay and written nowhere.
  enum class Kind { Tensor, Launch, Scalar, Fingerprint };
  Kind kind = Kind::Tensor;
  TensorRecord record;  // a launch's or a scalar's: its where only
  std::shared_ptr<device::Landing> landing;
  std::string type, value;  // a scalar's
  // Level 1's: to the dump, not the output; a tensor's from its copy.
  bool saved = false;
  std::optional<device::CapturedCopy> copy;
  // A guard's check compares its fingerprint: a copy's is computed at each
  // replay, by the host call (no item has one otherwise, at no cost).
  bool fingerprinted = false;
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

size_t Capture::add(TensorRecord r, std::shared_ptr<device::Landing> landing) {
  items_.push_back({Item::Kind::Tensor, std::move(r), std::move(landing), {}, {}, false, {}});
  return items_.size() - 1;
}

size_t Capture::add_saved(TensorRecord r, std::optional<device::CapturedCopy> copy) {
  items_.push_back({Item::Kind::Tensor, std::move(r), nullptr, {}, {}, true, std::move(copy)});
  return items_.size() - 1;
}

size_t Capture::add_fingerprint(std::shared_ptr<device::Landing> landing) {
  items_.push_back({Item::Kind::Fingerprint, {}, std::move(landing), {}, {}, false, {}});
  return items_.size() - 1;
}

void Capture::add_check(size_t first, size_t second, FindingAt finding_at) {
  TORCH_CHECK(first < second && second + 1 == items_.size(),
              "a guard's check compares an earlier item with the last one");
  items_[first].fingerprinted = items_[second].fingerprinted = true;
  checks_.push_back({first, second, std::move(finding_at)});
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
         std::vector<at::Tensor> copies, size_t count, std::string found)
      : capture_(capture),
        replay_(replay),
        taken_(std::move(taken)),
        copies_(std::move(copies)),
        count_(count),
        found_(std::move(found)) {
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
    return capture_.replay_text(replay_, taken_, copies_, count_) + found_;
  }

 private:
  const Capture& capture_;  // kept for the process's life (end())
  int64_t replay_;
  std::vector<device::Snapshot> taken_;
  std::vector<at::Tensor> copies_;
  int64_t bytes_ = 0;
  size_t count_;
  std::string found_;  // the record of the finding that ends the replay's, if any
};

std::string Capture::replay_text(int64_t replay, std::vector<device::Snapshot>& taken,
                                 const std::vector<at::Tensor>& copies, size_t count) const {
  std::string text;
  size_t next = 0, next_copy = 0;
  for (size_t i = 0; i < count; ++i) {
    const Item& item = items_[i];
    if (item.kind == Item::Kind::Fingerprint) {
      if (item.landing) ++next;  // the guard's alone: no record
      continue;
    }
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

Capture::Ended Capture::trap_at(
    const Item& item, const TensorStats& stats, int64_t replay,
    std::set<std::pair<int64_t, std::string>>& non_finite_before) const {
  if (!item.record.defined || !stats.unsupported.empty() ||
      trap::fires_on(stats, trap_nan_only_) == 0)
    return {};
  Where w = item.record.where;
  w.replay = replay;
  if (w.phase == Phase::BeforeLaunch) {
    non_finite_before.emplace(w.launch, w.arg);
    return {};
  }
  if (w.phase != Phase::ModelInput &&
      (w.phase != Phase::AfterLaunch || non_finite_before.count({w.launch, w.arg})))
    return {};
  const bool input = w.phase == Phase::ModelInput;
  const std::string what = trap::what_fired(w);
  Finding f;
  f.code = AOTI_DEBUG_PRINTER_STOPPED_BY_TRAP;
  f.noted = format_trap(w, stats, what, {}, true);
  f.kernel = !input;
  const std::string repro = note(output_, dump_dir_, f);
  const std::string at = " at replay " + std::to_string(replay) + " of a captured CUDA graph";
  return {
      format_trap(w, stats, what, {}, json_),
      trap::stop_message(w) + at + trap::where_only_infinities(stats) +
          (input ? ""
                 : repro + ", run outside the graph; this graph's later replays write no records")};
}

Capture::Ended Capture::guard_at(const Check& check, int64_t replay) const {
  Finding f = check.finding_at(replay, json_);
  // Its record is written with the replay's, in their order, not by note.
  std::string text = std::exchange(f.record, {});
  const std::string repro = note(output_, dump_dir_, f);
  return {std::move(text), f.message + repro +
                               ", run outside the graph; this graph's later replays write no "
                               "records"};
}

void Capture::write_replay() noexcept {
  try {
    if (stopped_.load(std::memory_order_acquire)) return;
    const int64_t replay = replays_.fetch_add(1);
    std::vector<device::Snapshot> taken;
    taken.reserve(items_.size());
    std::vector<at::Tensor> copies;
    size_t count = items_.size();
    Ended ended;
    // (launch, argument) that held NaN/Inf before their kernel ran: the
    // kernel did not make them.
    std::set<std::pair<int64_t, std::string>> non_finite_before;
    // Each item's fingerprint at this replay, where a guard's check
    // compares it: none kept where the guard made no check.
    std::vector<std::optional<uint64_t>> prints(checks_.empty() ? 0 : items_.size());
    size_t next_check = 0;
    for (size_t i = 0; i < items_.size() && ended.message.empty(); ++i) {
      const Item& item = items_[i];
      if (item.kind == Item::Kind::Launch || item.kind == Item::Kind::Scalar) continue;
      const TensorStats* stats = &item.record.stats;
      TensorStats copied;
      if (item.landing) {
        taken.push_back(device::take(*item.landing, ""));
        stats = &taken.back().stats;
      } else if (item.copy) {
        // The next replay overwrites the pinned copy: the writer saves this one.
        copies.push_back(host_copy(item.record, *item.copy));
        if (trap_ || item.fingerprinted) {
          // It keeps the tensor's strides: the fingerprint is the tensor's.
          copied = compute_stats(copies.back(), item.fingerprinted);
          stats = &copied;
        }
      }
      if (item.fingerprinted) prints[i] = stats->fingerprint;
      // The trap fires, or a check's fingerprints differ: the finding's
      // record ends this replay's, and the graph's later replays write
      // nothing, as a run outside a graph stops there.
      if (trap_ && item.kind == Item::Kind::Tensor)
        ended = trap_at(item, *stats, replay, non_finite_before);
      for (;
           ended.message.empty() && next_check < checks_.size() && checks_[next_check].second <= i;
           ++next_check) {
        const Check& c = checks_[next_check];
        // A fingerprint that did not land, or that a dtype has none of,
        // vouches for nothing.
        if (prints[c.first] && prints[c.second] && *prints[c.first] != *prints[c.second])
          ended = guard_at(c, replay);
      }
      if (!ended.message.empty()) {
        stopped_.store(true, std::memory_order_release);
        count = i + 1;
      }
    }
    emit_later(output_, std::make_unique<Replay>(*this, replay, std::move(taken), std::move(copies),
                                                 count, std::move(ended.text)));
    publish_records();
    if (ended.message.empty()) {
      if (unwritten.load(std::memory_order_relaxed) > kMostUnwritten ||
          unwritten_bytes.load(std::memory_order_relaxed) > kMostUnwrittenBytes)
        flush_records();
      return;
    }
    // The stop follows the records, as outside a graph.
    flush_records();
    report_stop(output_, ended.message);
    std::lock_guard<std::mutex> lock(stop_mu);
    if (pending_stop.empty()) pending_stop = ended.message;
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
        "saved) at each replay, with the replay's index; inside the graph the sync after "
        "kernels is off (it needs the host between two kernels), and the write guard "
        "compares its fingerprints at each replay, AOTI_DEBUG_PRINTER_GUARD=2 acting as 1 "
        "(naming who overwrote a buffer needs every buffer read at every kernel)");
  });
}

std::optional<size_t> record(Action action, const Settings& settings, Where&& where,
                             const at::Tensor& t, bool unwritten_output, ReadsWhileUnchanged& reads,
                             bool batched, bool with_fingerprint) {
  Contents none;
  if (action == Action::Save) {
    if (unwritten_output) {
      none.stats.unsupported = "output, not yet written: no statistics";
      current->add_saved(describe(std::move(where), t, none), std::nullopt);
    } else if (device::computes_stats_on(t)) {
      // An empty tensor is saved too, from no copy; its fingerprint vouches for nothing.
      const bool copied = t.numel() > 0;
      const size_t item =
          current->add_saved(describe(std::move(where), t, Contents{}),
                             copied ? device::capture_copy(t) : device::CapturedCopy{});
      if (copied) return item;
    } else {
      none.stats.unsupported = "not saved: inside a captured CUDA graph only a CUDA tensor is";
      current->add_saved(describe(std::move(where), t, none), std::nullopt);
    }
    return std::nullopt;
  }
  if (unwritten_output) {
    none.stats.unsupported = "output, not yet written: no statistics";
  } else if (can_record_later(t, settings.max_values)) {
    if (std::shared_ptr<device::Landing> landing =
            reads.landing(t, settings.max_values, batched, with_fingerprint)) {
      const size_t item =
          current->add(describe(std::move(where), t, Contents{}), std::move(landing));
      if (with_fingerprint) return item;
      return std::nullopt;
    }
  }
  if (!unwritten_output) {
    none.stats.unsupported =
        "statistics not computed: inside a captured CUDA graph only a CUDA tensor's are";
  }
  current->add(describe(std::move(where), t, none), nullptr);
  return std::nullopt;
}

void add(TensorRecord r, std::shared_ptr<device::Landing> landing) {
  current->add(std::move(r), std::move(landing));
}

std::optional<size_t> add_fingerprint(const at::Tensor& t) {
  if (!device::can_snapshot_later(t, false)) return std::nullopt;
  // Inside a capture a full ring is followed by another: never nullptr.
  std::shared_ptr<device::Landing> landing = device::snapshot_later(t, false, false, true);
  if (!landing) return std::nullopt;
  return current->add_fingerprint(std::move(landing));
}

void add_check(size_t first, size_t second, FindingAt finding_at) {
  current->add_check(first, second, std::move(finding_at));
}

void add_launch(const Where& where) { current->add_launch(where); }

void add_scalar(const Where& where, const char* type, const std::string& value, bool saved) {
  current->add_scalar(where, type, value, saved);
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
