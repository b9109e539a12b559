// aoti_debug_printer._C: the shim's functions for Python. The JIT wrapper
// calls `record`, `launch` and `begin_run`; tests call the rest. Everything
// goes through shim.h, the same code the C ABI runs.
#include "aoti_debug_printer.h"
#include "device.h"
#include "finding.h"
#include "graphs.h"
#include "guard.h"
#include "output.h"
#include "record.h"
#include "save.h"
#include "saver.h"
#include "settings.h"
#include "shim.h"
#include "sources.h"
#include "stats.h"

#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/inductor/aoti_torch/utils.h>
// The Tensor caster and pybind11's STL casters: what _C's signatures take,
// without torch/extension.h's whole C++ frontend (18 of the 45 s g++ took).
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <dlfcn.h>

namespace py = pybind11;
using namespace aoti_debug_printer;

namespace {

// See begin_capturable below.
struct Capturable {
  explicit Capturable(bool began) : began(began) {}
  Capturable(const Capturable&) = delete;
  Capturable& operator=(const Capturable&) = delete;
  ~Capturable() {
    if (!began) return;
    try {
      end_capturable();
    } catch (const std::exception& e) {
      report_error(std::string("the end of a captured part of a run: ") + e.what());
    } catch (...) {
      report_error("the end of a captured part of a run: unknown exception");
    }
  }
  const bool began;  // a capture, which this part's end ends
};

py::object scalar_to_py(const std::optional<c10::Scalar>& s) {
  if (!s) return py::none();
  if (s->type() == c10::ScalarType::UInt64) return py::int_(s->toUInt64());
  if (s->isIntegral(false)) return py::int_(s->toLong());
  return py::float_(s->toDouble());
}

// `on`: "auto" (where the record path computes them), "host" (one copy,
// then the CPU), "device" (the fused kernel; CUDA tensors only). With
// `fingerprint`, the same pass computes the write guard's fingerprint.
py::dict stats_dict(const at::Tensor& t, const std::string& on, bool fingerprint) {
  TensorStats s;
  {
    py::gil_scoped_release no_gil;
    if (on == "auto") {
      s = read_contents(t, 0, fingerprint).stats;
    } else if (on == "host") {
      s = compute_stats(to_host(t), fingerprint && t.device().is_cpu());
    } else if (on == "device") {
      TORCH_CHECK(device::computes_stats_on(t), "no device statistics for a tensor on ", t.device(),
                  " in this build");
      s = device::snapshot(t, false, fingerprint).stats;
    } else {
      throw std::invalid_argument("on must be 'auto', 'host' or 'device', got '" + on + "'");
    }
  }
  py::dict d;
  d["numel"] = s.numel;
  d["finite"] = s.finite;
  d["nan"] = s.nan;
  d["pos_inf"] = s.pos_inf;
  d["neg_inf"] = s.neg_inf;
  d["zeros"] = s.zeros;
  d["min"] = scalar_to_py(s.min);
  d["max"] = scalar_to_py(s.max);
  d["mean"] = s.mean;
  d["std"] = s.std;
  d["absmax"] = s.absmax;
  d["of"] = s.of_modulus ? "modulus" : "value";
  d["unsupported"] = s.unsupported;
  // When asked for, and the pass read the tensor's own memory.
  d["fingerprint"] = s.fingerprint ? py::object(py::int_(*s.fingerprint)) : py::none();
  return d;
}

// Python values in the JIT wrapper: tensors, SymInt-derived ints, floats,
// bools. Anything else is recorded by its type name.
void record(int32_t level, int32_t phase, const std::string& kernel, const std::string& arg,
            py::handle value, const std::string& node, const std::string& why, int32_t role,
            const std::string& formula) {
  const Level compiled = compiled_level(level);
  const Phase at = static_cast<Phase>(phase);
  const auto where_of = [&] {
    Where w = where_now(at, kernel, arg);
    w.node = node;
    w.why = why;
    w.formula = formula;
    w.role = static_cast<Role>(role);
    return w;
  };
  Stop stop;
  if (THPVariable_Check(value.ptr())) {
    const at::Tensor t = THPVariable_Unpack(value.ptr());
    py::gil_scoped_release no_gil;
    stop = record_tensor(compiled, at, static_cast<Role>(role), &t, where_of);
  } else if (value.is_none()) {
    stop = record_tensor(compiled, at, static_cast<Role>(role), nullptr, where_of);
  } else if (py::isinstance<py::bool_>(value)) {
    record_scalar(compiled, where_of(), "bool", value.cast<bool>() ? "true" : "false");
  } else if (py::isinstance<py::int_>(value)) {
    record_scalar(compiled, where_of(), "int64", py::str(value));
  } else if (py::isinstance<py::float_>(value)) {
    record_scalar(compiled, where_of(), "float64", py::str(py::repr(value)));
  } else {
    record_scalar(compiled, where_of(), Py_TYPE(value.ptr())->tp_name, py::str(value));
  }
  if (stop.code != 0) throw std::runtime_error("aoti-debug-printer: " + stop.message);
}

// The JIT wrapper's launch event: a CUDA error found after a kernel becomes
// a Python exception that names it.
void launch_event(int32_t level, int32_t phase, const std::string& kernel, int32_t flags) {
  Stop stop;
  {
    py::gil_scoped_release no_gil;
    stop = launch(compiled_level(level), static_cast<Phase>(phase), kernel, flags);
  }
  if (stop.code != 0) throw std::runtime_error("aoti-debug-printer: " + stop.message);
}

std::string library_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&aoti_debug_printer_get_api), &info) == 0 || !info.dli_fname) {
    throw std::runtime_error("cannot locate the shim library");
  }
  return info.dli_fname;
}

// PyTorch's own aoti_torch_print_tensor_handle, looked up in libtorch itself
// (our library exports the same name), for the benchmark and tests.
void upstream_print_tensor_handle(const at::Tensor& t, const std::string& msg) {
  using Fn = void (*)(AtenTensorHandle, const char*);
  static Fn fn = [] {
    void* lib = dlopen("libtorch_cpu.so", RTLD_NOW | RTLD_NOLOAD);
    void* sym = lib ? dlsym(lib, "aoti_torch_print_tensor_handle") : nullptr;
    if (!sym) throw std::runtime_error("libtorch_cpu.so has no aoti_torch_print_tensor_handle");
    return reinterpret_cast<Fn>(sym);
  }();
  at::Tensor copy = t;
  py::gil_scoped_release no_gil;
  fn(torch::aot_inductor::tensor_pointer_to_tensor_handle(&copy), msg.c_str());
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "C++ shim of aoti-debug-printer";
  m.attr("ABI_VERSION") = AOTI_DEBUG_PRINTER_ABI_VERSION;
  m.attr("RECORD_SCHEMA") = AOTI_DEBUG_PRINTER_RECORD_SCHEMA;
  m.attr("WRITES_UNSEEN") = static_cast<int>(AOTI_DEBUG_PRINTER_WRITES_UNSEEN);
  m.attr("RECORDS_END") = static_cast<int>(AOTI_DEBUG_PRINTER_RECORDS_END);
  m.attr("RECORDS_CONTINUE") = static_cast<int>(AOTI_DEBUG_PRINTER_RECORDS_CONTINUE);
  m.attr("CONSTANTS_HOLD") = static_cast<int>(AOTI_DEBUG_PRINTER_CONSTANTS_HOLD);
  m.attr("WHY_CONSTANT") = AOTI_DEBUG_PRINTER_WHY_CONSTANT;
  m.attr("LEVEL_SAVE") = static_cast<int>(AOTI_DEBUG_PRINTER_LEVEL_SAVE);
  m.attr("LEVEL_PRINT") = static_cast<int>(AOTI_DEBUG_PRINTER_LEVEL_PRINT);
  m.attr("LEVEL_KERNEL_NAMES") = static_cast<int>(AOTI_DEBUG_PRINTER_LEVEL_KERNEL_NAMES);
  m.attr("ANNOUNCE") = static_cast<int>(AOTI_DEBUG_PRINTER_ANNOUNCE);
  m.attr("UNSELECTED") = static_cast<int>(AOTI_DEBUG_PRINTER_UNSELECTED);
  m.attr("BEFORE_LAUNCH") = static_cast<int>(AOTI_DEBUG_PRINTER_BEFORE_LAUNCH);
  m.attr("AFTER_LAUNCH") = static_cast<int>(AOTI_DEBUG_PRINTER_AFTER_LAUNCH);
  m.attr("MODEL_INPUT") = static_cast<int>(AOTI_DEBUG_PRINTER_MODEL_INPUT);
  m.attr("ROLE_UNKNOWN") = static_cast<int>(AOTI_DEBUG_PRINTER_ROLE_UNKNOWN);
  m.attr("ROLE_READ") = static_cast<int>(AOTI_DEBUG_PRINTER_ROLE_READ);
  m.attr("ROLE_WRITE") = static_cast<int>(AOTI_DEBUG_PRINTER_ROLE_WRITE);
  m.attr("ROLE_READ_WRITE") = static_cast<int>(AOTI_DEBUG_PRINTER_ROLE_READ_WRITE);
  m.attr("ROLE_ACCUMULATE") = static_cast<int>(AOTI_DEBUG_PRINTER_ROLE_ACCUMULATE);
  m.attr("STORED_SWITCH") = static_cast<int>(AOTI_DEBUG_PRINTER_STORED_SWITCH);
  m.attr("STORED_NAN") = static_cast<int>(AOTI_DEBUG_PRINTER_STORED_NAN);
  m.attr("STORED_POS_INF") = static_cast<int>(AOTI_DEBUG_PRINTER_STORED_POS_INF);
  m.attr("STORED_NEG_INF") = static_cast<int>(AOTI_DEBUG_PRINTER_STORED_NEG_INF);
  m.attr("STORED_ZEROS") = static_cast<int>(AOTI_DEBUG_PRINTER_STORED_ZEROS);
  m.attr("STORED_MAX_KEY") = static_cast<int>(AOTI_DEBUG_PRINTER_STORED_MAX_KEY);
  m.attr("STORED_MIN_KEY") = static_cast<int>(AOTI_DEBUG_PRINTER_STORED_MIN_KEY);
  m.attr("STORED_SUM") = static_cast<int>(AOTI_DEBUG_PRINTER_STORED_SUM);
  m.attr("STORED_SUM_OF_SQUARES") = static_cast<int>(AOTI_DEBUG_PRINTER_STORED_SUM_OF_SQUARES);
  m.attr("STORED_SHIFT") = static_cast<int>(AOTI_DEBUG_PRINTER_STORED_SHIFT);
  m.attr("STORED_FINITE") = static_cast<int>(AOTI_DEBUG_PRINTER_STORED_FINITE);
  m.attr("STORED_SLOT") = static_cast<int>(AOTI_DEBUG_PRINTER_STORED_SLOT);

  m.def(
      "begin_run",
      [](bool with_end, const std::string& inductor_config, const std::string& sources) {
        Stop stop;
        {
          py::gil_scoped_release no_gil;
          begin_run(with_end);
          compiled_with(inductor_config);
          sources::set(sources.c_str());
          // The JIT wrapper's runs whose kernels a CUDA graph replays run no
          // launch event outside it: the trap's stop comes here.
          stop = stop_for_an_earlier_replay();
        }
        if (stop.code != 0) throw std::runtime_error("aoti-debug-printer: " + stop.message);
      },
      py::arg("with_end") = false, py::arg("inductor_config") = "", py::arg("sources") = "",
      "Start a new run on this thread (with_end: end_run will end it, and CUDA records may wait "
      "for their statistics until then; inductor_config: the digest of the config its program "
      "was compiled with; sources: where its nodes came from, see aoti_debug_printer_sources). "
      "Raises RuntimeError where the trap fired at a replay of a captured CUDA graph since.");
  // The object's end is the capturable part's: the generated function holds
  // it in a local, which CPython drops as the function returns, while the
  // graph is still being captured. (A line before each return would need a
  // hook in Inductor's wrapper, which none of its releases has.)
  py::class_<Capturable>(m, "Capturable",
                         "A part of the run that a CUDA graph may capture; see begin_capturable.");
  m.def(
      "begin_capturable",
      [] {
        py::gil_scoped_release no_gil;
        return std::make_unique<Capturable>(begin_capturable());
      },
      "Begin a part of this thread's run that a CUDA graph may capture (a function of the JIT "
      "wrapper that cudagraph trees capture). Where the current stream is capturing, its records "
      "are captured, and the returned object's end captures the host call that writes them at "
      "each replay; elsewhere nothing happens.");
  m.def(
      "end_run",
      [] {
        py::gil_scoped_release no_gil;
        end_run();
      },
      "End this thread's run: every record it took is written.");
  m.def(
      "wait_for_replays",
      [] {
        py::gil_scoped_release no_gil;
        graphs::wait_for_replays();
      },
      "Return once every replay of a captured CUDA graph that has run on the GPU has its records "
      "written (the writer thread writes them; a run that begins outside a graph waits too).");
  m.def(
      "records_end",
      [] {
        py::gil_scoped_release no_gil;
        records_end();
      },
      "End the records of the last launch event that said RECORDS_END: the statistics they "
      "queued go to the GPU now.");
  m.def("launch", &launch_event, py::arg("level"), py::arg("phase"), py::arg("kernel"),
        py::arg("flags"),
        "Mark a kernel launch of a model compiled at `level`; raises RuntimeError when a CUDA "
        "error is found after a kernel.");
  m.def("record", &record, py::arg("level"), py::arg("phase"), py::arg("kernel"), py::arg("arg"),
        py::arg("value"), py::arg("node") = "", py::arg("why") = "",
        py::arg("role") = static_cast<int>(AOTI_DEBUG_PRINTER_ROLE_UNKNOWN),
        py::arg("formula") = "",
        "Print or save one kernel argument of a model compiled at `level`, as the run-time level "
        "says (node: the exported program's node it holds; why: "
        "the reason it holds none; role: AOTI_DEBUG_PRINTER_ROLE_*; formula: how the value it "
        "holds is computed from the program's values, JSON).");
  m.def("stats", &stats_dict, py::arg("tensor"), py::arg("on") = "auto",
        py::arg("fingerprint") = false,
        "The fused statistics of a tensor (with the write guard's fingerprint when asked).");
  m.def(
      "fingerprint",
      [](const at::Tensor& t) -> std::optional<uint64_t> {
        py::gil_scoped_release no_gil;
        return guard::fingerprint(t);
      },
      py::arg("tensor"), "The write guard's fingerprint of a tensor, computed alone.");
  m.def(
      "has_device_stats", [](const at::Tensor& t) { return device::computes_stats_on(t); },
      py::arg("tensor"));
  m.def("kernel_patterns", &kernel_patterns, py::arg("spec"),
        "The kernel filter's patterns: \"{a, b*}\" -> [\"a\", \"b*\"].");
  m.def("kernel_filter_selects", &kernel_filter_selects, py::arg("patterns"), py::arg("kernel"),
        "Whether the patterns select the kernel (none: every kernel).");
  m.def("set_option", &set_option, py::arg("key"), py::arg("value"));
  m.def("get_option", &get_option, py::arg("key"));
  m.def(
      "options",
      [] {
        py::list out;
        for (const OptionInfo& o : options()) out.append(py::make_tuple(o.key, o.env, o.doc));
        return out;
      },
      "The run-time options as (key, environment variable, meaning), in the table's order.");
  m.def("tensors_read", &aoti_debug_printer::ReadsWhileUnchanged::tensors_read,
        "How many tensors printed records have read, in all threads: a tensor recorded again "
        "while no kernel wrote it since is read once.");
  m.def("save_failures", &save_failures);
  m.def("wait_for_saves", &aoti_debug_printer::saver::wait_for_saves,
        py::call_guard<py::gil_scoped_release>(),
        "Returns once every snapshot level 1 has queued in this process is written.");
  m.def("safe_name_part", &safe_name_part, py::arg("name"));
  m.def("package_loaded", &note_package_loaded, py::arg("path"),
        "A .pt2 this process loaded: a finding's repro line names it where it is the only one.");
  m.def("library_path", &library_path, "Absolute path of libaoti_debug_printer.so.");
  m.def("cuda_statistics_unavailable", &aoti_debug_printer::device::cuda_statistics_unavailable,
        "Why this build has no CUDA statistics kernels (statistics of CUDA tensors are then "
        "computed after a copy to the host); \"\" where it has them.");
  m.def("upstream_print_tensor_handle", &upstream_print_tensor_handle, py::arg("tensor"),
        py::arg("msg"), "PyTorch's built-in print (from libtorch), for comparisons.");
}
