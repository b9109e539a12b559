// graphs.h: a captured run's records, written at each replay by a host call
// the graph holds.
#include "graphs.h"

#include "output.h"
#include "save.h"

#include <atomic>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

namespace aoti_debug_printer::graphs {
namespace {

struct Item {
  enum class Kind { Tensor, Launch, Scalar };
  Kind kind = Kind::Tensor;
  TensorRecord record;  // a launch's or a scalar's: its where only
  std::shared_ptr<device::Landing> landing;
  std::string type, value;  // a scalar's
};

// One captured run: what its replays write, and where.
struct Capture {
  std::string output, dump_dir;
  bool json = false;
  bool trap = false;
  std::vector<Item> items;
  // Replays run one at a time on the graph's stream, and CUDA calls a
  // graph's host nodes in order: no lock. Atomic for a graph replayed on
  // two streams at once (CUDA serializes its host calls anyway).
  std::atomic<int64_t> replays{0};
  // The trap fired at one of its replays: the later ones write nothing, as
  // a run outside a graph would have stopped there.
  std::atomic<bool> stopped{false};
};

thread_local std::shared_ptr<Capture> current;

// Kept until the process ends: CUDA never says when a graph is destroyed.
std::mutex kept_mu;
std::vector<std::shared_ptr<Capture>> kept;

std::mutex stop_mu;
std::string pending_stop;

int64_t non_finite(const TensorStats& s) { return s.nan + s.pos_inf + s.neg_inf; }

// A trap's record, its line and the finding in the dump, at `replay`; the
// message the next run stops with.
std::string fire_trap(const Capture& c, const TensorRecord& r, std::string& text) {
  const Where& w = r.where;
  const bool input = w.phase == Phase::ModelInput;
  const std::string what =
      input ? "model input " + w.arg + " already holds NaN/Inf: no kernel made it"
            : "kernel " + w.kernel + " made NaN/Inf in " + w.arg;
  text += format_trap(w, r.stats, what, {}, c.json);
  emit(c.output, text);
  text.clear();
  const std::string repro =
      note_finding_in_dump(c.dump_dir, format_trap(w, r.stats, what, {}, true));
  const std::string where = " at replay " + std::to_string(w.replay) + " of a captured CUDA graph";
  const std::string message =
      input ? "NaN/Inf trap: model input " + w.arg + " holds NaN/Inf" + where
            : "NaN/Inf trap: kernel " + w.kernel + " (launch " + std::to_string(w.launch) +
                  ") made NaN/Inf in " + w.arg + where + repro +
                  ", run outside the graph; this graph's later replays write no records";
  report_stop(c.output, message);
  return message;
}

// The graph's host call: this replay's records, written in one piece.
void write_replay(void* data) noexcept {
  Capture& c = *static_cast<Capture*>(data);
  try {
    if (c.stopped.load(std::memory_order_acquire)) return;
    const int64_t replay = c.replays.fetch_add(1);
    std::string text;
    // (launch, argument) that held NaN/Inf before their kernel ran: the
    // kernel did not make them.
    std::set<std::pair<int64_t, std::string>> non_finite_before;
    for (const Item& item : c.items) {
      if (item.kind != Item::Kind::Tensor) {
        Where w = item.record.where;
        w.replay = replay;
        text += item.kind == Item::Kind::Launch
                    ? format_launch(w, c.json)
                    : format_scalar(w, item.type.c_str(), item.value, c.json);
        continue;
      }
      TensorRecord r = item.landing ? replayed(item.record, *item.landing, replay) : item.record;
      r.where.replay = replay;
      text += format_record(r, c.json);
      if (!c.trap || !item.landing || non_finite(r.stats) == 0) continue;
      const Phase phase = r.where.phase;
      if (phase == Phase::BeforeLaunch) {
        non_finite_before.emplace(r.where.launch, r.where.arg);
      } else if (phase == Phase::ModelInput ||
                 (phase == Phase::AfterLaunch &&
                  !non_finite_before.count({r.where.launch, r.where.arg}))) {
        c.stopped.store(true, std::memory_order_release);
        const std::string message = fire_trap(c, r, text);
        std::lock_guard<std::mutex> lock(stop_mu);
        if (pending_stop.empty()) pending_stop = message;
        return;
      }
    }
    emit(c.output, text);
  } catch (const std::exception& e) {
    report_error(std::string("a captured CUDA graph's records at its replay: ") + e.what());
  } catch (...) {
    report_error("a captured CUDA graph's records at its replay: unknown exception");
  }
}

}  // namespace

bool capturing() { return current != nullptr; }

void begin(const Settings& settings) {
  current.reset();
  if (!device::capturing()) return;
  auto c = std::make_shared<Capture>();
  c->output = settings.output;
  c->dump_dir = settings.dump_dir;
  c->json = settings.format == Format::Jsonl;
  c->trap = settings.trap;
  current = std::move(c);
  device::begin_capture();
  static std::once_flag told;
  std::call_once(told, [] {
    report_note(
        "a run is being captured into a CUDA graph: its records are written at each replay, "
        "with the replay's index; inside the graph level 1 prints instead of saving, and the "
        "write guard and the sync after kernels are off (each needs the host between two "
        "kernels)");
  });
}

void add(TensorRecord r, std::shared_ptr<device::Landing> landing) {
  current->items.push_back({Item::Kind::Tensor, std::move(r), std::move(landing), {}, {}});
}

void add_launch(const Where& where) {
  TensorRecord r;
  r.where = where;
  current->items.push_back({Item::Kind::Launch, std::move(r), nullptr, {}, {}});
}

void add_scalar(const Where& where, const char* type, const std::string& value) {
  TensorRecord r;
  r.where = where;
  current->items.push_back({Item::Kind::Scalar, std::move(r), nullptr, type, value});
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
  device::capture_host_call(&write_replay, c.get());
}

std::string take_stop() {
  std::lock_guard<std::mutex> lock(stop_mu);
  return std::exchange(pending_stop, {});
}

}  // namespace aoti_debug_printer::graphs
