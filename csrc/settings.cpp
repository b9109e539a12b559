#include "settings.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <atomic>
#include <fnmatch.h>
#include <mutex>
#include <stdexcept>

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

bool flag(const std::string& key, const std::string& value) {
  if (value == "1" || value == "on" || value == "true") return true;
  if (value == "0" || value == "off" || value == "false") return false;
  throw std::invalid_argument(key + " must be 1/on or 0/off, got '" + value + "'");
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
    const int64_t hi = dash == std::string::npos ? lo : whole_number("ranks", part.substr(dash + 1), lo);
    out.emplace_back(lo, hi);
    start = comma + 1;
  }
  return out;
}

std::atomic<uint64_t> settings_version{0};

// "{a, b*}" or "a,b*" -> ["a", "b*"]; as the compile-time filter.
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

void apply(Settings& s, const std::string& key, const std::string& value) {
  if (key == "output") {
    if (value.empty()) throw std::invalid_argument("output must not be empty");
    s.output = value;
  } else if (key == "format") {
    if (value == "text") {
      s.format = Format::Text;
    } else if (value == "jsonl" || value == "json") {
      s.format = Format::Jsonl;
    } else {
      throw std::invalid_argument("format must be 'text' or 'jsonl', got '" + value + "'");
    }
  } else if (key == "dump_dir") {
    if (value.empty()) throw std::invalid_argument("dump_dir must not be empty");
    s.dump_dir = value;
  } else if (key == "max_values") {
    s.max_values = whole_number(key, value, 0);
  } else if (key == "sync") {
    s.sync = value == "auto" ? Sync::Auto : flag(key, value) ? Sync::On : Sync::Off;
  } else if (key == "replay") {
    s.replay = flag(key, value);
  } else if (key == "rank") {
    s.rank = whole_number(key, value, -1);
  } else if (key == "level") {
    const int64_t level = value == "compiled" ? -1 : whole_number(key, value, -1);
    if (level > 3) throw std::invalid_argument("level must be -1 (as compiled) or 0 to 3");
    s.level = static_cast<int>(level);
  } else if (key == "kernels") {
    s.kernel_patterns = kernel_patterns(value);
    s.kernels = value;
  } else if (key == "trap") {
    s.trap = flag(key, value);
  } else if (key == "ranks") {
    s.rank_ranges = rank_ranges(value);
    s.ranks = value;
  } else {
    throw std::invalid_argument(
        "unknown option '" + key +
        "' (known: output, format, dump_dir, max_values, sync, replay, rank, ranks, level, "
        "kernels, trap)");
  }
}

Settings& settings() {
  // Read from the environment once; set_option() overrides afterwards.
  static Settings s = [] {
    Settings init;
    const std::pair<const char*, const char*> env[] = {
        {"rank", "RANK"},
        {"rank", "AOTI_DEBUG_PRINTER_RANK"},
        {"ranks", "AOTI_DEBUG_PRINTER_RANKS"},
        {"sync", "AOTI_DEBUG_PRINTER_SYNC"},
        {"replay", "AOTI_DEBUG_PRINTER_REPLAY"},
        {"level", "AOTI_DEBUG_PRINTER_LEVEL"},
        {"kernels", "AOTI_DEBUG_PRINTER_KERNELS"},
        {"trap", "AOTI_DEBUG_PRINTER_TRAP"},
        {"output", "AOTI_DEBUG_PRINTER_OUTPUT"},
        {"format", "AOTI_DEBUG_PRINTER_FORMAT"},
        {"dump_dir", "AOTI_DEBUG_PRINTER_DUMP_DIR"},
        {"max_values", "AOTI_DEBUG_PRINTER_MAX_VALUES"},
    };
    for (const auto& [key, var] : env) {
      const char* v = std::getenv(var);
      if (!v || !*v) continue;
      try {
        apply(init, key, v);
      } catch (const std::exception& e) {
        report_error(std::string(var) + ": " + e.what() + "; using the default");
      }
    }
    return init;
  }();
  return s;
}

// The open output file, if the output is a path, and the path it was opened
// for, so that changing the setting reopens.
struct Sink {
  std::mutex mu;
  FILE* file = nullptr;
  std::string path;
};

Sink& sink() {
  static Sink s;
  return s;
}

} // namespace

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
  Settings updated = settings();
  apply(updated, key, value);
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

int runtime_level() {
  return settings_now().level;
}

bool Settings::kernel_selected(const std::string& kernel) const {
  if (kernel_patterns.empty()) return true;
  for (const std::string& p : kernel_patterns) {
    if (fnmatch(p.c_str(), kernel.c_str(), FNM_CASEFOLD) == 0) return true;
  }
  return false;
}

std::string get_option(const std::string& key) {
  const Settings s = current_settings();
  if (key == "output") return s.output;
  if (key == "format") return s.format == Format::Text ? "text" : "jsonl";
  if (key == "dump_dir") return s.dump_dir;
  if (key == "max_values") return std::to_string(s.max_values);
  if (key == "sync") return s.sync == Sync::Auto ? "auto" : s.sync == Sync::On ? "on" : "off";
  if (key == "replay") return s.replay ? "on" : "off";
  if (key == "rank") return std::to_string(s.rank);
  if (key == "ranks") return s.ranks.empty() ? "all" : s.ranks;
  if (key == "level") return std::to_string(s.level);
  if (key == "kernels") return s.kernels;
  if (key == "trap") return s.trap ? "on" : "off";
  throw std::invalid_argument("unknown option '" + key + "'");
}

void emit(const Settings& settings, const std::string& text) {
  const std::string& output = settings.output;
  Sink& out = sink();
  std::lock_guard<std::mutex> lock(out.mu);
  FILE* stream = nullptr;
  if (output == "stdout") {
    stream = stdout;
  } else if (output == "stderr") {
    stream = stderr;
  } else {
    if (out.path != output) {
      if (out.file) std::fclose(out.file);
      out.file = std::fopen(output.c_str(), "a");
      out.path = output;
      if (!out.file) {
        report_error("cannot open output '" + output + "': " + std::strerror(errno) +
                     "; records go to stderr");
      }
    }
    stream = out.file ? out.file : stderr;
  }
  std::fwrite(text.data(), 1, text.size(), stream);
  std::fflush(stream);
}

void report_error(const std::string& message) {
  const std::string line = "[aoti-debug-printer] ERROR: " + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

} // namespace aoti_debug_printer
