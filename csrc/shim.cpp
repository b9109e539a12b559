// shim.h: each thread's runs, launch events and records, behind the
// exported C functions (c_abi.cpp) and the Python bindings (python.cpp).
#include "aoti_debug_printer.h"

#include "constants.h"
#include "device.h"
#include "format.h"
#include "graphs.h"
#include "guard.h"
#include "inputs.h"
#include "job.h"
#include "kept.h"
#include "late.h"
#include "output.h"
#include "save.h"
#include "saver.h"
#include "settings.h"
#include "shim.h"
#include "sources.h"
#include "trap.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace aoti_debug_printer {
namespace {

// Per thread, so that several threads running one model each get their own
// run, launch and call indices.
struct ThreadState {
  int64_t run = -1;
  int64_t launch = -1;
  int64_t call = -1;
  std::unordered_map<std::string, int64_t> calls;
  // Between a kernel's before and after events, while checking for CUDA
  // errors after it: its tensor arguments.
  bool syncing = false;
  bool watching = false;  // syncing, or trapping NaN/Inf
  bool selected = true;   // by the compile-time and the run-time filter
  bool guarding = false;  // the write guard watches this kernel's records
  std::vector<WatchedArg> watched;
  // The run will be ended (end_run): records may wait for the GPU until then.
  bool run_has_end = false;
  // records_end follows the last launch event's records: their statistics
  // may wait for it in the device's batch (AOTI_DEBUG_PRINTER_RECORDS_END).
  bool records_end_follows = false;
  // The digest of the Inductor config the run's program was compiled with.
  std::string inductor_config;
  // What the run's records read, while no kernel wrote it since: kept into
  // the next event where the wrapper ran nothing between
  // (AOTI_DEBUG_PRINTER_RECORDS_CONTINUE), and across a kernel whose records
  // name everything it writes (record_and_check forgets those); none
  // outside a run.
  ReadsWhileUnchanged reads;
  // The kernel between its launch events may write memory no record names,
  // or has no records: after it, no read holds.
  bool reads_end_after_launch = false;
  // The run's size symbols, as its model inputs bound them (check_input).
  std::unordered_map<std::string, inputs::Binding> symbols;
  // The run's statistics workspaces that records wait for (mostly one), to
  // be copied back at the run's end.
  std::vector<std::shared_ptr<device::StoredRun>> stored_runs;
};
thread_local ThreadState state;
std::atomic<int64_t> next_run{0};

}  // namespace

void begin_run(bool with_end) {
  // A run that was never ended leaves no record behind in the next.
  if (records_waiting()) flush_records();
  // Every run, at every level: the model must not fail where this thread
  // has no CUDA context (device.h), and the user should know why a package
  // that runs here fails without this library.
  if (const int device = device::bind_context(); device >= 0) {
    static std::once_flag told;
    std::call_once(told, [device] {
      report_note(
          "a thread began a model's run with no current CUDA context: a CUDA package's "
          "kernel launches need one, and without this library such a run fails with "
          "'CUDA driver error: invalid device context'; made device " +
          std::to_string(device) +
          "'s primary context current (in a thread of your own, call "
          "torch.cuda.set_device(" +
          std::to_string(device) + ") before its first run)");
    });
  }
  state.run_has_end = with_end;
  state.records_end_follows = false;
  state.run = next_run.fetch_add(1);
  state.launch = -1;
  state.call = -1;
  state.calls.clear();
  state.inductor_config.clear();
  sources::forget();
  // The model inputs' records read them; the first kernel's may take those.
  state.reads.begin();
  state.symbols.clear();
  state.watched.clear();
  state.stored_runs.clear();
  guard::begin_run();
  // Only the AOTI wrapper's runs end, and only a run's end can capture the
  // host call that writes a captured run's records at each replay.
  if (with_end && runtime_level() != Level::Off) graphs::begin(settings_now());
}

void compiled_with(const std::string& inductor_config) { state.inductor_config = inductor_config; }

namespace {
// Where this thread's records go to a capture: it ends, and nothing waits
// to be written (the replays write the records).
bool end_capture() {
  if (!graphs::capturing()) return false;
  release_held_records();
  graphs::end();
  // What the guard held are the capture's items: no value of the run after it.
  guard::forget();
  return true;
}
}  // namespace

namespace {
// The run's kernels are all queued: the statistics they kept come back.
void copy_back_stored() {
  std::vector<std::shared_ptr<device::StoredRun>> runs;
  runs.swap(state.stored_runs);
  for (const auto& run : runs) device::copy_back(*run);
}

// The StoredRun of `workspace` in this run, made at its first record.
std::shared_ptr<device::StoredRun> stored_run_of(const at::Tensor& workspace) {
  for (const auto& run : state.stored_runs)
    if (device::stored_run_serves(*run, workspace)) return run;
  state.stored_runs.push_back(device::stored_run(workspace));
  return state.stored_runs.back();
}
}  // namespace

void statistics_workspace(const at::Tensor* workspace) {
  if (workspace == nullptr || !device::is_statistics_workspace(*workspace)) return;
  if (kept::records_take_them()) device::switch_on_stored(*workspace);
}

void end_run() {
  copy_back_stored();
  state.run_has_end = false;
  state.records_end_follows = false;
  state.reads.end();
  // The last kernel's arguments the trap kept must not hold the model's
  // memory until the next run.
  state.watched.clear();
  if (!end_capture()) flush_records();
}

bool begin_capturable() {
  if (runtime_level() == Level::Off || graphs::capturing() || !device::capturing()) return false;
  graphs::begin(settings_now());
  // Its fingerprints are values of the run before the graph, not of a replay.
  guard::forget();
  return true;
}

void end_capturable() { end_capture(); }

Stop stop_for_an_earlier_replay() {
  // The CUDA query last: runs mostly have no stop pending.
  if (runtime_level() == Level::Off || graphs::capturing() || !graphs::stop_pending()) return {};
  const Settings& settings = settings_now();
  if (!settings.rank_selected() || device::capturing()) return {};
  std::string stopped = graphs::take_stop();
  if (stopped.empty()) return {};
  // The replay wrote its record and noted it in the dump already.
  Finding f;
  f.code = AOTI_DEBUG_PRINTER_STOPPED_BY_EARLIER_REPLAY;
  f.message = "stopped for an earlier replay of a captured CUDA graph: " + stopped;
  return stop_at(settings, f);
}

namespace {
// What the launch event's records left waiting goes out: host records'
// texts, held to be written together, and the device's batch.
void records_out() {
  release_held_records();
  device::launch_batch();
}
}  // namespace

void records_end() {
  state.records_end_follows = false;
  records_out();
  publish_records();
}

namespace {

// What a record of a model compiled at `compiled` does at the run-time
// level `runtime`.
Action effective_action(Level compiled, Phase phase, Level runtime) {
  return action_at(level_now(runtime, compiled), compiled, phase == Phase::BeforeLaunch);
}

Stop launch_and_check(Level compiled, Phase phase, const std::string& kernel, int32_t flags) {
  // Whatever waits (held texts, the batch) goes before this kernel may change it,
  // unless the last event's records continue into this one's. Only the
  // records of an event that said RECORDS_END, and has not been ended, wait
  // there: otherwise the batch is empty, and its lock is not taken.
  if (state.records_end_follows && !(flags & AOTI_DEBUG_PRINTER_RECORDS_CONTINUE)) records_out();
  // This thread's records so far go to the writer thread: one lock for them all.
  publish_records();
  state.records_end_follows = (flags & AOTI_DEBUG_PRINTER_RECORDS_END) != 0;
  const Level runtime = runtime_level();
  const Level level = level_now(runtime, compiled);
  const Settings& settings = settings_now();
  // A tensor a record read holds what it held until a kernel writes it: the
  // kernel's records after launch say which (record_and_check), so a
  // kernel's input, the last kernel's output, a residual or a model input
  // is read once. Where the wrapper may have run anything between two
  // events, or the kernel may write what no record names, or has no
  // records, or roles are not trusted (roles=0), nothing read holds.
  if (phase == Phase::BeforeLaunch) {
    if (!(flags & AOTI_DEBUG_PRINTER_RECORDS_CONTINUE)) state.reads.begin();
    if (!(flags & AOTI_DEBUG_PRINTER_CONSTANTS_HOLD)) constants::forget_all();
    state.reads_end_after_launch =
        (flags & (AOTI_DEBUG_PRINTER_WRITES_UNSEEN | AOTI_DEBUG_PRINTER_UNSELECTED)) != 0 ||
        level == Level::Off || !settings.roles || !settings.rank_selected();
  } else if (state.reads_end_after_launch || level == Level::Off) {
    state.reads.begin();
    constants::forget_all();
  }
  if (phase == Phase::BeforeLaunch) {
    ++state.launch;
    // Call indices hash the name: not while switched off.
    if (level != Level::Off) state.call = state.calls[kernel]++;
    state.watched.clear();
  }
  if (level == Level::Off || !settings.rank_selected()) {
    state.syncing = state.watching = state.selected = state.guarding = false;
    return {};
  }
  const bool captured = graphs::capturing();
  // A replay of a captured graph whose kernel made NaN/Inf, or wrote what
  // the guard says it had no right to, could not stop:
  // the first run of this thread outside a graph does.
  if (phase == Phase::BeforeLaunch && state.launch == 0 && !captured) {
    if (Stop stop = stop_for_an_earlier_replay(); stop.code != 0) return stop;
  }
  const bool json = settings.format == Format::Jsonl;
  const bool names_level = level == Level::KernelNames;
  if (phase == Phase::BeforeLaunch) {
    // Selected at compile time (by the compile-time filter) and now.
    state.selected = !(flags & AOTI_DEBUG_PRINTER_UNSELECTED) && settings.kernel_selected(kernel);
    if (!state.selected) state.reads_end_after_launch = true;
    // Inside a captured graph nothing waits for the GPU, and the trap is
    // judged at each replay (graphs.h).
    state.syncing =
        !captured && (settings.sync == Sync::On || (settings.sync == Sync::Auto && names_level));
    state.watching = state.syncing || (settings.trap && !captured);
    // Where this run can stop, a job's other ranks can: watch for theirs.
    if (state.launch == 0 && (state.watching || settings.guard > 0)) job::watch(settings);
    // The guard needs both records of every argument: levels 1 and 2
    // (inside a captured graph, the replays' fingerprints: graphs.h).
    state.guarding = settings.guard > 0 && !names_level;
    if (state.guarding) {
      guard::before_launch(settings, where_now(phase, kernel, ""),
                           state.selected && !(flags & AOTI_DEBUG_PRINTER_WRITES_UNSEEN));
    }
    // Before the first kernel of a run, an error already pending is not
    // this model's: say so rather than blame its first kernel.
    if (state.syncing && state.launch == 0) {
      const std::string error = device::check_current_stream();
      if (!error.empty()) {
        Where w = where_now(phase, kernel, "");
        w.launch = w.call = -1;
        Finding f;
        f.code = AOTI_DEBUG_PRINTER_STOPPED_BY_CUDA_ERROR;
        f.record = format_cuda_error(w, error, {}, json);
        f.message =
            "a CUDA error was pending before the first kernel, not this model's (" + error + ")";
        return stop_at(settings, f);
      }
    }
  }
  if (phase == Phase::AfterLaunch && state.syncing) {
    const std::string error = device::check_current_stream();
    if (!error.empty()) {
      const Where w = where_now(phase, kernel, "");
      if (settings.replay) save_watched(settings.dump_dir, w, state.watched);
      Finding f;
      f.code = AOTI_DEBUG_PRINTER_STOPPED_BY_CUDA_ERROR;
      f.record = format_cuda_error(w, error, state.watched, json);
      if (settings.replay) f.noted = format_cuda_error(w, error, state.watched, true);
      f.kernel = true;
      f.message = "CUDA error after kernel " + kernel + " (launch " + std::to_string(w.launch) +
                  "): " + error;
      f.unnoted = "; AOTI_DEBUG_PRINTER_REPLAY=1 saves its arguments for a one-kernel repro";
      state.watched.clear();
      return stop_at(settings, f);
    }
  }
  if (phase == Phase::AfterLaunch && state.guarding) {
    guard::after_launch(settings, where_now(phase, kernel, ""));
  }
  // A level-3 compile announces the kernels its filter selected; a model
  // switched to level 3 at run time, every kernel the run-time filter selects.
  const bool announce = runtime == Level::AsCompiled ? (flags & AOTI_DEBUG_PRINTER_ANNOUNCE) != 0
                                                     : level == Level::KernelNames;
  if (announce && state.selected) {
    if (captured) {
      graphs::add_launch(where_now(phase, kernel, ""));
    } else {
      emit(settings.output, format_launch(where_now(phase, kernel, ""), json));
    }
  }
  return {};
}

}  // namespace

Stop launch(Level compiled, Phase phase, const std::string& kernel, int32_t flags) {
  return launch_and_check(compiled, phase, kernel, flags);
}

Where where_now(Phase phase, std::string kernel, std::string arg) {
  Where w;
  w.phase = phase;
  w.kernel = std::move(kernel);
  w.arg = std::move(arg);
  w.run = state.run;
  w.rank = settings_now().rank;
  w.inductor_config = state.inductor_config;
  if (phase != Phase::ModelInput) {
    w.launch = state.launch;
    w.call = state.call;
  }
  return w;
}

namespace {

// A printed record that waits for nothing (record_later), when nothing needs
// its statistics now; `where` is moved from only when one is returned.
// Empty when it must be taken synchronously.
std::unique_ptr<LateRecord> printed_later(const Settings& settings, Where&& where,
                                          const at::Tensor& t,
                                          const std::shared_ptr<constants::Entry>& constant) {
  if (!can_record_later(t, settings.max_values)) return nullptr;
  const bool json = settings.format == Format::Jsonl;
  const bool batched = state.records_end_follows;
  std::unique_ptr<LateRecord> late =
      record_later(std::move(where), t, settings.max_values, json, batched, state.reads, constant);
  if (!late) {
    // The ring is full, or the stream changed: write out what waits, and let
    // go of the run's reads (their slots), then ask again.
    state.reads.forget();
    copy_back_stored();
    flush_records();
    late = record_later(std::move(where), t, settings.max_values, json, batched, state.reads,
                        constant);
  }
  return late;
}

// A record's text, written now, or, where it may wait (`later`) and the
// launch event's records end in records_end (before its kernel runs),
// written with the event's other records there: one write, not one each.
void written(const std::string& output, const std::string& text, bool later) {
  if (later && state.records_end_follows) {
    emit_held(output, text);
  } else {
    emit(output, text);
  }
}

// A printed record whose contents need no read (an output not yet written,
// a constant an earlier record read): with `later`, where a record of this
// tensor would wait for its statistics, it waits for its text, made on the
// writer thread in its turn among the thread's records, off the model's
// thread.
TensorStats write_known_record(const Settings& settings, Where& where, const at::Tensor& t,
                               const Contents& known, bool later) {
  const bool json = settings.format == Format::Jsonl;
  if (later && can_record_later(t, settings.max_values)) {
    emit_later(settings.output, formatted_later(describe(std::move(where), t, known), json));
    return {};
  }
  const TensorRecord r = describe(where, t, known);
  written(settings.output, format_record(r, json), later);
  return r.stats;
}

// The record itself: statistics printed, or a snapshot saved. Returns the
// statistics, for the trap, with the guard's fingerprint when asked for.
// With `later`, a printed record may be written once its statistics land
// (or, with none to wait for, by the writer thread), and returns none;
// `where` is then moved from.
TensorStats write_record(Action action, const Settings& settings, Where& where, const at::Tensor& t,
                         bool unwritten_output, bool with_fingerprint, bool later,
                         const std::shared_ptr<constants::Entry>& constant = nullptr) {
  const bool json = settings.format == Format::Jsonl;
  if (unwritten_output) {
    // An output before its kernel writes it holds leftover memory: statistics
    // of it would look like the bug being chased, and cost a pass and a file.
    Contents unwritten;
    unwritten.stats.unsupported = "output, not yet written: no statistics";
    if (action == Action::Save) {
      saver::append_to_manifest(settings.dump_dir,
                                format_json(describe(where, t, unwritten)) + "\n");
    } else {
      write_known_record(settings, where, t, unwritten, later);
    }
    return {};
  }
  TensorRecord r;
  if (action == Action::Save) {
    // The saver's thread takes the statistics from its copy and writes the
    // file; neither the trap nor the guard waits for them (later).
    if (later) {
      saver::save(settings.dump_dir, describe(std::move(where), t, {}), t);
      return {};
    }
    // The trap or the guard needs the statistics now: saved on this thread.
    return saver::save_now(settings.dump_dir, describe(where, t, {}), t, with_fingerprint);
  } else {
    if (later) {
      if (std::unique_ptr<LateRecord> late =
              printed_later(settings, std::move(where), t, constant)) {
        emit_later(settings.output, std::move(late));
        return {};
      }
    }
    // The guard's fingerprint comes from a pass of its own.
    const Contents contents = with_fingerprint ? read_contents(t, settings.max_values, true)
                                               : state.reads.contents(t, settings.max_values);
    if (constant) constants::remember(constant, contents);
    r = describe(where, t, contents);
    written(settings.output, format_record(r, json), later);
  }
  return r.stats;
}

// A printed record whose statistics a generated kernel kept (from_slot):
// written once the run's slots come back, or with `later` unset (the trap
// needs them now), read from the slot now. Returns the statistics read now.
TensorStats write_stored_record(const Settings& settings, Where& where, const at::Tensor& t,
                                const Stored& stored, bool later) {
  const bool json = settings.format == Format::Jsonl;
  // A C++ kernel's slot is in host memory, and its kernel has run.
  if (later && stored.workspace->is_cuda()) {
    emit_later(settings.output,
               record_stored_later(std::move(where), t, stored_run_of(*stored.workspace),
                                   stored.field, json));
    return {};
  }
  const TensorRecord r = describe(where, t, stored_contents(t, *stored.workspace, stored.field));
  emit(settings.output, format_record(r, json));
  return r.stats;
}

// What a check found, if anything, stops the run.
Stop stop_if_found(const Settings& settings, const std::optional<Finding>& found) {
  return found ? stop_at(settings, *found) : Stop{};
}

// The guard's hook for a record of `t`, whose fingerprint is `print`.
Stop guarded(const Settings& settings, const Where& where, const at::Tensor& t,
             const guard::Print& print) {
  return stop_if_found(settings, where.phase == Phase::AfterLaunch
                                     ? guard::after_use(settings, where, t, print)
                                     : guard::before_use(settings, where, t, print));
}

Stop record_and_check(Level compiled, Phase phase, Role given_role, const at::Tensor* t,
                      c10::function_ref<Where()> where_of, const std::optional<Stored>& stored) {
  const Level runtime = runtime_level();
  if (runtime == Level::Off) return {};
  // The kernel wrote what it was given to write: what was read of it goes.
  if (phase == Phase::AfterLaunch && given_role != Role::Read && t != nullptr && t->defined()) {
    state.reads.written(*t);
    constants::written(*t);
  }
  // Kernel records follow the run-time filter; model inputs belong to none.
  if (phase == Phase::BeforeLaunch || phase == Phase::AfterLaunch) {
    if (!state.selected) return {};
  }
  const Action action = effective_action(compiled, phase, runtime);
  if (action == Action::None) return {};
  const Settings& settings = settings_now();
  if (!settings.rank_selected()) return {};
  // roles=0: every argument is one whose role is not known.
  const Role role = settings.roles ? given_role : Role::Unknown;
  const bool defined = t != nullptr && t->defined();
  const bool read_only = role == Role::Read;
  const bool unwritten_output = phase == Phase::BeforeLaunch && role == Role::Write;
  const bool captured = graphs::capturing();
  const bool guarding =
      defined && settings.guard > 0 && (phase == Phase::ModelInput || state.guarding);
  // Calls that take nothing copy no name: an argument the kernel only reads
  // was recorded before launch, and is unchanged unless the guard says
  // otherwise (most of a model's calls, after a launch); level 3 keeps only
  // the arguments it watches.
  const bool read_after_launch = phase == Phase::AfterLaunch && read_only;
  const bool watched = state.watching && defined && phase == Phase::BeforeLaunch;
  if (action == Action::Watch && !watched) return {};
  if (read_after_launch && !guarding) return {};
  Where where = where_of();
  where.role = role;
  if (watched) {
    // A replay saves every argument before launch (after a CUDA error there
    // is no device to copy from); the trap needs no copy of leftover memory,
    // and of an argument the kernel only reads, none before it fires.
    const Before before = settings.replay                      ? Before::HostCopy
                          : !settings.trap || unwritten_output ? Before::Nothing
                          : read_only                          ? Before::Kept
                                                               : Before::HostCopy;
    state.watched.push_back(watch(where.arg, *t, before));
    state.watched.back().unwritten_output = unwritten_output;
    if (settings.trap && !settings.replay) copy_kept_shared_with_writes(state.watched);
  }
  if (action == Action::Watch) return {};
  if (read_after_launch) return guarded(settings, where, *t, {});
  if (!defined) {
    TensorRecord r = describe_problem(where, t ? "undefined tensor" : "null tensor handle");
    if (captured) {
      graphs::add(std::move(r), nullptr);
    } else {
      emit(settings.output, format_record(r, settings.format == Format::Jsonl));
    }
    return {};
  }
  if (captured) {
    // Its statistics kernel (or level 1's copy) is captured, and the guard,
    // which compares nothing at capture, makes its checks of the replays.
    const std::optional<size_t> item =
        graphs::record(action, settings, guarding ? Where(where) : std::move(where), *t,
                       unwritten_output, state.reads, state.records_end_follows, guarding);
    return guarding ? guarded(settings, where, *t, guard::Print::of_item(item)) : Stop{};
  }
  // Only a run that will end may leave records waiting, and only when neither
  // the trap, the guard nor the sync after kernels needs them now.
  const bool later = state.run_has_end && !guarding && !settings.trap && settings.sync != Sync::On;
  // What a generated kernel kept of what it stored needs no pass of its own;
  // the guard's fingerprint does (it takes it from the record's own pass:
  // no second read).
  const bool from_slot =
      stored && action == Action::Print && !guarding && !unwritten_output &&
      can_record_stored(*t, *stored->workspace, *kept::cpu_workspace(), settings.max_values);
  // A constant's record takes what its first record read, while it is
  // unchanged; the first reads it, and what it reads is remembered.
  const bool constant = !from_slot && action == Action::Print && phase == Phase::BeforeLaunch &&
                        role == Role::Read && !guarding && constants::is_constant(where);
  std::optional<Contents> known = constant ? constants::find(*t) : std::nullopt;
  const TensorStats stats =
      from_slot ? write_stored_record(settings, where, *t, *stored, later)
      : known   ? write_known_record(settings, where, *t, *known, later)
                : write_record(action, settings, where, *t, unwritten_output, guarding, later,
                             constant ? constants::to_remember(*t) : nullptr);
  // A record left to wait (later) has taken `where`; neither the trap nor the
  // guard is on then.
  if (later) return {};
  if (settings.trap) {
    if (Stop stop = stop_if_found(settings, trap::check(settings, where, stats, state.watched));
        stop.code != 0)
      return stop;
  }
  if (!guarding) return {};
  return guarded(settings, where, *t, stats.fingerprint);
}

}  // namespace

Stop record_tensor(Level compiled, Phase phase, Role role, const at::Tensor* t,
                   c10::function_ref<Where()> where_of, const std::optional<Stored>& stored) {
  return record_and_check(compiled, phase, role, t, where_of, stored);
}

Stop check_input(Level compiled, const std::string& arg, const std::string& name,
                 const std::string& compiled_for, const at::Tensor* t) {
  const Level level = level_now(runtime_level(), compiled);
  if (level == Level::Off || t == nullptr || !t->defined()) return {};
  const Settings& settings = settings_now();
  if (settings.input_check == InputCheck::Off || !settings.rank_selected()) return {};
  const std::optional<inputs::Mismatch> wrong =
      inputs::check(inputs::parse(compiled_for), *t, name.empty() ? arg : name, state.symbols);
  if (!wrong) return {};
  WrongInput w{where_now(Phase::ModelInput, "", arg),
               wrong->kind,
               wrong->given,
               wrong->compiled_for,
               wrong->message,
               wrong->dim};
  w.where.node = name;
  Finding f;
  f.code = AOTI_DEBUG_PRINTER_STOPPED_BY_INPUT_CHECK;
  f.record = format_wrong_input(w, settings.format == Format::Jsonl);
  // A dump holds it where the run saves one.
  if (level == Level::Save) f.noted = format_wrong_input(w, true);
  f.message = "wrong input: " + wrong->message;
  if (settings.input_check == InputCheck::Continue) {
    note(settings.output, settings.dump_dir, f);
    return {};
  }
  return stop_at(settings, f);
}

void record_scalar(Level compiled, const Where& where, const char* type, const std::string& value) {
  const Level runtime = runtime_level();
  if (runtime == Level::Off || (where.launch >= 0 && !state.selected)) return;
  const Action action = effective_action(compiled, where.phase, runtime);
  if (action == Action::None || action == Action::Watch) return;
  const Settings& settings = settings_now();
  if (!settings.rank_selected()) return;
  if (graphs::capturing()) {
    graphs::add_scalar(where, type, value, action == Action::Save);
    return;
  }
  if (action == Action::Save) {
    // No file to hold a scalar: its manifest line carries the value.
    saver::append_to_manifest(settings.dump_dir, format_scalar(where, type, value, true));
    return;
  }
  emit(settings.output, format_scalar(where, type, value, settings.format == Format::Jsonl));
}

}  // namespace aoti_debug_printer
