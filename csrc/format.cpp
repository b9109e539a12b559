#include "format.h"

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
std::string number(double v, bool json) { return json ? json_number(v) : text_number(v); }

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

std::string hex(uintptr_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIxPTR, v);
  return buf;
}

// "[begin, end) inside" for a span and the range that should hold it.
bool holds(uintptr_t base, uint64_t size, uintptr_t data, uint64_t span) {
  return data >= base && data + span <= base + size;
}

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

std::string dtype_name(c10::ScalarType t) {
  // torch's own Python spelling (float32, bfloat16, float8_e4m3fn, ...).
  return std::string(c10::getDtypeNames(t).first);
}

std::string layout_name(c10::Layout layout) {
  std::string name = c10::str(layout);
  for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return name;
}

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

std::string format_cuda_error(const Where& where, const std::string& error,
                              const std::vector<WatchedArg>& args, bool json) {
  std::ostringstream out;
  if (json) {
    JsonList listed;
    for (const WatchedArg& a : args) {
      JsonObject arg;
      arg.text("arg", a.name)
          .json("shape", json_integers(a.shape))
          .text("dtype", dtype_name(a.dtype))
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
    out << "    " << a.name << ": shape=" << list(a.shape) << " dtype=" << dtype_name(a.dtype)
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
  if (r.save_waited_ms > 0) o.number("save_waited_ms", r.save_waited_ms);
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
