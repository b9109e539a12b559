#include "settings.h"

#include "aoti_debug_printer.h"
#include "output.h"

#include <fnmatch.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <stdexcept>
#include <vector>

namespace aoti_debug_printer {
namespace {

std::mutex& settings_mutex() {
  static std::mutex mu;
  return mu;
}

int64_t whole_number(const std::string& key, const std::string& value, int64_t min) {
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0 || n < min) {
    throw std::invalid_argument(key + " must be a whole number >= " + std::to_string(min) +
                                ", got '" + value + "'");
  }
  return n;
}

// A size in MiB, fractions allowed, as a whole number of bytes.
int64_t mebibytes(const std::string& key, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  const double mib = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno != 0 || !(mib >= 0) || mib > 1e9) {
    throw std::invalid_argument(key + " must be a size in MiB >= 0 (fractions allowed), got '" +
                                value + "'");
  }
  return std::llround(mib * 1048576.0);
}

std::string as_mebibytes(int64_t bytes) {
  // Every byte count divided by 2^20 is a finite decimal: 17 digits show it
  // exactly enough to be read back to the same count.
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", static_cast<double>(bytes) / 1048576.0);
  return text;
}

// The spellings of a switch, any case (Python's _autoload reads the same).
bool flag(const std::string& key, const std::string& value) {
  std::string v = value;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "1" || v == "on" || v == "true" || v == "yes") return true;
  if (v == "0" || v == "off" || v == "false" || v == "no") return false;
  throw std::invalid_argument(key + " must be 1/0, on/off, true/false or yes/no, got '" + value +
                              "'");
}

// Every value as set_option and the environment give it: surrounding
// whitespace dropped (for every option, paths too), a NUL refused (it
// would cut the value short where a C string is made of it).
std::string cleaned(const std::string& key, const std::string& value) {
  if (value.find('\0') != std::string::npos) {
    throw std::invalid_argument(key + " must not contain a NUL byte");
  }
  const size_t b = value.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return value.substr(b, value.find_last_not_of(" \t\r\n") - b + 1);
}

// Variables of this package that are not options: the Python entry
// point's switches, the header's library path, and the test scripts' torch.
constexpr const char* kOtherVariables[] = {
    "AOTI_DEBUG_PRINTER_AUTOLOAD", "AOTI_DEBUG_PRINTER_HOOKS", "AOTI_DEBUG_PRINTER_LIBRARY",
    "AOTI_DEBUG_PRINTER_TORCH", "AOTI_DEBUG_PRINTER_PATCHED", "AOTI_DEBUG_PRINTER_OTHER_PYTHON",
    // The compile-time switch of the statistics inside kernels (stored_stats.py).
    "AOTI_DEBUG_PRINTER_STATS_IN_KERNELS"};

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// "0,2-3" -> [0,0], [2,3].
std::vector<std::pair<int64_t, int64_t>> rank_ranges(const std::string& spec) {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (spec.empty() || spec == "all") return out;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string part = spec.substr(start, comma - start);
    const size_t dash = part.find('-');
    const int64_t lo = whole_number("ranks", part.substr(0, dash), 0);
    const int64_t hi =
        dash == std::string::npos ? lo : whole_number("ranks", part.substr(dash + 1), lo);
    out.emplace_back(lo, hi);
    start = comma + 1;
  }
  return out;
}

std::atomic<uint64_t> settings_version{0};

std::string on_off(bool b) { return b ? "on" : "off"; }

// The one table of run-time options: key, environment variable, what it
// means, how a value is read into Settings, and how it is shown back.
// set_option, get_option, the environment at start-up, the error for an
// unknown key, and Python's option list all come from here.
const std::vector<OptionInfo>& table() {
  using S = Settings;
  using V = const std::string&;
  static const std::vector<OptionInfo> options = {
      {"output", "AOTI_DEBUG_PRINTER_OUTPUT", "",
       "stdout, stderr, or a file that records are appended to",
       [](S& s, V v) {
         if (v.empty()) throw std::invalid_argument("output must not be empty");
         s.output = v;
       },
       [](const S& s) { return s.output; }},
      {"format", "AOTI_DEBUG_PRINTER_FORMAT", "", "text or jsonl",
       [](S& s, V v) {
         if (v == "text") {
           s.format = Format::Text;
         } else if (v == "jsonl" || v == "json") {
           s.format = Format::Jsonl;
         } else {
           throw std::invalid_argument("format must be 'text' or 'jsonl', got '" + v + "'");
         }
       },
       [](const S& s) { return std::string(s.format == Format::Text ? "text" : "jsonl"); }},
      {"dump_dir", "AOTI_DEBUG_PRINTER_DUMP_DIR", "", "where level 1 saves (created recursively)",
       [](S& s, V v) {
         if (v.empty()) throw std::invalid_argument("dump_dir must not be empty");
         s.dump_dir = v;
       },
       [](const S& s) { return s.dump_dir; }},
      {"save_memory", "AOTI_DEBUG_PRINTER_SAVE_MEMORY", "",
       "MiB (fractions allowed) of host memory level 1 stages snapshots in while they wait for "
       "the disk; 0 saves on the model's thread",
       [](S& s, V v) { s.save_memory = mebibytes("save_memory", v); },
       [](const S& s) { return as_mebibytes(s.save_memory); }},
      {"max_values", "AOTI_DEBUG_PRINTER_MAX_VALUES", "",
       "tensors with at most this many elements also print their values; 0: none",
       [](S& s, V v) { s.max_values = whole_number("max_values", v, 0); },
       [](const S& s) { return std::to_string(s.max_values); }},
      {"sync", "AOTI_DEBUG_PRINTER_SYNC", "",
       "auto, on or off: wait for the GPU after each kernel and check CUDA's error state",
       [](S& s, V v) {
         s.sync = v == "auto" ? Sync::Auto : flag("sync", v) ? Sync::On : Sync::Off;
       },
       [](const S& s) {
         return std::string(s.sync == Sync::Auto ? "auto" : s.sync == Sync::On ? "on" : "off");
       }},
      {"replay", "AOTI_DEBUG_PRINTER_REPLAY", "",
       "while syncing, keep host copies of a kernel's inputs; a failing kernel's are saved",
       [](S& s, V v) { s.replay = flag("replay", v); },
       [](const S& s) { return on_off(s.replay); }},
      {"rank", "AOTI_DEBUG_PRINTER_RANK", "RANK",
       "this process's rank; -1 outside distributed runs",
       [](S& s, V v) { s.rank = whole_number("rank", v, -1); },
       [](const S& s) { return std::to_string(s.rank); }},
      {"ranks", "AOTI_DEBUG_PRINTER_RANKS", "",
       "the ranks that record, e.g. 0 or 0,2-3; all by default",
       [](S& s, V v) {
         s.rank_ranges = rank_ranges(v);
         s.ranks = v;
       },
       [](const S& s) { return s.ranks.empty() ? std::string("all") : s.ranks; }},
      {"level", "AOTI_DEBUG_PRINTER_LEVEL", "",
       "-1 (as compiled), 0 off, 1 save, 2 print, 3 kernel names; no recompiling",
       [](S& s, V v) {
         const int64_t level = v == "compiled" ? -1 : whole_number("level", v, -1);
         if (level > 3) throw std::invalid_argument("level must be -1 (as compiled) or 0 to 3");
         s.level = static_cast<Level>(level);
       },
       [](const S& s) { return std::to_string(static_cast<int>(s.level)); }},
      {"kernels", "AOTI_DEBUG_PRINTER_KERNELS", "",
       "kernel names or globs that record, narrowing the compile-time filter",
       [](S& s, V v) {
         s.kernel_patterns = kernel_patterns(v);
         s.kernels = v;
       },
       [](const S& s) { return s.kernels; }},
      {"trap", "AOTI_DEBUG_PRINTER_TRAP", "",
       "stop at the first kernel whose outputs gain NaN or Inf (levels 1 and 2); nan: NaN only "
       "(an attention mask's -inf is made on purpose)",
       [](S& s, V v) {
         s.trap_nan_only = v == "nan";
         s.trap = s.trap_nan_only || flag("trap", v);
       },
       [](const S& s) { return s.trap_nan_only ? std::string("nan") : on_off(s.trap); }},
      {"guard", "AOTI_DEBUG_PRINTER_GUARD", "",
       "0 off; 1 stop at a kernel that writes where it must not (levels 1 and 2); "
       "2 also name the kernel that overwrote a buffer (slow)",
       [](S& s, V v) {
         const int64_t guard = whole_number("guard", v, 0);
         if (guard > 2) throw std::invalid_argument("guard must be 0, 1 or 2, got '" + v + "'");
         s.guard = static_cast<int>(guard);
       },
       [](const S& s) { return std::to_string(s.guard); }},
      {"roles", "AOTI_DEBUG_PRINTER_ROLES", "",
       "1 (default) use each argument's role: no statistics of an output before launch, a "
       "read-only argument recorded once; 0 record every argument in full before and after launch",
       [](S& s, V v) { s.roles = flag("roles", v); }, [](const S& s) { return on_off(s.roles); }},
      {"end_job", "AOTI_DEBUG_PRINTER_END_JOB", "",
       "1 (default): in a torch.distributed job, a rank that stops (trap, guard, CUDA error) "
       "ends every rank within seconds, each naming it; 0: it stops its own run only",
       [](S& s, V v) { s.end_job = flag("end_job", v); },
       [](const S& s) { return on_off(s.end_job); }},
      {"input_check", "AOTI_DEBUG_PRINTER_INPUT_CHECK", "",
       "stop (default): a model input whose size, stride, dtype or device the package was not "
       "compiled for is a finding, and the run stops before its first kernel; continue: the "
       "finding, and the run goes on; off: no check",
       [](S& s, V v) {
         if (v == "stop" || v == "1" || v == "on") {
           s.input_check = InputCheck::Stop;
         } else if (v == "continue") {
           s.input_check = InputCheck::Continue;
         } else if (v == "off" || v == "0") {
           s.input_check = InputCheck::Off;
         } else {
           throw std::invalid_argument("input_check must be stop, continue or off, got '" + v +
                                       "'");
         }
       },
       [](const S& s) -> std::string {
         switch (s.input_check) {
           case InputCheck::Stop: return "stop";
           case InputCheck::Continue: return "continue";
           case InputCheck::Off: return "off";
         }
         return "stop";
       }},
  };
  return options;
}

const OptionInfo& find_option(const std::string& key) {
  for (const OptionInfo& o : table()) {
    if (key == o.key) return o;
  }
  std::string known;
  for (const OptionInfo& o : table()) known += (known.empty() ? "" : ", ") + std::string(o.key);
  throw std::invalid_argument("unknown option '" + key + "' (known: " + known + ")");
}

// A misspelt variable would be ignored without a word: name the nearest.
void warn_of_unknown_variables(const std::vector<std::string>& known) {
  static const std::string prefix = "AOTI_DEBUG_PRINTER_";
  for (char** e = environ; e && *e; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (name.rfind(prefix, 0) != 0 || std::find(known.begin(), known.end(), name) != known.end()) {
      continue;
    }
    const auto nearest =
        std::min_element(known.begin(), known.end(), [&](const auto& a, const auto& b) {
          return edit_distance(name, a) < edit_distance(name, b);
        });
    report_error(name + " is not a variable of aoti-debug-printer (did you mean " + *nearest +
                 "?); ignored");
  }
}

Settings& settings() {
  // Read from the environment once; set_option() overrides afterwards. An
  // option's fallback variable (torchrun's RANK) is read before its own.
  static Settings s = [] {
    Settings init;
    std::vector<std::string> known(std::begin(kOtherVariables), std::end(kOtherVariables));
    for (const OptionInfo& o : table()) {
      known.emplace_back(o.env);
      for (const char* var : {o.fallback_env, o.env}) {
        const char* v = *var ? std::getenv(var) : nullptr;
        if (!v || !*v) continue;
        try {
          o.apply(init, cleaned(var, v));
        } catch (const std::exception& e) {
          report_error(std::string(var) + ": " + e.what() + "; using the default");
        }
      }
    }
    warn_of_unknown_variables(known);
    return init;
  }();
  return s;
}

}  // namespace

bool Settings::rank_selected() const {
  // A process outside any distributed run has no rank to select by.
  if (rank_ranges.empty() || rank < 0) return true;
  for (const auto& [lo, hi] : rank_ranges) {
    if (rank >= lo && rank <= hi) return true;
  }
  return false;
}

Settings current_settings() {
  std::lock_guard<std::mutex> lock(settings_mutex());
  return settings();
}

void set_option(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(settings_mutex());
  const OptionInfo& option = find_option(key);
  Settings updated = settings();
  option.apply(updated, cleaned(key, value));
  settings() = updated;
  settings_version.fetch_add(1, std::memory_order_release);
}

const Settings& settings_now() {
  thread_local Settings cached;
  thread_local uint64_t seen = ~uint64_t{0};
  const uint64_t version = settings_version.load(std::memory_order_acquire);
  if (version != seen) {
    cached = current_settings();
    seen = version;
  }
  return cached;
}

Level runtime_level() { return settings_now().level; }

Level compiled_level(int32_t level) {
  switch (level) {
    case AOTI_DEBUG_PRINTER_LEVEL_SAVE:
    case AOTI_DEBUG_PRINTER_LEVEL_PRINT:
    case AOTI_DEBUG_PRINTER_LEVEL_KERNEL_NAMES: return static_cast<Level>(level);
    default: return Level::Off;
  }
}

Action action_at(Level now, Level compiled, bool before_launch) {
  if (compiled == Level::KernelNames && now != Level::KernelNames) return Action::None;
  switch (now) {
    case Level::Save: return Action::Save;
    case Level::Print: return Action::Print;
    case Level::KernelNames: return before_launch ? Action::Watch : Action::None;
    default: return Action::None;
  }
}

// "{a, b*}" or "a,b*" -> ["a", "b*"]: braces and blanks around each part dropped.
std::vector<std::string> kernel_patterns(const std::string& spec) {
  std::vector<std::string> out;
  std::string part;
  for (const char ch : spec + ",") {
    if (ch == ',') {
      const size_t b = part.find_first_not_of(" \t{}");
      const size_t e = part.find_last_not_of(" \t{}");
      if (b != std::string::npos) out.push_back(part.substr(b, e - b + 1));
      part.clear();
    } else {
      part += ch;
    }
  }
  return out;
}

bool kernel_filter_selects(const std::vector<std::string>& patterns, const std::string& kernel) {
  if (patterns.empty()) return true;
  for (const std::string& p : patterns) {
    if (fnmatch(p.c_str(), kernel.c_str(), FNM_CASEFOLD) == 0) return true;
  }
  return false;
}

bool Settings::kernel_selected(const std::string& kernel) const {
  return kernel_filter_selects(kernel_patterns, kernel);
}

std::string get_option(const std::string& key) { return find_option(key).show(current_settings()); }

const std::vector<OptionInfo>& options() { return table(); }

}  // namespace aoti_debug_printer
