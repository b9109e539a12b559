#include "record.h"

#include "aoti_debug_printer.h"
#include "device.h"

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
  if (std::isnan(v)) return json ? "null" : "nan";
  if (std::isinf(v)) return json ? "null" : (v > 0 ? "inf" : "-inf");
  char buf[40];
  std::snprintf(buf, sizeof buf, json ? "%.17g" : "%.6g", v);
  return buf;
}

std::string scalar_text(const c10::Scalar& s, bool json) {
  if (s.type() == c10::ScalarType::UInt64) return std::to_string(s.toUInt64());
  if (s.isIntegral(false)) return std::to_string(s.toLong());
  if (s.isBoolean()) return s.toBool() ? "true" : "false";
  return number(s.toDouble(), json);
}

template <typename V>
std::string list(const std::vector<V>& xs, bool quote = false) {
  std::string out = "[";
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i) out += ", ";
    if constexpr (std::is_same_v<V, std::string>) {
      out += quote ? json_string(xs[i]) : xs[i];
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

// "[aoti-debug-printer] PHASE KERNEL ARG<detail> (run R, launch L, call C)"
std::string where_text(const Where& w, const std::string& detail = "") {
  std::string head = "[aoti-debug-printer] ";
  if (w.rank >= 0) head += "rank " + std::to_string(w.rank) + " ";
  head += escaped(w.phase, Escape::Text);
  if (!w.kernel.empty()) head += " " + escaped(w.kernel, Escape::Text);
  if (!w.arg.empty()) head += " " + escaped(w.arg, Escape::Text);
  head += detail;
  if (w.launch >= 0) {
    head += " (run " + std::to_string(w.run) + ", launch " + std::to_string(w.launch) + ", call " +
            std::to_string(w.call) + ")";
  } else if (w.run >= 0) {
    head += " (run " + std::to_string(w.run) + ")";
  }
  return head;
}

}  // namespace

std::string dtype_name(c10::ScalarType t) {
  // torch's own Python spelling (float32, bfloat16, float8_e4m3fn, ...).
  return std::string(c10::getDtypeNames(t).first);
}

std::string json_string(const std::string& s) { return "\"" + escaped(s, Escape::Json) + "\""; }

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
  return "{\"event\": \"environment\", \"run\": " + std::to_string(where.run) +
         ", \"rank\": " + std::to_string(where.rank) +
         ", \"pid\": " + std::to_string(static_cast<int64_t>(getpid())) +
         ", \"process\": " + json_string(process_token()) +
         ", \"torch\": " + json_string(AOTI_DEBUG_PRINTER_TORCH_VERSION) +
         ", \"device\": " + json_string(name) + ", \"capability\": " + json_string(capability) +
         ", \"tf32_matmul\": " + json_flag([&] { return ctx.allowTF32CuBLAS(); }) +
         ", \"tf32_cudnn\": " + json_flag([&] { return ctx.allowTF32CuDNN(); }) +
         ", \"matmul_precision\": " + json_string(matmul_precision_name()) +
         ", \"bf16_reduction\": " + json_flag([&] { return ctx.allowBF16ReductionCuBLAS(); }) +
         ", \"fp16_reduction\": " + json_flag([&] { return ctx.allowFP16ReductionCuBLAS(); }) +
         ", \"deterministic\": " + json_flag([&] { return ctx.deterministicAlgorithms(); }) +
         ", \"inductor_config\": " + json_string(where.inductor_config) +
         ", \"schema\": " + std::to_string(AOTI_DEBUG_PRINTER_RECORD_SCHEMA) + "}\n";
}

std::string json_where(const Where& w) {
  return "\"phase\": " + json_string(w.phase) + ", \"kernel\": " + json_string(w.kernel) +
         ", \"arg\": " + json_string(w.arg) + ", \"run\": " + std::to_string(w.run) +
         ", \"launch\": " + std::to_string(w.launch) + ", \"call\": " + std::to_string(w.call) +
         ", \"rank\": " + std::to_string(w.rank) + ", \"node\": " + json_string(w.node) +
         ", \"role\": " + json_string(w.role) + ", \"why\": " + json_string(w.why) +
         (w.formula.empty() ? "" : ", \"formula\": " + json_string(w.formula)) +
         ", \"pid\": " + std::to_string(static_cast<int64_t>(getpid())) +
         ", \"process\": " + json_string(process_token()) +
         ", \"schema\": " + std::to_string(AOTI_DEBUG_PRINTER_RECORD_SCHEMA);
}

at::Tensor to_host(const at::Tensor& t) { return t.device().is_cpu() ? t : t.to(at::kCPU); }

Contents host_contents(const at::Tensor& host, int64_t max_values, bool with_fingerprint) {
  Contents c;
  c.stats = compute_stats(host, with_fingerprint);
  if (c.stats.unsupported.empty() && takes_values(host, max_values)) {
    c.values = host;
  }
  return c;
}

Contents read_contents(const at::Tensor& t, int64_t max_values, bool with_fingerprint) {
  if (!device::computes_stats_on(t)) {
    return host_contents(to_host(t), max_values, with_fingerprint && t.device().is_cpu());
  }
  device::Snapshot snap = device::snapshot(t, takes_values(t, max_values), with_fingerprint);
  return {std::move(snap.stats), std::move(snap.values)};
}

TensorRecord describe(const Where& where, const at::Tensor& t, const Contents& contents) {
  TensorRecord r;
  r.where = where;
  r.defined = true;
  r.shape = t.sizes().vec();
  r.dtype = dtype_name(t.scalar_type());
  r.device = t.device().str();
  // torch's spelling: torch.strided, torch.sparse_coo, ...
  r.layout = c10::str(t.layout());
  for (char& ch : r.layout) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  r.numel = t.numel();
  if (t.layout() == at::kStrided) {
    r.stride = t.strides().vec();
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

}  // namespace

bool can_record_later(const at::Tensor& t, int64_t max_values) {
  return device::can_snapshot_later(t, takes_values(t, max_values));
}

std::unique_ptr<LateRecord> record_later(const Where& where, const at::Tensor& t,
                                         int64_t max_values, bool json) {
  std::shared_ptr<device::Landing> landing = device::snapshot_later(t, takes_values(t, max_values));
  if (!landing) return nullptr;
  return std::make_unique<DeviceRecord>(describe(where, t, Contents{}), std::move(landing), json);
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
    out << "{\"event\": \"cuda_error\", " << json_where(where)
        << ", \"error\": " << json_string(error) << ", \"args\": [";
    for (size_t i = 0; i < args.size(); ++i) {
      const WatchedArg& a = args[i];
      out << (i ? ", " : "") << "{\"arg\": " << json_string(a.name)
          << ", \"shape\": " << list(a.shape) << ", \"dtype\": " << json_string(a.dtype)
          << ", \"device\": " << json_string(a.device)
          << ", \"data_ptr\": " << json_string(hex(a.data)) << ", \"span_bytes\": " << a.span
          << ", \"inside_storage\": "
          << (holds(a.storage, a.storage_bytes, a.data, a.span) ? "true" : "false")
          << ", \"inside_allocation\": "
          << (a.allocation_known
                  ? (holds(a.allocation, a.allocation_bytes, a.data, a.span) ? "true" : "false")
                  : "null");
      if (!a.saved_as.empty()) out << ", \"file\": " << json_string(a.saved_as);
      out << "}";
    }
    out << "]}\n";
    return out.str();
  }
  Where w = where;
  w.phase = "CUDA ERROR at " + w.phase;
  out << where_text(w, ": " + error) << "\n";
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
  std::ostringstream out;
  out << where_text(r.where) << "\n";
  if (!r.problem.empty()) {
    out << "    " << r.problem << "\n";
    return out.str();
  }
  out << "    shape=" << list(r.shape) << " stride=" << list(r.stride) << " dtype=" << r.dtype
      << " device=" << r.device << " layout=" << r.layout
      << " contiguous=" << (r.contiguous ? "true" : "false") << " numel=" << r.numel << "\n";
  const TensorStats& s = r.stats;
  if (!s.unsupported.empty()) {
    out << "    " << s.unsupported << "\n";
    return out.str();
  }
  out << "    " << (s.of_modulus ? "|z| " : "");
  if (s.min) {
    out << "min=" << scalar_text(*s.min, false) << " max=" << scalar_text(*s.max, false)
        << " mean=" << number(s.mean, false) << " std=" << number(s.std, false)
        << " absmax=" << number(s.absmax, false);
  } else {
    out << "no finite values";
  }
  out << "\n    finite=" << s.finite << " nan=" << s.nan << " +inf=" << s.pos_inf
      << " -inf=" << s.neg_inf << " zeros=" << s.zeros << "\n";
  if (!r.values.empty()) out << "    values=" << list(r.values) << "\n";
  return out.str();
}

std::string format_json(const TensorRecord& r, const std::string& extra) {
  std::ostringstream out;
  out << "{\"event\": \"tensor\", " << json_where(r.where);
  if (!r.problem.empty()) {
    out << ", \"problem\": " << json_string(r.problem) << extra << "}";
    return out.str();
  }
  out << ", \"shape\": " << list(r.shape) << ", \"stride\": " << list(r.stride)
      << ", \"dtype\": " << json_string(r.dtype) << ", \"device\": " << json_string(r.device)
      << ", \"layout\": " << json_string(r.layout)
      << ", \"contiguous\": " << (r.contiguous ? "true" : "false") << ", \"numel\": " << r.numel;
  const TensorStats& s = r.stats;
  if (!s.unsupported.empty()) {
    out << ", \"stats\": null, \"problem\": " << json_string(s.unsupported);
  } else {
    out << ", \"stats\": {\"of\": " << (s.of_modulus ? "\"modulus\"" : "\"value\"")
        << ", \"min\": " << (s.min ? scalar_text(*s.min, true) : "null")
        << ", \"max\": " << (s.max ? scalar_text(*s.max, true) : "null")
        << ", \"mean\": " << number(s.mean, true) << ", \"std\": " << number(s.std, true)
        << ", \"absmax\": " << (s.min ? number(s.absmax, true) : "null")
        << ", \"finite\": " << s.finite << ", \"nan\": " << s.nan << ", \"pos_inf\": " << s.pos_inf
        << ", \"neg_inf\": " << s.neg_inf << ", \"zeros\": " << s.zeros << "}";
  }
  if (!r.values.empty()) out << ", \"values\": " << list(r.values, true);
  out << extra << "}";
  return out.str();
}

std::string format_trap(const Where& where, const TensorStats& stats, const std::string& what,
                        const std::vector<TensorRecord>& inputs, bool json,
                        const std::vector<std::string>& files) {
  std::ostringstream out;
  if (json) {
    out << "{\"event\": \"trap\", " << json_where(where) << ", \"message\": " << json_string(what)
        << ", \"nan\": " << stats.nan << ", \"pos_inf\": " << stats.pos_inf
        << ", \"neg_inf\": " << stats.neg_inf << ", \"inputs\": [";
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::string file = i < files.size() && !files[i].empty()
                                   ? ", \"file\": " + json_string(files[i])
                                   : std::string();
      out << (i ? ", " : "") << format_json(inputs[i], file);
    }
    out << "]}\n";
    return out.str();
  }
  Where w = where;
  w.phase = "NaN/Inf TRAP at " + w.phase;
  out << where_text(w, ": " + what) << "\n    nan=" << stats.nan << " +inf=" << stats.pos_inf
      << " -inf=" << stats.neg_inf << "\n";
  if (!inputs.empty()) out << "    the kernel's inputs before launch:\n";
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::istringstream lines(format_text(inputs[i]));
    for (std::string line; std::getline(lines, line);) out << "    " << line << "\n";
    if (i < files.size() && !files[i].empty()) out << "        saved as " << files[i] << "\n";
  }
  return out.str();
}

std::string format_guard(const GuardFinding& f, bool json) {
  std::ostringstream out;
  if (json) {
    out << "{\"event\": \"guard\", " << json_where(f.where) << ", \"kind\": " << json_string(f.kind)
        << ", \"message\": " << json_string(f.message) << ", \"numel\": " << f.numel
        << ", \"changed\": " << f.changed << ", \"first_index\": " << f.first_index
        << ", \"writer\": " << json_string(f.writer) << ", \"between\": [";
    for (size_t i = 0; i < f.between.size(); ++i)
      out << (i ? ", " : "") << json_string(f.between[i]);
    out << "], \"culprit\": " << json_string(f.culprit) << ", \"files\": {";
    for (size_t i = 0; i < f.files.size(); ++i) {
      out << (i ? ", " : "") << json_string(f.files[i].first) << ": "
          << json_string(f.files[i].second);
    }
    out << "}}\n";
    return out.str();
  }
  Where w = f.where;
  w.phase = "WRITE GUARD at " + w.phase;
  out << where_text(w, ": " + f.message) << "\n";
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
  if (json) {
    return "{\"event\": \"scalar\", " + json_where(where) + ", \"type\": " + json_string(type) +
           ", \"value\": " + json_string(value) + "}\n";
  }
  return where_text(where, " = " + value + " (" + type + ")") + "\n";
}

std::string format_launch(const Where& where, bool json) {
  if (json) return "{\"event\": \"launch\", " + json_where(where) + "}\n";
  return where_text(where) + "\n";
}

}  // namespace aoti_debug_printer
