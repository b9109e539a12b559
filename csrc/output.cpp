#include "output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>

namespace aoti_debug_printer {
namespace {

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

void write_out(const std::string& output, const std::string& text) {
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

// This thread's texts not written yet, oldest first: each a text already
// made, or a record still waiting for the GPU. At thread (and process) exit
// every one is written.
struct Waiting {
  std::string output;
  std::string text;
  std::unique_ptr<LateRecord> late;
};
struct Queue {
  std::deque<Waiting> items;
  ~Queue() {
    try {
      flush(true);
    } catch (...) {
      // Nothing can be reported any more.
    }
  }
  void flush(bool wait) {
    while (!items.empty()) {
      Waiting& w = items.front();
      if (w.late) {
        if (!w.late->ready()) {
          if (!wait) return;
          w.late->wait();
        }
        try {
          w.text = w.late->text();
        } catch (const std::exception& e) {
          // Said once, and the records behind it still go out.
          w.text.clear();
          report_error(std::string("a record's statistics could not be read back: ") + e.what());
        }
      }
      // Popped first: a failing write must not leave the record to repeat.
      const Waiting done = std::move(w);
      items.pop_front();
      if (!done.text.empty()) write_out(done.output, done.text);
    }
  }
};
thread_local Queue queue;

}  // namespace

void emit(const std::string& output, const std::string& text) {
  if (queue.items.empty()) {
    write_out(output, text);
    return;
  }
  queue.items.push_back({output, text, nullptr});
  queue.flush(false);
}

void emit_later(const std::string& output, std::unique_ptr<LateRecord> record) {
  queue.items.push_back({output, "", std::move(record)});
}

void flush_records(bool wait) { queue.flush(wait); }

bool records_waiting() { return !queue.items.empty(); }

namespace {
// One line on stderr, whatever the output is; the message escaped as text.
void to_stderr(const char* kind, const std::string& message) {
  const std::string line =
      std::string("[aoti-debug-printer] ") + kind + escaped(message, Escape::Text) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}
}  // namespace

void report_error(const std::string& message) { to_stderr("ERROR: ", message); }

void report_note(const std::string& message) { to_stderr("note: ", message); }

namespace {

// The length of the well-formed UTF-8 sequence at s[i], 0 where there is none.
size_t utf8_length(const std::string& s, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b = at(i);
  if (b < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (b >= 0xC2 && b <= 0xDF)
    n = 2;
  else if (b == 0xE0)
    n = 3, lo = 0xA0;
  else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF)
    n = 3;
  else if (b == 0xED)
    n = 3, hi = 0x9F;  // no UTF-16 surrogates
  else if (b == 0xF0)
    n = 4, lo = 0x90;
  else if (b >= 0xF1 && b <= 0xF3)
    n = 4;
  else if (b == 0xF4)
    n = 4, hi = 0x8F;
  else
    return 0;
  if (i + n > s.size() || at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (at(i + k) < 0x80 || at(i + k) > 0xBF) return 0;
  return n;
}

}  // namespace

const std::string& process_token() {
  static const std::string token = [] {
    std::random_device random;
    const uint64_t bits = (static_cast<uint64_t>(random()) << 32) ^ random();
    char hex[24];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(bits));
    return std::string(hex);
  }();
  return token;
}

std::string escaped(const std::string& s, Escape how) {
  const bool json = how == Escape::Json;
  std::string out;
  out.reserve(s.size());
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    const size_t n = utf8_length(s, i);
    const char* spelt = nullptr;  // what stands for the character, if not itself
    if (n == 0) {                 // not UTF-8: the byte, spelt out
      std::snprintf(buf, sizeof buf, json ? "\\\\x%02x" : "\\x%02x", b);
      spelt = buf;
    } else if (n == 1 && json && (b == '"' || b == '\\')) {
      spelt = b == '"' ? "\\\"" : "\\\\";
    } else if (n == 1 && (b < 0x20 || b == 0x7f)) {
      spelt = b == '\n' ? "\\n" : b == '\r' ? "\\r" : b == '\t' ? "\\t" : nullptr;
      if (!spelt) {
        std::snprintf(buf, sizeof buf, json ? "\\u%04x" : "\\x%02x", b);
        spelt = buf;
      }
    } else if (n == 2 && b == 0xc2 && static_cast<unsigned char>(s[i + 1]) == 0x85) {
      spelt = "\\u0085";  // line separators to Python's str.splitlines() and JavaScript
    } else if (n == 3 && b == 0xe2 && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
               (static_cast<unsigned char>(s[i + 2]) & 0xfe) == 0xa8) {
      spelt = static_cast<unsigned char>(s[i + 2]) == 0xa8 ? "\\u2028" : "\\u2029";
    }
    if (spelt) {
      out += spelt;
    } else {
      out.append(s, i, n);
    }
    i += n ? n : 1;
  }
  return out;
}

}  // namespace aoti_debug_printer
