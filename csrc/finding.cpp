#include "finding.h"

#include "job.h"
#include "output.h"
#include "save.h"
#include "saver.h"

namespace aoti_debug_printer {
namespace {
thread_local std::string last_stop;
}  // namespace

std::string note(const std::string& output, const std::string& dump_dir, const Finding& finding) {
  if (!finding.record.empty()) emit(output, finding.record);
  if (finding.noted.empty()) return finding.unnoted;
  // What was taken before it is in the dump before the finding is, and
  // before the run (or the process) stops.
  saver::wait_for_saves();
  if (finding.kernel) return note_finding_in_dump(dump_dir, finding.noted);
  saving([&] { append_to_manifest(dump_dir, finding.noted); });
  return "";
}

Stop stop_at(const Settings& settings, const Finding& finding) {
  const std::string message = finding.message + note(settings.output, settings.dump_dir, finding);
  report_stop(settings.output, message);
  last_stop = message;
  // The rank's stop ends the job, its record written.
  job::stopped(settings, message);
  return Stop{finding.code, message};
}

const std::string& stop_message() { return last_stop; }

}  // namespace aoti_debug_printer
