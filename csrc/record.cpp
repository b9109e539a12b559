#include "record.h"

#include "device.h"
#include "json.h"

#include <ATen/Dispatch_v2.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/complex.h>

#include <atomic>

#include <cmath>
#include <type_traits>

namespace aoti_debug_printer {
namespace {

// One element as text. Non-finite floats are spelled nan/inf/-inf in both
// formats (JSON has no literal for them, so the JSON list quotes them).
template <typename scalar_t>
std::string element(scalar_t v) {
  if constexpr (std::is_same_v<scalar_t, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_integral_v<scalar_t>) {
    return std::to_string(v);
  } else if constexpr (c10::is_complex<scalar_t>::value) {
    const double re = static_cast<double>(v.real()), im = static_cast<double>(v.imag());
    return text_number(re) + (std::signbit(im) ? "-" : "+") + text_number(std::abs(im)) + "j";
  } else {
    return text_number(widen(v));
  }
}

// Whether a record of `t` carries its values as well: small tensors only.
bool takes_values(const at::Tensor& t, int64_t max_values) {
  return t.numel() > 0 && t.numel() <= max_values;
}

}  // namespace

void fill_contents(TensorRecord& r, const Contents& contents) {
  r.stats = contents.stats;
  if (contents.values.defined()) r.values = value_texts(contents.values);
}

std::vector<std::string> value_texts(const at::Tensor& host) {
  std::vector<std::string> out;
  const at::Tensor c = host.contiguous();
  out.reserve(c.numel());
  AT_DISPATCH_V2(c.scalar_type(), "aoti_debug_printer_values", AT_WRAP([&] {
                   const scalar_t* p = c.const_data_ptr<scalar_t>();
                   for (int64_t i = 0; i < c.numel(); ++i) out.push_back(element(p[i]));
                 }),
                 AOTI_DEBUG_PRINTER_DTYPES);
  return out;
}

std::string phase_name(Phase phase) {
  switch (phase) {
    case Phase::BeforeLaunch: return "before_launch";
    case Phase::AfterLaunch: return "after_launch";
    case Phase::ModelInput: return "model_input";
    case Phase::Upstream: return "upstream";
  }
  return "phase" + std::to_string(static_cast<int32_t>(phase));
}

std::string role_name(Role role) {
  switch (role) {
    case Role::Read: return "read";
    case Role::Write: return "write";
    case Role::ReadWrite: return "read_write";
    case Role::Accumulate: return "accumulate";
    case Role::Unknown: break;
  }
  return "";
}

at::Tensor to_host(const at::Tensor& t) { return t.device().is_cpu() ? t : t.to(at::kCPU); }

namespace {
// A host tensor's contents, from its statistics: its values are the tensor
// itself, where it is small enough and its dtype has statistics.
Contents host_contents_of(TensorStats stats, const at::Tensor& host, int64_t max_values) {
  Contents c;
  c.stats = std::move(stats);
  if (c.stats.unsupported.empty() && takes_values(host, max_values)) c.values = host;
  return c;
}
}  // namespace

Contents host_contents(const at::Tensor& host, int64_t max_values, bool with_fingerprint) {
  return host_contents_of(compute_stats(host, with_fingerprint), host, max_values);
}

Contents read_contents(const at::Tensor& t, int64_t max_values, bool with_fingerprint) {
  if (!device::computes_stats_on(t)) {
    return host_contents(to_host(t), max_values, with_fingerprint && t.device().is_cpu());
  }
  device::Snapshot snap = device::snapshot(t, takes_values(t, max_values), with_fingerprint);
  return {std::move(snap.stats), std::move(snap.values)};
}

TensorRecord describe(Where where, const at::Tensor& t, const Contents& contents) {
  TensorRecord r;
  r.where = std::move(where);
  r.defined = true;
  r.shape = t.sizes();
  r.dtype = t.scalar_type();
  r.device = t.device();
  r.layout = t.layout();
  r.numel = t.numel();
  if (t.layout() == at::kStrided) {
    r.stride = t.strides();
    r.contiguous = t.is_contiguous();
  }
  fill_contents(r, contents);
  return r;
}

TensorRecord replayed(const TensorRecord& r, device::Snapshot taken, int64_t replay) {
  TensorRecord out = r;
  out.where.replay = replay;
  fill_contents(out, {std::move(taken.stats), std::move(taken.values)});
  return out;
}

bool can_record_later(const at::Tensor& t, int64_t max_values) {
  return device::can_snapshot_later(t, takes_values(t, max_values));
}

bool can_record_stored(const at::Tensor& t, const at::Tensor& workspace,
                       const at::Tensor& cpu_workspace, int64_t max_values) {
  const at::ScalarType dtype = t.scalar_type();
  return t.layout() == at::kStrided && t.numel() > 0 && !takes_values(t, max_values) &&
         (dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16) &&
         (t.is_cuda() ? device::is_statistics_workspace(workspace)
                      : t.is_cpu() && workspace.defined() && workspace.is_same(cpu_workspace));
}

Contents stored_contents(const at::Tensor& t, const at::Tensor& workspace, int64_t field) {
  if (workspace.is_cpu()) {
    TORCH_CHECK(field >= 0 && field + AOTI_DEBUG_PRINTER_STORED_SLOT <= workspace.numel(),
                "no statistics slot at field ", field, " of this workspace");
    return {stats_of_kept_slot(workspace.const_data_ptr<int64_t>() + field, t.numel()),
            at::Tensor()};
  }
  return {device::stored_stats_now(workspace, field, t.numel()), at::Tensor()};
}

uint64_t bytes_spanned(const at::Tensor& t) {
  // torch strides are never negative: the last element is the farthest.
  if (t.numel() == 0) return 0;
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return static_cast<uint64_t>((last + 1) * static_cast<int64_t>(t.element_size()));
}

namespace {
std::atomic<int64_t> tensors_read_for_records{0};
}  // namespace

int64_t ReadsWhileUnchanged::tensors_read() { return tensors_read_for_records.load(); }

TensorView::TensorView(const at::Tensor& t)
    : storage(t.storage().getWeakStorageImpl()),
      data(reinterpret_cast<uintptr_t>(t.const_data_ptr())),
      span(bytes_spanned(t)),
      dtype(t.scalar_type()),
      sizes(t.sizes()),
      strides(t.strides()) {}

bool TensorView::is(const at::Tensor& t) const {
  return storage._unsafe_get_target() == t.storage().unsafeGetStorageImpl() && !storage.expired() &&
         data == reinterpret_cast<uintptr_t>(t.const_data_ptr()) && dtype == t.scalar_type() &&
         at::IntArrayRef(sizes) == t.sizes() && at::IntArrayRef(strides) == t.strides();
}

bool viewable(const at::Tensor& t) {
  return t.defined() && t.layout() == at::kStrided && t.has_storage();
}

const ReadsWhileUnchanged::Read* ReadsWhileUnchanged::find(const at::Tensor& t) const {
  if (!open_ || !viewable(t)) return nullptr;
  for (const Read& r : reads_)
    if (r.view.is(t)) return &r;
  return nullptr;
}

void ReadsWhileUnchanged::add(const at::Tensor& t, TensorStats stats,
                              std::shared_ptr<device::Landing> landing) {
  tensors_read_for_records.fetch_add(1, std::memory_order_relaxed);
  if (!open_ || !viewable(t)) return;
  // A run's records read a few hundred tensors at most that are read again;
  // past that the oldest go (the next record of one reads it again).
  constexpr size_t kMostReads = 256;
  if (reads_.size() == kMostReads) reads_.pop_front();
  reads_.push_back(Read{TensorView(t), std::move(stats), std::move(landing)});
}

void ReadsWhileUnchanged::written(const at::Tensor& t) {
  if (reads_.empty() || !viewable(t)) return;
  const auto begin = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  const uint64_t span = bytes_spanned(t);
  // An empty tensor writes nothing; its storage's other views stay.
  if (span == 0) return;
  std::erase_if(reads_, [&](const Read& r) { return r.view.overlaps(begin, span); });
}

Contents ReadsWhileUnchanged::contents(const at::Tensor& t, int64_t max_values) {
  if (!t.device().is_cpu()) {
    tensors_read_for_records.fetch_add(1, std::memory_order_relaxed);
    return read_contents(t, max_values);
  }
  if (const Read* r = find(t)) return host_contents_of(r->stats, t, max_values);
  Contents c = read_contents(t, max_values);
  add(t, c.stats, nullptr);
  return c;
}

std::shared_ptr<device::Landing> ReadsWhileUnchanged::landing(const at::Tensor& t,
                                                              int64_t max_values, bool batched,
                                                              bool with_fingerprint) {
  const bool with_values = takes_values(t, max_values);
  if (with_fingerprint) {
    tensors_read_for_records.fetch_add(1, std::memory_order_relaxed);
    return device::snapshot_later(t, with_values, false, true);
  }
  if (const Read* r = find(t); r && r->landing && device::serves_for(*r->landing, t, with_values))
    return r->landing;
  std::shared_ptr<device::Landing> l = device::snapshot_later(t, with_values, batched);
  if (l) add(t, {}, l);
  return l;
}

WatchedArg watch(const std::string& name, const at::Tensor& t, Before before) {
  WatchedArg a;
  a.name = name;
  a.shape = t.sizes().vec();
  a.dtype = t.scalar_type();
  a.device = t.device().str();
  if (t.layout() != at::kStrided || !t.has_storage()) return a;
  a.data = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  a.span = bytes_spanned(t);
  a.storage = reinterpret_cast<uintptr_t>(t.storage().data());
  a.storage_bytes = t.storage().nbytes();
  if (t.is_cuda()) {
    const device::Allocation alloc = device::allocation_of(t.const_data_ptr());
    a.allocation_known = alloc.known;
    a.allocation = alloc.base;
    a.allocation_bytes = alloc.size;
  }
  if (before == Before::HostCopy) a.host = to_host(t).clone();
  if (before == Before::Kept) a.kept = t;
  return a;
}

void copy_kept_shared_with_writes(std::vector<WatchedArg>& watched) {
  const auto shares = [](const WatchedArg& a, const WatchedArg& b) {
    return a.device == b.device && a.span > 0 && b.span > 0 && a.data < b.data + b.span &&
           b.data < a.data + a.span;
  };
  for (WatchedArg& a : watched) {
    if (!a.kept.defined()) continue;
    for (const WatchedArg& written : watched) {
      if (written.kept.defined() || !shares(a, written)) continue;
      a.host = to_host(a.kept).clone();
      a.kept = at::Tensor();
      break;
    }
  }
}

void take_kept_copies(std::vector<WatchedArg>& watched) {
  for (WatchedArg& a : watched) {
    if (!a.kept.defined()) continue;
    a.host = to_host(a.kept).clone();
    a.kept = at::Tensor();
  }
}

Where before_launch_of(const Where& at_kernel, const std::string& arg) {
  Where at = at_kernel;
  at.phase = Phase::BeforeLaunch;
  at.arg = arg;
  // What `at_kernel`'s record knew of its own argument is not this one's.
  at.node = at.why = at.formula = "";
  at.role = Role::Unknown;
  return at;
}

TensorRecord describe_problem(const Where& where, std::string problem) {
  TensorRecord r;
  r.where = where;
  r.problem = std::move(problem);
  return r;
}

}  // namespace aoti_debug_printer
