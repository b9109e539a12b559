#include "trap.h"

#include "save.h"

namespace aoti_debug_printer::trap {

int64_t non_finite(const TensorStats& s) { return s.nan + s.pos_inf + s.neg_inf; }

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

std::string check(const Settings& settings, const Where& where, const TensorStats& stats,
                  std::vector<WatchedArg>& watched) {
  if (non_finite(stats) == 0) return "";
  const bool json = settings.format == Format::Jsonl;
  if (where.phase == Phase::ModelInput) {
    emit(settings.output, format_trap(where, stats, what_fired(where), {}, json));
    return stop_message(where);
  }
  if (where.phase != Phase::AfterLaunch) return "";
  // Blame the kernel only for values it made: the argument was finite
  // before launch, or was not an argument then (an output).
  for (const WatchedArg& a : watched) {
    if (a.name == where.arg && a.host.defined() && non_finite(compute_stats(a.host)) > 0) return "";
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
  emit(settings.output, format_trap(where, stats, what, inputs, json, files));
  const std::string repro =
      note_finding_in_dump(settings.dump_dir, format_trap(where, stats, what, inputs, true, files));
  const std::string message = stop_message(where) + repro;
  report_stop(settings.output, message);
  return message;
}

}  // namespace aoti_debug_printer::trap
