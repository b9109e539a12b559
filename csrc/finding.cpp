#include "finding.h"

#include "job.h"
#include "output.h"
#include "saver.h"

#include <algorithm>
#include <cctype>
#include <mutex>
#include <vector>

namespace aoti_debug_printer {
namespace {
thread_local std::string last_stop;

std::mutex packages_mu;
std::vector<std::string>& packages_loaded() {
  static auto* paths = new std::vector<std::string>;  // never destroyed: read at exit
  return *paths;
}

// `s` as one shell word: quoted where it holds anything but [A-Za-z0-9_./-].
std::string shell_word(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '.' || c == '/' || c == '-';
  });
  if (plain) return s;
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A finding (trap, guard, CUDA error) is also a line of the dump's manifest
// (`finding`, its JSON line), so that `aoti-debug repro DUMP` finds it
// without the printed output. Returns the one-line pointer to that command,
// for the finding's message.
std::string note_finding_in_dump(const std::string& dir, const std::string& finding) {
  saver::append_to_manifest(dir, finding);
  std::vector<std::string> paths;
  {
    std::lock_guard<std::mutex> lock(packages_mu);
    paths = packages_loaded();
  }
  std::string package;
  if (paths.size() == 1) {
    package = " --package " + shell_word(paths.front());
  } else if (paths.empty()) {
    package = " --package followed by the .pt2 this process loaded";
  } else {
    package = " --package followed by the .pt2 of this model, one of";
    for (const std::string& p : paths) package += " " + shell_word(p);
  }
  // The kernel's arguments are all in the dump only when it ran at level 1:
  // the run-time level switch saves them without recompiling.
  return "; a one-kernel repro: aoti-debug repro " + shell_word(dir) + package +
         " (on a dump of a run at level 1: AOTI_DEBUG_PRINTER_LEVEL=1)";
}
}  // namespace

void note_package_loaded(const std::string& path) {
  std::lock_guard<std::mutex> lock(packages_mu);
  std::vector<std::string>& paths = packages_loaded();
  if (std::find(paths.begin(), paths.end(), path) == paths.end()) paths.push_back(path);
}

std::string note(const std::string& output, const std::string& dump_dir, const Finding& finding) {
  if (!finding.record.empty()) emit(output, finding.record);
  if (finding.noted.empty()) return finding.unnoted;
  // Behind what was taken before it (the saver's queue keeps the order,
  // and waits for nothing: a graph's replay notes findings from a host
  // call its stream waits for); the process's end writes the queue.
  if (finding.kernel) return note_finding_in_dump(dump_dir, finding.noted);
  saver::append_to_manifest(dump_dir, finding.noted);
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
