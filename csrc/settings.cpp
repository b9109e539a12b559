#include "settings.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>

namespace aoti_debug_printer {
namespace {

std::mutex& settings_mutex() {
  static std::mutex mu;
  return mu;
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
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || errno != 0 || n < 0) {
      throw std::invalid_argument("max_values must be a whole number >= 0, got '" + value + "'");
    }
    s.max_values = n;
  } else {
    throw std::invalid_argument(
        "unknown option '" + key + "' (known: output, format, dump_dir, max_values)");
  }
}

Settings& settings() {
  // Read from the environment once; set_option() overrides afterwards.
  static Settings s = [] {
    Settings init;
    const std::pair<const char*, const char*> env[] = {
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

Settings current_settings() {
  std::lock_guard<std::mutex> lock(settings_mutex());
  return settings();
}

void set_option(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(settings_mutex());
  Settings updated = settings();
  apply(updated, key, value);
  settings() = updated;
}

std::string get_option(const std::string& key) {
  const Settings s = current_settings();
  if (key == "output") return s.output;
  if (key == "format") return s.format == Format::Text ? "text" : "jsonl";
  if (key == "dump_dir") return s.dump_dir;
  if (key == "max_values") return std::to_string(s.max_values);
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
