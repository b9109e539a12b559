// The exported C ABI. Nothing thrown inside may cross it: every entry point
// runs its body through `guarded`, which reports and swallows.
#include "aoti_debug_printer.h"

#include "finding.h"
#include "json.h"
#include "kept.h"
#include "output.h"
#include "settings.h"
#include "shim.h"
#include "sources.h"

#include <torch/csrc/inductor/aoti_torch/utils.h>

#include <exception>
#include <optional>
#include <string>

using namespace aoti_debug_printer;

namespace {

template <typename F>
void guarded(const char* function, F&& body) noexcept {
  try {
    body();
  } catch (const c10::Error& e) {
    report_error(std::string(function) + ": " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    report_error(std::string(function) + ": " + e.what());
  } catch (...) {
    report_error(std::string(function) + ": unknown exception");
  }
}

const char* or_empty(const char* s) { return s ? s : ""; }

const at::Tensor* tensor_of(AtenTensorHandle h) {
  return h ? torch::aot_inductor::tensor_handle_to_tensor_pointer(h) : nullptr;
}

std::string float_text(double v) { return general_number(v, 17); }
}  // namespace

extern "C" {

void aoti_debug_printer_begin_run(void) {
  guarded(__func__, [] { begin_run(); });
}

void aoti_debug_printer_compiled_with(const char* inductor_config) {
  guarded(__func__, [&] { compiled_with(or_empty(inductor_config)); });
}

void aoti_debug_printer_sources(const char* table) {
  guarded(__func__, [&] { sources::set(table); });
}

void aoti_debug_printer_begin_run_with_end(void) {
  guarded(__func__, [] { begin_run(true); });
}

void aoti_debug_printer_end_run(void) {
  guarded(__func__, [] { end_run(); });
}

int32_t aoti_debug_printer_launch_at_level(int32_t level, int32_t phase, const char* kernel,
                                           int32_t flags) {
  const Level compiled = compiled_level(level);
  if (runtime_level() == Level::Off) {  // switched off: count the launch, nothing more
    if (phase == AOTI_DEBUG_PRINTER_BEFORE_LAUNCH)
      guarded(__func__, [&] { launch(compiled, Phase::BeforeLaunch, "", flags); });
    return 0;
  }
  int32_t failed = 0;
  guarded(__func__, [&] {
    failed = launch(compiled, static_cast<Phase>(phase), or_empty(kernel), flags).code;
  });
  return failed;
}

void aoti_debug_printer_records_end(void) {
  guarded(__func__, [] { records_end(); });
}

int32_t aoti_debug_printer_launch(int32_t phase, const char* kernel, int32_t flags) {
  // ABI 5 and older: a level-3 compile's launch events carry flag 2; those of
  // levels 1 and 2 behave alike.
  constexpr int32_t compiled_at_level_3 = 2;
  const int32_t level = flags & compiled_at_level_3 ? AOTI_DEBUG_PRINTER_LEVEL_KERNEL_NAMES
                                                    : AOTI_DEBUG_PRINTER_LEVEL_PRINT;
  return aoti_debug_printer_launch_at_level(level, phase, kernel, flags & ~compiled_at_level_3);
}

int32_t aoti_debug_printer_tensor_stored(int32_t level, int32_t phase, const char* kernel,
                                         const char* arg, const char* node, const char* why,
                                         const char* formula, int32_t role, AtenTensorHandle tensor,
                                         AtenTensorHandle statistics, int64_t slot) {
  if (runtime_level() == Level::Off) return 0;  // switched off: build nothing
  int32_t stop = 0;
  guarded(__func__, [&] {
    const at::Tensor* workspace = tensor_of(statistics);
    const std::optional<Stored> stored =
        workspace ? std::optional<Stored>(Stored{workspace, slot}) : std::nullopt;
    const Phase at = static_cast<Phase>(phase);
    const auto where_of = [&] {
      Where w = where_now(at, or_empty(kernel), or_empty(arg));
      w.node = or_empty(node);
      w.why = or_empty(why);
      w.formula = or_empty(formula);
      return w;
    };
    stop = record_tensor(compiled_level(level), at, static_cast<Role>(role), tensor_of(tensor),
                         where_of, stored)
               .code;
  });
  return stop;
}

void aoti_debug_printer_statistics_workspace(AtenTensorHandle workspace) {
  if (runtime_level() == Level::Off) return;  // switched off: the kernels keep nothing
  guarded(__func__, [&] { statistics_workspace(tensor_of(workspace)); });
}

AtenTensorHandle aoti_debug_printer_cpu_statistics(void) {
  // The handle of the thread's own tensor: never deleted by the caller.
  return reinterpret_cast<AtenTensorHandle>(const_cast<at::Tensor*>(kept::cpu_workspace()));
}

int64_t* aoti_debug_printer_keep_cpu_statistics(int64_t first, int64_t fields) {
  if (runtime_level() == Level::Off) return nullptr;  // switched off: the kernels keep nothing
  int64_t* slots = nullptr;
  guarded(__func__, [&] { slots = kept::keep_cpu(first, fields); });
  return slots;
}

int32_t aoti_debug_printer_tensor_computed(int32_t level, int32_t phase, const char* kernel,
                                           const char* arg, const char* node, const char* why,
                                           const char* formula, int32_t role,
                                           AtenTensorHandle tensor) {
  return aoti_debug_printer_tensor_stored(level, phase, kernel, arg, node, why, formula, role,
                                          tensor, nullptr, 0);
}

int32_t aoti_debug_printer_tensor_held(int32_t level, int32_t phase, const char* kernel,
                                       const char* arg, const char* node, const char* why,
                                       int32_t role, AtenTensorHandle tensor) {
  return aoti_debug_printer_tensor_computed(level, phase, kernel, arg, node, why, nullptr, role,
                                            tensor);
}

int32_t aoti_debug_printer_tensor_of_node(int32_t level, int32_t phase, const char* kernel,
                                          const char* arg, const char* node,
                                          AtenTensorHandle tensor) {
  return aoti_debug_printer_tensor_held(level, phase, kernel, arg, node, nullptr,
                                        AOTI_DEBUG_PRINTER_ROLE_UNKNOWN, tensor);
}

int32_t aoti_debug_printer_tensor(int32_t level, int32_t phase, const char* kernel, const char* arg,
                                  AtenTensorHandle tensor) {
  return aoti_debug_printer_tensor_of_node(level, phase, kernel, arg, nullptr, tensor);
}

void aoti_debug_printer_int64(int32_t level, int32_t phase, const char* kernel, const char* arg,
                              int64_t value) {
  if (runtime_level() == Level::Off) return;  // switched off: build nothing
  guarded(__func__, [&] {
    record_scalar(compiled_level(level),
                  where_now(static_cast<Phase>(phase), or_empty(kernel), or_empty(arg)), "int64",
                  std::to_string(value));
  });
}

void aoti_debug_printer_float64(int32_t level, int32_t phase, const char* kernel, const char* arg,
                                double value) {
  if (runtime_level() == Level::Off) return;  // switched off: build nothing
  guarded(__func__, [&] {
    record_scalar(compiled_level(level),
                  where_now(static_cast<Phase>(phase), or_empty(kernel), or_empty(arg)), "float64",
                  float_text(value));
  });
}

void aoti_debug_printer_bool(int32_t level, int32_t phase, const char* kernel, const char* arg,
                             int32_t value) {
  if (runtime_level() == Level::Off) return;  // switched off: build nothing
  guarded(__func__, [&] {
    record_scalar(compiled_level(level),
                  where_now(static_cast<Phase>(phase), or_empty(kernel), or_empty(arg)), "bool",
                  value ? "true" : "false");
  });
}

int32_t aoti_debug_printer_set_option(const char* key, const char* value) {
  int32_t rc = 1;
  guarded(__func__, [&] {
    set_option(or_empty(key), or_empty(value));
    rc = 0;
  });
  return rc;
}

int32_t aoti_debug_printer_check_input(int32_t level, const char* arg, const char* name,
                                       const char* compiled_for, AtenTensorHandle tensor) {
  if (runtime_level() == Level::Off) return 0;
  int32_t stop = 0;
  guarded(__func__, [&] {
    stop = check_input(compiled_level(level), or_empty(arg), or_empty(name), or_empty(compiled_for),
                       tensor_of(tensor))
               .code;
  });
  return stop;
}

const char* aoti_debug_printer_stop_message(void) {
  // Nothing here throws: the thread's own string.
  return stop_message().c_str();
}

const aoti_debug_printer_api* aoti_debug_printer_get_api(uint32_t abi_version) {
  static const aoti_debug_printer_api api = {
      AOTI_DEBUG_PRINTER_ABI_VERSION,
      sizeof(aoti_debug_printer_api),
      &aoti_debug_printer_begin_run,
      &aoti_debug_printer_launch,
      &aoti_debug_printer_tensor,
      &aoti_debug_printer_int64,
      &aoti_debug_printer_float64,
      &aoti_debug_printer_bool,
      &aoti_debug_printer_tensor_of_node,
      &aoti_debug_printer_tensor_held,
      &aoti_debug_printer_begin_run_with_end,
      &aoti_debug_printer_end_run,
      &aoti_debug_printer_tensor_computed,
      &aoti_debug_printer_compiled_with,
      &aoti_debug_printer_launch_at_level,
      &aoti_debug_printer_records_end,
      &aoti_debug_printer_check_input,
      &aoti_debug_printer_sources,
      &aoti_debug_printer_tensor_stored,
      &aoti_debug_printer_statistics_workspace,
      &aoti_debug_printer_stop_message,
      &aoti_debug_printer_cpu_statistics,
      &aoti_debug_printer_keep_cpu_statistics,
  };
  // One table serves every version we support: it only grew at the end.
  const bool supported = abi_version >= AOTI_DEBUG_PRINTER_OLDEST_ABI_VERSION &&
                         abi_version <= AOTI_DEBUG_PRINTER_ABI_VERSION;
  return supported ? &api : nullptr;
}

void aoti_torch_print_tensor_handle(AtenTensorHandle self, const char* msg) {
  guarded(__func__, [&] {
    record_tensor(Level::Print, Phase::Upstream, Role::Unknown, tensor_of(self), [&] {
      Where w;
      w.label = or_empty(msg);
      return w;
    });
  });
}

void aoti_torch_save_tensor_handle(AtenTensorHandle self, const char* tensor_name,
                                   const char* launch_prefix, const char* kernel_name) {
  guarded(__func__, [&] {
    record_tensor(Level::Save, Phase::Upstream, Role::Unknown, tensor_of(self), [&] {
      // Upstream's own label, outside our launch events.
      Where w = where_now(Phase::Upstream, or_empty(kernel_name), or_empty(tensor_name));
      w.label = or_empty(launch_prefix);
      return w;
    });
  });
}

}  // extern "C"
