#include "output.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

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
  // Never destroyed: the writer thread may write while the process exits.
  static Sink* s = new Sink;
  return *s;
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
// made, or a record still waiting for the GPU. The thread appends; the
// writer thread (below) formats and writes each record once its statistics
// have landed, so the model's thread spends no time on text; the thread
// itself writes what is left when it must (flush_records(true): a run's
// end, its exit).
struct Waiting {
  std::string output;
  std::string text;
  std::unique_ptr<LateRecord> late;
};
// What a drain of a queue did.
struct Drained {
  int64_t written = 0;  // records and texts taken off the queue
  bool left = false;    // whether one is left that waits for the GPU
};
struct Queue {
  std::mutex mu;  // guards items
  std::deque<Waiting> items;
  // Held while the front record is formatted and written: one writer at a
  // time, so records come out in order. A record leaves `items` only once
  // written, so an empty queue means nothing of this thread is unwritten.
  std::mutex writing;

  bool empty() {
    std::lock_guard<std::mutex> lock(mu);
    return items.empty();
  }
  // Writes the front records that are ready (with `wait`, all of them,
  // waiting for the GPU as needed).
  Drained drain(bool wait) {
    Drained d;
    std::unique_lock<std::mutex> turn(writing, std::defer_lock);
    if (wait) {
      turn.lock();
    } else if (!turn.try_lock()) {
      d.left = true;  // the thread itself is writing them
      return d;
    }
    for (;; ++d.written) {
      Waiting* front = nullptr;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (items.empty()) return d;
        // A deque's elements stay put while the thread appends behind them.
        front = &items.front();
      }
      if (front->late) {
        if (!front->late->ready()) {
          if (!wait) {
            d.left = true;
            return d;
          }
          front->late->wait();
        }
        try {
          front->text = front->late->text();
        } catch (const std::exception& e) {
          // Said once, and the records behind it still go out.
          front->text.clear();
          report_error(std::string("a record's statistics could not be read back: ") + e.what());
        } catch (...) {
          front->text.clear();
          report_error("a record's statistics could not be read back");
        }
        front->late.reset();
      }
      if (!front->text.empty()) write_out(front->output, front->text);
      {
        std::lock_guard<std::mutex> lock(mu);
        items.pop_front();
      }
    }
  }
};

// Forks this process has seen (pthread_atfork's child handler). A child
// has no writer thread, and its copy of a thread's queue holds the
// parent's records, which are the parent's to write: a child starts afresh.
std::atomic<int> forks{0};

// The one writer thread of the process, started by the first record that
// waits for the GPU. It polls the queues' front records every kPoll while
// any waits (a record has landed when its tickets are in host memory: no
// CUDA call, so this thread never touches the GPU), and for kAwake after
// the last record it saw, then sleeps until a thread pokes it. Why stay
// awake: a model hands over records at every launch event, and waking a
// sleeping thread is a system call on the model's thread each time.
// Never destroyed; the main thread stops it when the process exits, once
// its own records are written, before any static object is destroyed.
class Writer {
 public:
  static Writer& get() {
    // A fork while the writer holds the sink's lock would leave it locked
    // in the child for good: the fork waits for the write to end.
    static const bool counting_forks = [] {
      pthread_atfork([] { sink().mu.lock(); }, [] { sink().mu.unlock(); },
                     [] {
                       sink().mu.unlock();
                       forks.fetch_add(1);
                       current().store(nullptr);
                     });
      return true;
    }();
    (void)counting_forks;
    Writer* writer = current().load(std::memory_order_acquire);
    if (writer) return *writer;
    // Threads may race to make the first one: one wins, the others use it.
    auto* made = new Writer;
    if (current().compare_exchange_strong(writer, made)) return *made;
    delete made;  // never started
    return *writer;
  }

  void add(std::shared_ptr<Queue> queue) {
    std::lock_guard<std::mutex> lock(mu_);
    queues_.push_back(std::move(queue));
    if (!started_ && !stopping_) {
      started_ = true;
      std::thread([this] { run(); }).detach();
    }
  }
  void remove(const Queue* queue) {
    std::lock_guard<std::mutex> lock(mu_);
    queues_.erase(std::remove_if(queues_.begin(), queues_.end(),
                                 [&](const auto& q) { return q.get() == queue; }),
                  queues_.end());
  }
  // A queue has a new record: wakes the writer if it sleeps.
  void poke() {
    if (!sleeping_.load(std::memory_order_acquire)) return;
    std::lock_guard<std::mutex> lock(mu_);
    poked_ = true;
    wake_.notify_one();
  }
  static void stop_if_running() {
    if (Writer* writer = current().load(std::memory_order_acquire)) writer->stop();
  }
  // Returns once the writer thread has ended (at once if it never started).
  void stop() {
    std::unique_lock<std::mutex> lock(mu_);
    stopping_ = true;
    poked_ = true;
    wake_.notify_one();
    wake_.wait(lock, [&] { return !started_; });
  }

 private:
  static constexpr std::chrono::microseconds kPoll{20};
  static constexpr std::chrono::milliseconds kAwake{50};

  static std::atomic<Writer*>& current() {
    static std::atomic<Writer*> writer{nullptr};
    return writer;
  }

  void run() {
    auto last_seen = std::chrono::steady_clock::now();
    for (;;) {
      std::vector<std::shared_ptr<Queue>> queues;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) break;
        queues = queues_;
      }
      bool waiting = false, seen = false;
      for (const auto& q : queues) {
        try {
          const Drained d = q->drain(false);
          waiting |= d.left;
          seen |= d.written > 0 || d.left;
        } catch (...) {
          // What failed was reported where it failed; the other queues go on.
          waiting = true;
        }
      }
      const auto now = std::chrono::steady_clock::now();
      if (seen) last_seen = now;
      std::unique_lock<std::mutex> lock(mu_);
      // A record that has not landed, or records lately: look again shortly.
      if (waiting || now - last_seen < kAwake) {
        wake_.wait_for(lock, kPoll, [&] { return stopping_; });
        continue;
      }
      // Nothing waits: sleep until a thread queues a record (poke). One
      // queued between the scan and here is seen by the next scan at the
      // latest when the wait times out.
      sleeping_.store(true, std::memory_order_release);
      wake_.wait_for(lock, std::chrono::milliseconds(100), [&] { return poked_; });
      poked_ = false;
      sleeping_.store(false, std::memory_order_release);
    }
    // The process ends: what is ready in threads that never end, such as
    // the CUDA thread that runs a captured graph's host calls (graphs.h),
    // is written now or never.
    std::vector<std::shared_ptr<Queue>> queues;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queues = queues_;
    }
    for (const auto& q : queues) {
      try {
        q->drain(false);
      } catch (...) {
        // Reported where it failed.
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    started_ = false;
    wake_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::vector<std::shared_ptr<Queue>> queues_;
  bool started_ = false;
  bool stopping_ = false;
  bool poked_ = false;
  std::atomic<bool> sleeping_{false};
};

// Records a thread queues go to the writer thread at its launch events
// (publish_records), and at least every kPublishEvery records.
constexpr size_t kPublishEvery = 32;

// This thread's queue, registered with the writer when the thread first
// queues a record for it, and written out when the thread exits.
class ThisThread {
 public:
  Queue& queue() {
    if (made_at_fork_ != forks.load(std::memory_order_relaxed)) {
      // In a child: the parent's queue may hold the parent's records and
      // locks a thread of the parent held; it is left untouched.
      new std::shared_ptr<Queue>(std::move(queue_));
      new std::vector<Waiting>(std::move(unpublished_));
      held_.clear();  // the parent's to write
      queue_ = std::make_shared<Queue>();
      registered_ = false;
      made_at_fork_ = forks.load();
    }
    return *queue_;
  }
  Queue& registered_queue() {
    Queue& q = queue();
    if (!registered_) {
      Writer::get().add(queue_);
      registered_ = true;
    }
    return q;
  }
  // Records queued since the last publish, in order: only this thread
  // touches them, so queuing one takes no lock.
  std::vector<Waiting>& unpublished() {
    queue();  // a child after a fork leaves the parent's alone
    return unpublished_;
  }
  // Texts of this thread's launch event, held to be written together to
  // one output. Only while nothing of this thread waits (an emit_later
  // releases them first), so that they are always its oldest.
  bool holds() {
    queue();  // a child after a fork leaves the parent's alone
    return !held_.empty();
  }
  // Holds `text` behind what is held; false where it cannot (another
  // output's texts are held, or records of this thread wait).
  bool hold(const std::string& output, const std::string& text) {
    if (!holds()) {
      if (!unpublished_.empty() || !queue_->empty()) return false;
      held_output_ = output;
    } else if (held_output_ != output) {
      return false;
    }
    held_ += text;
    return true;
  }
  void release_held() {
    if (!holds()) return;
    write_out(held_output_, held_);
    held_.clear();
  }
  // Hands the unpublished records to the queue, the writer thread's to
  // write: one lock for all of them.
  void publish() {
    std::vector<Waiting>& records = unpublished();
    if (records.empty()) return;
    Queue& q = registered_queue();
    {
      std::lock_guard<std::mutex> lock(q.mu);
      for (Waiting& w : records) q.items.push_back(std::move(w));
    }
    records.clear();
    Writer::get().poke();
  }
  ~ThisThread() {
    try {
      release_held();
      publish();
      queue().drain(true);
      if (registered_) Writer::get().remove(queue_.get());
      // The main thread ends the process: the writer must not outlive
      // what it uses.
      if (getpid() == static_cast<pid_t>(syscall(SYS_gettid))) Writer::stop_if_running();
    } catch (...) {
      // Nothing can be reported any more.
    }
  }

 private:
  std::shared_ptr<Queue> queue_ = std::make_shared<Queue>();
  std::vector<Waiting> unpublished_;
  std::string held_, held_output_;
  bool registered_ = false;
  int made_at_fork_ = forks.load();
};
thread_local ThisThread this_thread;

}  // namespace

void emit(const std::string& output, const std::string& text) {
  this_thread.release_held();
  if (std::vector<Waiting>& unpublished = this_thread.unpublished(); !unpublished.empty()) {
    unpublished.push_back({output, text, nullptr});  // behind this thread's records
    return;
  }
  Queue& q = this_thread.queue();
  {
    std::lock_guard<std::mutex> lock(q.mu);
    if (!q.items.empty()) {
      // Behind this thread's records that wait for the GPU.
      q.items.push_back({output, text, nullptr});
      return;
    }
  }
  write_out(output, text);
}

void emit_held(const std::string& output, const std::string& text) {
  // Else at once, behind what waits (emit writes what is held first).
  if (!this_thread.hold(output, text)) emit(output, text);
}

void release_held_records() { this_thread.release_held(); }

void emit_later(const std::string& output, std::unique_ptr<LateRecord> record) {
  this_thread.release_held();
  std::vector<Waiting>& unpublished = this_thread.unpublished();
  unpublished.push_back({output, "", std::move(record)});
  // A caller that takes no launch event still has them written as it goes.
  if (unpublished.size() >= kPublishEvery) this_thread.publish();
}

void publish_records() { this_thread.publish(); }

void flush_records() {
  this_thread.release_held();
  this_thread.publish();
  this_thread.queue().drain(true);
}

bool records_waiting() {
  return this_thread.holds() || !this_thread.unpublished().empty() || !this_thread.queue().empty();
}

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

void report_stop(const std::string& output, const std::string& message) {
  if (output != "stderr") report_error(message);
}

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
  // Never destroyed: the saver's thread names files with it while the
  // process exits (saver.h).
  static const std::string* token = [] {
    std::random_device random;
    const uint64_t bits = (static_cast<uint64_t>(random()) << 32) ^ random();
    char hex[24];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(bits));
    return new std::string(hex);
  }();
  return *token;
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
