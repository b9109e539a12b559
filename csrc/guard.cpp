#include "guard.h"

#include "aoti_debug_printer.h"
#include "device.h"
#include "format.h"
#include "graphs.h"
#include "save.h"
#include "stats.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/intrusive_ptr.h>

#include <algorithm>
#include <limits>
#include <vector>

namespace aoti_debug_printer::guard {
namespace {

// The elements' bits as integers of the same width, one row-major 1-D
// tensor (complex: two per element). Undefined where a dtype has none.
at::Tensor bits_of(const at::Tensor& t) {
  const at::ScalarType type = t.scalar_type();
  if (c10::isQIntType(type) || c10::isBitsType(type) || t.layout() != at::kStrided) return {};
  try {
    const at::Tensor flat = t.contiguous().reshape({-1});
    switch (flat.element_size()) {
      case 1: return flat.view(at::kByte);
      case 2: return flat.view(at::kShort);
      case 4: return flat.view(at::kInt);
      case 8: return flat.view(at::kLong);
      case 16: return flat.view(at::kLong);  // complex128: two words per element
      default: return {};
    }
  } catch (const c10::Error&) {
    return {};  // a dtype whose elements have no bits of their own to read
  }
}

}  // namespace

std::optional<uint64_t> fingerprint(const at::Tensor& t) {
  if (t.layout() != at::kStrided) return std::nullopt;
  if (t.device().is_cpu()) return compute_fingerprint(t);
  if (device::computes_stats_on(t)) return device::snapshot(t, false, true).stats.fingerprint;
  // .cpu() keeps the strides of a dense tensor, so positions are the same.
  return compute_fingerprint(t.cpu());
}

Difference difference(const at::Tensor& before, const at::Tensor& after) {
  Difference d;
  const at::Tensor a = bits_of(before), b = bits_of(after);
  if (!a.defined() || !b.defined() || a.numel() != b.numel()) return d;
  at::Tensor changed = a.ne(b);
  if (before.is_complex() && before.element_size() == 16) changed = changed.view({-1, 2}).any(1);
  d.changed = changed.sum().item<int64_t>();
  if (d.changed > 0) d.first_index = changed.to(at::kByte).argmax().item<int64_t>();
  return d;
}

namespace {

// The bytes a tensor's elements occupy: [begin, end) on its device.
struct Span {
  c10::Device device{c10::kCPU};
  uintptr_t begin = 0, end = 0;
  bool overlaps(const Span& o) const {
    return device == o.device && begin < o.end && o.begin < end;
  }
};

Span span_of(const at::Tensor& t) {
  Span s;
  s.device = t.device();
  if (t.numel() == 0 || !t.has_storage()) return s;
  int64_t low = 0, high = 0;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t extent = (t.size(d) - 1) * t.stride(d);
    (extent < 0 ? low : high) += extent;
  }
  const auto first = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  s.begin = first + low * t.element_size();
  s.end = first + (high + 1) * t.element_size();
  return s;
}

// A buffer the guard vouches for: its view, the storage it lives in (a weak
// reference: the guard never keeps memory alive, and a freed buffer is
// never compared), and what its writer left in it (inside a captured graph,
// the item that holds it at each replay).
struct Entry {
  c10::weak_intrusive_ptr<c10::StorageImpl> storage{c10::intrusive_ptr<c10::StorageImpl>()};
  const c10::StorageImpl* storage_id = nullptr;
  int64_t offset = 0;
  std::vector<int64_t> sizes, strides;
  at::ScalarType dtype = at::kFloat;
  Span span;
  Print print;
  std::string buffer, writer;
  int64_t writer_launch = -1;
  // Guard 2: where it was first seen changed since its writer.
  std::string changed_at;

  bool is_view_of(const at::Tensor& t) const {
    return t.has_storage() && t.storage().unsafeGetStorageImpl() == storage_id &&
           t.storage_offset() == offset && t.scalar_type() == dtype && t.sizes().vec() == sizes &&
           t.strides().vec() == strides && !storage.expired();
  }
  // The buffer as a tensor again, or undefined once its storage is freed.
  at::Tensor revive() const {
    c10::intrusive_ptr<c10::StorageImpl> strong = storage.lock();
    if (!strong) return {};
    return at::empty({0}, at::TensorOptions().dtype(dtype).device(span.device))
        .set_(c10::Storage(std::move(strong)), offset, sizes, strides);
  }
};

// One kernel argument, between its kernel's before and after records.
struct KernelArg {
  std::string name;
  Role role = Role::Unknown;
  Span span;
  // For arguments the kernel only reads: a copy (what changed, and the
  // "before" file; none inside a captured graph, which holds no copy), and
  // the fingerprint its record computed, if any, so that an unchanged
  // argument costs one read after launch, not a compare.
  at::Tensor before;
  Print before_print;
};

// Per thread, as the printer's indices: each thread runs its own buffers.
struct State {
  std::vector<Entry> entries;
  std::vector<std::string> launches;  // "kernel (launch n)", this run's, by launch index
  std::vector<KernelArg> args;        // the current kernel's
  std::string kernel;                 // the current kernel, with its launch
};
thread_local State state;

std::string named(const Where& w) {
  return w.kernel + " (launch " + std::to_string(w.launch) + ")";
}

bool reads_only(Role role) { return role == Role::Read; }

// Inside a captured graph: nothing is read now, the checks are the replays'.
bool captured() { return graphs::capturing(); }

// Whether the current kernel writes memory that `span` shares, under
// another name: then a change there is no evidence of anything.
bool written_by_current_kernel(const Span& span, const std::string& except) {
  for (const KernelArg& a : state.args) {
    if (a.name != except && !reads_only(a.role) && a.span.overlaps(span)) return true;
  }
  return false;
}

void forget_overlapping(const Span& span) {
  std::erase_if(state.entries, [&](const Entry& e) { return e.span.overlaps(span); });
}

void remember(const Where& w, const at::Tensor& t, const std::string& writer, Print print) {
  const Span span = span_of(t);
  forget_overlapping(span);
  if (!t.has_storage() || t.numel() == 0) return;
  if (!print.value && !print.item && !captured()) print.value = fingerprint(t);
  if (!print.value && !print.item) return;
  Entry e;
  e.storage = c10::weak_intrusive_ptr<c10::StorageImpl>(t.storage().getWeakStorageImpl());
  e.storage_id = t.storage().unsafeGetStorageImpl();
  e.offset = t.storage_offset();
  e.sizes = t.sizes().vec();
  e.strides = t.strides().vec();
  e.dtype = t.scalar_type();
  e.span = span;
  e.print = print;
  e.buffer = w.arg;
  e.writer = writer;
  e.writer_launch = w.launch;
  state.entries.push_back(std::move(e));
}

// Guard 2: every buffer still alive is checked; the first change since its
// writer is noted against `where` (a kernel, or the code between kernels).
// After a kernel (`after_kernel`), what it writes under its own names is
// its to change.
void check_every_buffer(const std::string& where, bool after_kernel) {
  std::erase_if(state.entries, [](const Entry& e) { return e.storage.expired(); });
  for (Entry& e : state.entries) {
    if (!e.changed_at.empty()) continue;
    if (after_kernel && written_by_current_kernel(e.span, "")) continue;
    const at::Tensor t = e.revive();
    if (!t.defined()) continue;
    const std::optional<uint64_t> print = fingerprint(t);
    if (print && print != e.print.value) e.changed_at = where;
  }
}

std::string save_copy(const Settings& settings, const Where& at, const at::Tensor& t) {
  std::string file;
  saving([&] {
    const at::Tensor host = to_host(t);
    file =
        in_dir(settings.dump_dir,
               save_snapshot(settings.dump_dir, describe(at, host, host_contents(host, 0)), host));
  });
  return file;
}

Finding finding_of(const GuardFinding& f, bool json) {
  Finding out;
  out.code = AOTI_DEBUG_PRINTER_STOPPED_BY_GUARD;
  out.record = format_guard(f, json);
  out.noted = format_guard(f, true);
  out.kernel = true;
  out.message = "write guard: " + f.message;
  return out;
}

// The guard's finding, for stop_at; the run stops here.
Finding found(const Settings& settings, const GuardFinding& f) {
  state.entries.clear();
  return finding_of(f, settings.format == Format::Jsonl);
}

// `held`'s buffer, which `w` reads as `t`, changed since its writer: what
// the record says, but the saved copy, which only a run outside a graph has.
GuardFinding overwritten(const Settings& settings, const Where& w, const at::Tensor& t,
                         const Entry& held) {
  GuardFinding f;
  f.where = w;
  f.kind = "overwritten_before_read";
  f.numel = t.numel();
  f.writer = held.writer;
  for (int64_t l = held.writer_launch + 1; l < w.launch; ++l) {
    if (l >= 0 && static_cast<size_t>(l) < state.launches.size())
      f.between.push_back(state.launches[l]);
  }
  f.culprit = held.changed_at;
  // Guard 2 names who changed it outside a graph only.
  const std::string unnamed = captured()
                                  ? " (run it outside the graph with AOTI_DEBUG_PRINTER_GUARD=2 to "
                                    "name it)"
                              : settings.guard >= 2 ? ""
                                                    : " (AOTI_DEBUG_PRINTER_GUARD=2 names it)";
  f.message = w.arg + " changed after " + held.writer + " wrote it and before " + named(w) +
              " read it: " +
              (f.culprit.empty() ? "a kernel launched between wrote over it" + unnamed
                                 : "changed by " + f.culprit);
  return f;
}

// `w`'s kernel changed `t`, an argument it only reads: what the record says
// but how many elements changed, and where, which need the copy before launch.
GuardFinding read_only_changed(const Where& w, const at::Tensor& t) {
  GuardFinding f;
  f.where = w;
  f.kind = "read_only_argument_changed";
  f.numel = t.numel();
  f.culprit = named(w);
  f.message = "kernel " + named(w) + " changed " + w.arg + ", an argument it only reads";
  return f;
}

}  // namespace

void begin_run() { state = State{}; }

graphs::FindingAt at_replay(GuardFinding f) {
  return [f = std::move(f)](int64_t replay, bool json) {
    GuardFinding at = f;
    at.where.replay = replay;
    Finding out = finding_of(at, json);
    out.message = "write guard at replay " + std::to_string(replay) +
                  " of a captured CUDA graph: " + at.message;
    return out;
  };
}

void forget() { state.entries.clear(); }

void before_launch(const Settings& settings, const Where& launch, bool seen) {
  if (state.launches.size() <= static_cast<size_t>(std::max<int64_t>(launch.launch, 0))) {
    state.launches.resize(launch.launch + 1);
  }
  state.kernel = named(launch);
  state.launches[launch.launch] = state.kernel;
  state.args.clear();
  if (!seen) {
    // A kernel without records may write anywhere: vouch for nothing before it.
    state.entries.clear();
    return;
  }
  if (settings.guard >= 2 && !captured()) {
    const std::string previous =
        launch.launch > 0 ? state.launches[launch.launch - 1] : std::string("the run's start");
    check_every_buffer("code outside any kernel the printer sees, after " + previous, false);
  }
}

void after_launch(const Settings& settings, const Where& launch) {
  if (settings.guard >= 2 && !captured()) check_every_buffer(named(launch), true);
}

std::optional<Finding> before_use(const Settings& settings, const Where& w, const at::Tensor& t,
                                  Print print) {
  if (w.phase == Phase::ModelInput) {
    remember(w, t, "the caller (model input " + w.arg + ")", print);
    return std::nullopt;
  }
  KernelArg arg{w.arg, w.role, span_of(t), {}, {}};
  if (w.role == Role::Write) {  // its old contents are the kernel's to overwrite
    state.args.push_back(std::move(arg));
    return std::nullopt;
  }
  if (reads_only(w.role)) {
    // A copy inside a graph would be captured into it: a replay compares
    // this record's fingerprint with a pass of its own after launch.
    if (!captured()) arg.before = t.clone();
    arg.before_print = print;
  }
  state.args.push_back(std::move(arg));
  const auto held = std::find_if(state.entries.begin(), state.entries.end(),
                                 [&](const Entry& e) { return e.is_view_of(t); });
  if (held == state.entries.end()) return std::nullopt;
  if (captured()) {
    if (held->print.item && print.item)
      graphs::add_check(*held->print.item, *print.item,
                        at_replay(overwritten(settings, w, t, *held)));
    return std::nullopt;
  }
  if (!print.value) print.value = fingerprint(t);
  if (!print.value || print.value == held->print.value) return std::nullopt;
  GuardFinding f = overwritten(settings, w, t, *held);
  f.files.emplace_back("now", save_copy(settings, w, t));
  return found(settings, f);
}

std::optional<Finding> after_use(const Settings& settings, const Where& w, const at::Tensor& t,
                                 Print print) {
  if (!reads_only(w.role)) {
    remember(w, t, named(w), print);
    return std::nullopt;
  }
  const auto arg = std::find_if(state.args.begin(), state.args.end(),
                                [&](const KernelArg& a) { return a.name == w.arg; });
  if (captured()) {
    if (arg == state.args.end() || !arg->before_print.item) return std::nullopt;
    // A pass of its own: the record before launch holds what it was.
    const Print after = Print::of_item(graphs::add_fingerprint(t));
    if (written_by_current_kernel(arg->span, arg->name)) {
      // It shares memory with an argument the kernel writes: it may change,
      // and what it holds after launch is what the guard vouches for.
      remember(w, t, named(w), after);
    } else if (after.item) {
      graphs::add_check(*arg->before_print.item, *after.item, at_replay(read_only_changed(w, t)));
    }
    return std::nullopt;
  }
  if (arg == state.args.end() || !arg->before.defined()) return std::nullopt;
  if (arg->before_print.value && fingerprint(t) == arg->before_print.value) return std::nullopt;
  const Difference d = difference(arg->before, t);
  if (d.changed == 0) return std::nullopt;
  if (written_by_current_kernel(arg->span, arg->name)) {
    // It shares memory with an argument the kernel writes: changed as it may.
    remember(w, t, named(w), print);
    return std::nullopt;
  }
  GuardFinding f = read_only_changed(w, t);
  f.changed = d.changed;
  f.first_index = d.first_index;
  Where before = w;  // the same argument, as it was before launch
  before.phase = Phase::BeforeLaunch;
  f.files.emplace_back("before launch", save_copy(settings, before, arg->before));
  f.files.emplace_back("after launch", save_copy(settings, w, t));
  return found(settings, f);
}

}  // namespace aoti_debug_printer::guard
