#include "record.h"

#include "aoti_debug_printer.h"
#include "device.h"
#include "sources.h"

#include <ATen/Context.h>
#include <ATen/Dispatch_v2.h>
#include <c10/util/complex.h>

#include <unistd.h>

#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <type_traits>

namespace aoti_debug_printer {
namespace {

// %.6g for people; JSON gets 17 digits so numbers survive a round trip.
std::string number(double v, bool json) {
  if (json) return json_number(v);
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return general_number(v, 6);
}

std::string scalar_text(const c10::Scalar& s, bool json) {
  if (s.type() == c10::ScalarType::UInt64) return std::to_string(s.toUInt64());
  if (s.isIntegral(false)) return std::to_string(s.toLong());
  if (s.isBoolean()) return s.toBool() ? "true" : "false";
  return number(s.toDouble(), json);
}

// A list as the text format shows it: [1, 2, 3].
template <typename List>
std::string list(const List& xs) {
  std::string out = "[";
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i) out += ", ";
    if constexpr (std::is_same_v<std::decay_t<decltype(xs[i])>, std::string>) {
      out += xs[i];
    } else {
      out += std::to_string(xs[i]);
    }
  }
  return out + "]";
}

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
    return number(re, false) + (std::signbit(im) ? "-" : "+") + number(std::abs(im), false) + "j";
  } else {
    return number(widen(v), false);
  }
}

std::vector<std::string> flat_values(const at::Tensor& host) {
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

// Whether a record of `t` carries its values as well: small tensors only.
bool takes_values(const at::Tensor& t, int64_t max_values) {
  return t.numel() > 0 && t.numel() <= max_values;
}

// A record's statistics and values, from what was read of its tensor.
void set_contents(TensorRecord& r, const Contents& contents) {
  r.stats = contents.stats;
  if (contents.values.defined()) r.values = flat_values(contents.values);
}

// "[aoti-debug-printer] HEADLINEPHASE KERNEL ARG<detail> (run R, launch L,
// call C)"; upstream's records show their own message for the phase.
std::string where_text(const Where& w, const std::string& detail = "", const char* headline = "") {
  std::string head = "[aoti-debug-printer] ";
  if (w.rank >= 0) head += "rank " + std::to_string(w.rank) + " ";
  head += headline;
  head += escaped(w.phase == Phase::Upstream ? w.label : phase_name(w.phase), Escape::Text);
  if (!w.kernel.empty()) head += " " + escaped(w.kernel, Escape::Text);
  if (!w.arg.empty()) head += " " + escaped(w.arg, Escape::Text);
  head += detail;
  const std::string replay = w.replay >= 0 ? ", replay " + std::to_string(w.replay) : "";
  if (w.launch >= 0) {
    head += " (run " + std::to_string(w.run) + ", launch " + std::to_string(w.launch) + ", call " +
            std::to_string(w.call) + replay + ")";
  } else if (w.run >= 0) {
    head += " (run " + std::to_string(w.run) + replay + ")";
  }
  return head;
}

}  // namespace

std::string dtype_name(c10::ScalarType t) {
  // torch's own Python spelling (float32, bfloat16, float8_e4m3fn, ...).
  return std::string(c10::getDtypeNames(t).first);
}

std::string layout_name(c10::Layout layout) {
  std::string name = c10::str(layout);
  for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return name;
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

namespace {

// A flag of ATen's context as JSON; null where this torch cannot say (a
// getter that throws, as one does when legacy and new TF32 settings are
// mixed). The reduced-precision reduction getters return a bool in older
// torch and an option in newer ones, whose first value (0) allows it.
template <typename F>
std::string json_flag(F get) {
  try {
    const auto v = get();
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, bool>) {
      return v ? "true" : "false";
    } else {
      return static_cast<int>(v) == 0 ? "true" : "false";
    }
  } catch (...) {
    return "null";
  }
}

std::string matmul_precision_name() {
  try {
    switch (at::globalContext().float32MatmulPrecision()) {
      case at::Float32MatmulPrecision::HIGHEST: return "highest";
      case at::Float32MatmulPrecision::HIGH: return "high";
      case at::Float32MatmulPrecision::MEDIUM: return "medium";
    }
  } catch (...) {
  }
  return "";
}

}  // namespace

std::string format_environment(const Where& where, const std::string& device) {
  auto& ctx = at::globalContext();
  std::string name = "cpu", capability;
  if (device.rfind("cuda", 0) == 0) {
    const size_t colon = device.find(':');
    const int index = colon == std::string::npos ? 0 : std::atoi(device.c_str() + colon + 1);
    const device::Facts f = device::facts_of(index);
    name = f.name.empty() ? device : f.name;
    capability = f.capability;
  }
  return JsonObject()
      .text("event", "environment")
      .integer("run", where.run)
      .integer("rank", where.rank)
      .integer("pid", static_cast<int64_t>(getpid()))
      .text("process", process_token())
      .text("torch", AOTI_DEBUG_PRINTER_TORCH_VERSION)
      .text("device", name)
      .text("capability", capability)
      .json("tf32_matmul", json_flag([&] { return ctx.allowTF32CuBLAS(); }))
      .json("tf32_cudnn", json_flag([&] { return ctx.allowTF32CuDNN(); }))
      .text("matmul_precision", matmul_precision_name())
      .json("bf16_reduction", json_flag([&] { return ctx.allowBF16ReductionCuBLAS(); }))
      .json("fp16_reduction", json_flag([&] { return ctx.allowFP16ReductionCuBLAS(); }))
      .json("deterministic", json_flag([&] { return ctx.deterministicAlgorithms(); }))
      .json("sources", sources::as_json())
      .text("inductor_config", where.inductor_config)
      .integer("schema", AOTI_DEBUG_PRINTER_RECORD_SCHEMA)
      .line();
}

namespace {
// A finding's node, where the user's code made it: the JSON member
// (innermost frame first), and the line under the finding's headline.
JsonObject& with_source(JsonObject& o, const Where& w) {
  const std::vector<std::string> frames = sources::of(w.node);
  if (!frames.empty()) o.json("source", json_texts(frames));
  return o;
}
std::string source_line(const Where& w) {
  const std::vector<std::string> frames = sources::of(w.node);
  if (frames.empty()) return "";
  return "    at " + escaped(frames.front(), Escape::Text) + "\n";
}
}  // namespace

JsonObject json_record(const char* event, const Where& w) {
  JsonObject o;
  o.text("event", event).text("phase", phase_name(w.phase));
  if (w.phase == Phase::Upstream) o.text("label", w.label);
  o.text("kernel", w.kernel)
      .text("arg", w.arg)
      .integer("run", w.run)
      .integer("launch", w.launch)
      .integer("call", w.call)
      .integer("rank", w.rank)
      .text("node", w.node)
      .text("role", role_name(w.role))
      .text("why", w.why);
  if (!w.formula.empty()) o.text("formula", w.formula);
  if (w.replay >= 0) o.integer("replay", w.replay);
  return o.integer("pid", static_cast<int64_t>(getpid()))
      .text("process", process_token())
      .integer("schema", AOTI_DEBUG_PRINTER_RECORD_SCHEMA);
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
  set_contents(r, contents);
  return r;
}

namespace {

class DeviceRecord final : public LateRecord {
 public:
  DeviceRecord(TensorRecord r, std::shared_ptr<device::Landing> landing, bool json)
      : record_(std::move(r)), landing_(std::move(landing)), json_(json) {}
  bool ready() const override { return device::landed(*landing_); }
  void wait() override { error_ = device::wait_for(*landing_); }
  std::string text() override {
    device::Snapshot snap = device::take(*landing_, error_);
    set_contents(record_, {std::move(snap.stats), std::move(snap.values)});
    landing_.reset();  // its slot of the ring is free again
    return format_record(record_, json_);
  }

 private:
  TensorRecord record_;
  std::shared_ptr<device::Landing> landing_;
  bool json_;
  std::string error_;
};

class FormattedLater final : public LateRecord {
 public:
  FormattedLater(TensorRecord r, bool json) : record_(std::move(r)), json_(json) {}
  bool ready() const override { return true; }
  void wait() override {}
  std::string text() override { return format_record(record_, json_); }

 private:
  TensorRecord record_;
  bool json_;
};

}  // namespace

TensorRecord replayed(const TensorRecord& r, device::Snapshot taken, int64_t replay) {
  TensorRecord out = r;
  out.where.replay = replay;
  set_contents(out, {std::move(taken.stats), std::move(taken.values)});
  return out;
}

std::unique_ptr<LateRecord> formatted_later(TensorRecord r, bool json) {
  return std::make_unique<FormattedLater>(std::move(r), json);
}

bool can_record_later(const at::Tensor& t, int64_t max_values) {
  return device::can_snapshot_later(t, takes_values(t, max_values));
}

const ReadsWhileUnchanged::Read* ReadsWhileUnchanged::find(const at::Tensor& t) const {
  if (!open_ || t.layout() != at::kStrided || !t.has_storage()) return nullptr;
  const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  const void* data = t.const_data_ptr();
  for (const Read& r : reads_) {
    if (r.storage._unsafe_get_target() == storage && !r.storage.expired() && r.data == data &&
        r.dtype == t.scalar_type() && at::IntArrayRef(r.sizes) == t.sizes() &&
        at::IntArrayRef(r.strides) == t.strides())
      return &r;
  }
  return nullptr;
}

void ReadsWhileUnchanged::add(const at::Tensor& t, TensorStats stats,
                              std::shared_ptr<device::Landing> landing) {
  if (!open_ || t.layout() != at::kStrided || !t.has_storage()) return;
  // A stretch holds a kernel's arguments or two; a wrapper that never ends
  // one keeps only the last reads.
  constexpr size_t kMostReads = 64;
  if (reads_.size() == kMostReads) reads_.erase(reads_.begin());
  reads_.push_back(Read{t.storage().getWeakStorageImpl(), t.const_data_ptr(), t.scalar_type(),
                        at::DimVector(t.sizes()), at::DimVector(t.strides()), std::move(stats),
                        std::move(landing)});
}

Contents ReadsWhileUnchanged::contents(const at::Tensor& t, int64_t max_values) {
  if (!t.device().is_cpu()) return read_contents(t, max_values);
  if (const Read* r = find(t)) return host_contents_of(r->stats, t, max_values);
  Contents c = read_contents(t, max_values);
  add(t, c.stats, nullptr);
  return c;
}

std::shared_ptr<device::Landing> ReadsWhileUnchanged::landing(const at::Tensor& t,
                                                              int64_t max_values, bool batched) {
  const bool with_values = takes_values(t, max_values);
  if (const Read* r = find(t); r && r->landing && device::serves_for(*r->landing, t, with_values))
    return r->landing;
  std::shared_ptr<device::Landing> l = device::snapshot_later(t, with_values, batched);
  if (l) add(t, {}, l);
  return l;
}

std::unique_ptr<LateRecord> record_later(Where&& where, const at::Tensor& t, int64_t max_values,
                                         bool json, bool batched, ReadsWhileUnchanged& reads) {
  std::shared_ptr<device::Landing> landing = reads.landing(t, max_values, batched);
  if (!landing) return nullptr;
  return std::make_unique<DeviceRecord>(describe(std::move(where), t, Contents{}),
                                        std::move(landing), json);
}

WatchedArg watch(const std::string& name, const at::Tensor& t, bool keep_host_copy) {
  WatchedArg a;
  a.name = name;
  a.shape = t.sizes().vec();
  a.dtype = dtype_name(t.scalar_type());
  a.device = t.device().str();
  if (t.layout() != at::kStrided || !t.has_storage()) return a;
  a.data = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  if (t.numel() > 0) {
    // torch strides are never negative: the last element is the farthest.
    int64_t last = 0;
    for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
    a.span = static_cast<uint64_t>((last + 1) * static_cast<int64_t>(t.element_size()));
  }
  a.storage = reinterpret_cast<uintptr_t>(t.storage().data());
  a.storage_bytes = t.storage().nbytes();
  if (t.is_cuda()) {
    const device::Allocation alloc = device::allocation_of(t.const_data_ptr());
    a.allocation_known = alloc.known;
    a.allocation = alloc.base;
    a.allocation_bytes = alloc.size;
  }
  if (keep_host_copy) a.host = to_host(t).clone();
  return a;
}

namespace {
std::string hex(uintptr_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIxPTR, v);
  return buf;
}

// "[begin, end) inside" for a span and the range that should hold it.
bool holds(uintptr_t base, uint64_t size, uintptr_t data, uint64_t span) {
  return data >= base && data + span <= base + size;
}
}  // namespace

std::string format_cuda_error(const Where& where, const std::string& error,
                              const std::vector<WatchedArg>& args, bool json) {
  std::ostringstream out;
  if (json) {
    JsonList listed;
    for (const WatchedArg& a : args) {
      JsonObject arg;
      arg.text("arg", a.name)
          .json("shape", json_integers(a.shape))
          .text("dtype", a.dtype)
          .text("device", a.device)
          .text("data_ptr", hex(a.data))
          .integer("span_bytes", static_cast<int64_t>(a.span))
          .boolean("inside_storage", holds(a.storage, a.storage_bytes, a.data, a.span));
      if (a.allocation_known) {
        arg.boolean("inside_allocation", holds(a.allocation, a.allocation_bytes, a.data, a.span));
      } else {
        arg.null("inside_allocation");
      }
      if (!a.saved_as.empty()) arg.text("file", a.saved_as);
      listed.json(arg.object());
    }
    JsonObject o = json_record("cuda_error", where);
    return with_source(o, where).text("error", error).json("args", listed.array()).line();
  }
  out << where_text(where, ": " + error, "CUDA ERROR at ") << "\n" << source_line(where);
  if (where.launch < 0) {
    out << "    found before this run's first kernel: an earlier CUDA operation failed, not one of "
           "this model's kernels\n";
    return out.str();
  }
  out << "    the first failed check since this kernel was launched: this kernel failed\n";
  if (args.empty()) {
    out << "    (its arguments were not recorded: the filter did not select it, or it has no "
           "tensor arguments)\n";
  }
  for (const WatchedArg& a : args) {
    out << "    " << a.name << ": shape=" << list(a.shape) << " dtype=" << a.dtype
        << " device=" << a.device << " data_ptr=" << hex(a.data) << " bytes=[" << hex(a.data)
        << ", " << hex(a.data + a.span) << ")\n      storage=[" << hex(a.storage) << ", "
        << hex(a.storage + a.storage_bytes) << ") "
        << (holds(a.storage, a.storage_bytes, a.data, a.span) ? "inside" : "OUTSIDE");
    if (a.allocation_known) {
      out << "; allocation=[" << hex(a.allocation) << ", " << hex(a.allocation + a.allocation_bytes)
          << ") "
          << (holds(a.allocation, a.allocation_bytes, a.data, a.span) ? "inside" : "OUTSIDE");
    }
    if (!a.saved_as.empty()) out << "; saved as " << a.saved_as;
    out << "\n";
  }
  return out.str();
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

std::string format_record(const TensorRecord& r, bool json) {
  return json ? format_json(r) + "\n" : format_text(r);
}

std::string format_text(const TensorRecord& r) {
  // Appended to one string: no ostringstream (and its locale) per record.
  std::string out = where_text(r.where) + "\n";
  if (!r.problem.empty()) return out + "    " + r.problem + "\n";
  out += "    shape=" + list(r.shape) + " stride=" + list(r.stride) +
         " dtype=" + dtype_name(r.dtype) + " device=" + r.device.str() +
         " layout=" + layout_name(r.layout) + " contiguous=" + (r.contiguous ? "true" : "false") +
         " numel=" + std::to_string(r.numel) + "\n";
  const TensorStats& s = r.stats;
  if (!s.unsupported.empty()) return out + "    " + s.unsupported + "\n";
  out += s.of_modulus ? "    |z| " : "    ";
  if (s.min) {
    out += "min=" + scalar_text(*s.min, false) + " max=" + scalar_text(*s.max, false) +
           " mean=" + number(s.mean, false) + " std=" + number(s.std, false) +
           " absmax=" + number(s.absmax, false);
  } else {
    out += "no finite values";
  }
  out += "\n    finite=" + std::to_string(s.finite) + " nan=" + std::to_string(s.nan) +
         " +inf=" + std::to_string(s.pos_inf) + " -inf=" + std::to_string(s.neg_inf) +
         " zeros=" + std::to_string(s.zeros) + "\n";
  if (!r.values.empty()) out += "    values=" + list(r.values) + "\n";
  return out;
}

std::string format_json(const TensorRecord& r, const std::string& file,
                        const std::string& unsaved) {
  JsonObject o = json_record("tensor", r.where);
  if (!r.problem.empty()) {
    o.text("problem", r.problem);
  } else {
    o.json("shape", json_integers(r.shape))
        .json("stride", json_integers(r.stride))
        .text("dtype", dtype_name(r.dtype))
        .text("device", r.device.str())
        .text("layout", layout_name(r.layout))
        .boolean("contiguous", r.contiguous)
        .integer("numel", r.numel);
    const TensorStats& s = r.stats;
    if (!s.unsupported.empty()) {
      o.null("stats").text("problem", s.unsupported);
    } else {
      o.json("stats", JsonObject()
                          .text("of", s.of_modulus ? "modulus" : "value")
                          .json("min", s.min ? scalar_text(*s.min, true) : "null")
                          .json("max", s.max ? scalar_text(*s.max, true) : "null")
                          .number("mean", s.mean)
                          .number("std", s.std)
                          .json("absmax", s.min ? number(s.absmax, true) : "null")
                          .integer("finite", s.finite)
                          .integer("nan", s.nan)
                          .integer("pos_inf", s.pos_inf)
                          .integer("neg_inf", s.neg_inf)
                          .integer("zeros", s.zeros)
                          .object());
    }
    if (!r.values.empty()) o.json("values", json_texts(r.values));
  }
  if (!file.empty()) o.text("file", file);
  if (!unsaved.empty()) o.text("unsaved", unsaved);
  return o.object();
}

std::string format_trap(const Where& where, const TensorStats& stats, const std::string& what,
                        const std::vector<TensorRecord>& inputs, bool json,
                        const std::vector<std::string>& files) {
  std::ostringstream out;
  if (json) {
    JsonList listed;
    for (size_t i = 0; i < inputs.size(); ++i) {
      listed.json(format_json(inputs[i], i < files.size() ? files[i] : std::string()));
    }
    JsonObject o = json_record("trap", where);
    return with_source(o, where)
        .text("message", what)
        .integer("nan", stats.nan)
        .integer("pos_inf", stats.pos_inf)
        .integer("neg_inf", stats.neg_inf)
        .json("inputs", listed.array())
        .line();
  }
  out << where_text(where, ": " + what, "NaN/Inf TRAP at ") << "\n"
      << source_line(where) << "    nan=" << stats.nan << " +inf=" << stats.pos_inf
      << " -inf=" << stats.neg_inf << "\n";
  if (!inputs.empty()) out << "    the kernel's inputs before launch:\n";
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::istringstream lines(format_text(inputs[i]));
    for (std::string line; std::getline(lines, line);) out << "    " << line << "\n";
    if (i < files.size() && !files[i].empty()) out << "        saved as " << files[i] << "\n";
  }
  return out.str();
}

std::string format_wrong_input(const WrongInput& w, bool json) {
  if (json) {
    return json_record("wrong_input", w.where)
        .text("kind", w.kind)
        .integer("dim", w.dim)
        .text("given", w.given)
        .text("compiled_for", w.compiled_for)
        .text("message", w.message)
        .line();
  }
  return where_text(w.where, ": " + w.message, "WRONG INPUT at ") + "\n";
}

std::string format_guard(const GuardFinding& f, bool json) {
  std::ostringstream out;
  if (json) {
    JsonObject files;
    for (const auto& [what, file] : f.files) files.text(what.c_str(), file);
    JsonObject o = json_record("guard", f.where);
    return with_source(o, f.where)
        .text("kind", f.kind)
        .text("message", f.message)
        .integer("numel", f.numel)
        .integer("changed", f.changed)
        .integer("first_index", f.first_index)
        .text("writer", f.writer)
        .json("between", json_texts(f.between))
        .text("culprit", f.culprit)
        .json("files", files.object())
        .line();
  }
  out << where_text(f.where, ": " + f.message, "WRITE GUARD at ") << "\n" << source_line(f.where);
  if (f.changed >= 0) {
    out << "    " << f.changed << " of " << f.numel << " elements changed, the first at index "
        << f.first_index << "\n";
  }
  if (!f.writer.empty()) out << "    written by " << f.writer << "\n";
  if (!f.between.empty()) {
    out << "    kernels launched between writer and reader:";
    for (const std::string& k : f.between) out << " " << k << ";";
    out << "\n";
  }
  if (!f.writer.empty()) {
    out << "    changed by: " << (f.culprit.empty() ? "not known" : f.culprit) << "\n";
  }
  for (const auto& [what, file] : f.files) out << "    " << what << " saved as " << file << "\n";
  return out.str();
}

std::string format_scalar(const Where& where, const char* type, const std::string& value,
                          bool json) {
  if (json) return json_record("scalar", where).text("type", type).text("value", value).line();
  return where_text(where, " = " + value + " (" + type + ")") + "\n";
}

std::string format_launch(const Where& where, bool json) {
  if (json) return json_record("launch", where).line();
  return where_text(where) + "\n";
}

}  // namespace aoti_debug_printer
