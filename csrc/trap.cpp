#include "trap.h"

#include "aoti_debug_printer.h"
#include "format.h"
#include "save.h"

namespace aoti_debug_printer::trap {

int64_t fires_on(const TensorStats& s, bool nan_only) {
  return nan_only ? s.nan : s.nan + s.pos_inf + s.neg_inf;
}

std::string what_fired(const Where& where) {
  return where.phase == Phase::ModelInput
             ? "model input " + where.arg + " already holds NaN/Inf: no kernel made it"
             : "kernel " + where.kernel + " made NaN/Inf in " + where.arg;
}

std::string stop_message(const Where& where) {
  return where.phase == Phase::ModelInput
             ? "NaN/Inf trap: model input " + where.arg + " holds NaN/Inf"
             : "NaN/Inf trap: kernel " + where.kernel + " (launch " + std::to_string(where.launch) +
                   ") made NaN/Inf in " + where.arg;
}

std::string where_only_infinities(const TensorStats& stats) {
  // Attention masks are made of -inf on purpose: the one switch that lets
  // such a model run, said where it would.
  return stats.nan == 0 ? " (infinities only; where they are meant, as an attention mask's -inf, "
                          "AOTI_DEBUG_PRINTER_TRAP=nan traps NaN only)"
                        : "";
}

std::optional<Finding> check(const Settings& settings, const Where& where, const TensorStats& stats,
                             std::vector<WatchedArg>& watched) {
  if (fires_on(stats, settings.trap_nan_only) == 0) return std::nullopt;
  const bool json = settings.format == Format::Jsonl;
  Finding f;
  f.code = AOTI_DEBUG_PRINTER_STOPPED_BY_TRAP;
  f.message = stop_message(where) + where_only_infinities(stats);
  if (where.phase == Phase::ModelInput) {
    // No kernel to repro: the model was given it.
    f.record = format_trap(where, stats, what_fired(where), {}, json);
    return f;
  }
  if (where.phase != Phase::AfterLaunch) return std::nullopt;
  take_kept_copies(watched);
  // Blame the kernel only for values it made: the argument was finite
  // before launch, or was not an argument then (an output).
  for (const WatchedArg& a : watched) {
    if (a.name == where.arg && a.host.defined() &&
        fires_on(compute_stats(a.host), settings.trap_nan_only) > 0)
      return std::nullopt;
  }
  save_watched(settings.dump_dir, where, watched);
  std::vector<TensorRecord> inputs;
  std::vector<std::string> files;
  for (const WatchedArg& a : watched) {
    if (!a.host.defined() || a.unwritten_output) continue;
    inputs.push_back(describe(before_launch_of(where, a.name), a.host,
                              host_contents(a.host, settings.max_values)));
    files.push_back(a.saved_as);
  }
  const std::string what = what_fired(where);
  f.record = format_trap(where, stats, what, inputs, json, files);
  f.noted = format_trap(where, stats, what, inputs, true, files);
  f.kernel = true;
  return f;
}

}  // namespace aoti_debug_printer::trap
