#include "job.h"

#include "output.h"
#include "saver.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace aoti_debug_printer::job {
namespace {

using namespace std::chrono_literals;

struct Job {
  std::string host;
  uint16_t port = 0;
  int64_t rank = -1;
  int64_t world = 0;
  // torchrun keeps its store across restarts of the job: keys of this attempt.
  std::string stopped_key, said_key;
};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::optional<Job> this_job(const Settings& settings) {
  if (!settings.end_job || settings.rank < 0) return std::nullopt;
  Job job;
  job.host = env("MASTER_ADDR");
  try {
    job.world = std::stoll(env("WORLD_SIZE"));
    job.port = static_cast<uint16_t>(std::stoul(env("MASTER_PORT")));
  } catch (const std::exception&) {
    return std::nullopt;  // not an env:// job: nothing to tell
  }
  if (job.host.empty() || job.world < 2) return std::nullopt;
  job.rank = settings.rank;
  const std::string attempt = env("TORCHELASTIC_RESTART_COUNT");
  const std::string prefix = "aoti_debug_printer/" + (attempt.empty() ? "0" : attempt) + "/";
  job.stopped_key = prefix + "stopped";
  job.said_key = prefix + "said";
  return job;
}

std::unique_ptr<c10d::TCPStore> connect(const Job& job) {
  c10d::TCPStoreOptions options;
  options.port = job.port;
  options.isServer = false;
  options.waitWorkers = false;  // a client of the job's store, not one of its workers
  options.timeout = 10s;
  return std::make_unique<c10d::TCPStore>(job.host, options);
}

// The process's last words, then its end: no destructor may wait on a peer
// that will never answer.
[[noreturn]] void end_process(const std::string& line) {
  std::fprintf(stderr, "aoti-debug-printer: %s\n", line.c_str());
  std::fflush(nullptr);
  std::_Exit(kEndedExitCode);
}

std::atomic<bool> stopping{false};

// Until every rank that watches has said it: the store may live in one of
// them (env:// without torchrun: rank 0's), and must outlast the others'
// reading it.
void wait_for_the_others(c10d::TCPStore& store, const Job& job) {
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  while (store.add(job.said_key, 0) < job.world - 1 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
}

// The thread that watches the store for another rank's stop. It asks every
// 100 ms; at the process's exit (a job that ended well) it is told to stop
// and joined, before the libraries it calls are torn down.
class Watcher {
 public:
  explicit Watcher(const Job& job) : thread_([this, job] { watch_store(job); }) {}
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;
  ~Watcher() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      exiting_ = true;
    }
    woken_.notify_all();
    thread_.join();
  }

 private:
  // Waits 100 ms; false once the process exits.
  bool pause() {
    std::unique_lock<std::mutex> lock(mutex_);
    return !woken_.wait_for(lock, 100ms, [this] { return exiting_; });
  }

  void watch_store(const Job& job) {
    std::unique_ptr<c10d::TCPStore> store;
    try {
      store = connect(job);
    } catch (const std::exception& e) {
      report_error("end_job: rank " + std::to_string(job.rank) +
                   " cannot watch the job's store: " + e.what());
      return;
    }
    std::string said;
    try {
      while (!store->check({job.stopped_key}) || stopping.load()) {
        if (!pause()) return;
      }
      const std::vector<uint8_t> v = store->get(job.stopped_key);
      said.assign(v.begin(), v.end());
      store->add(job.said_key, 1);
      wait_for_the_others(*store, job);
    } catch (const std::exception&) {
      if (said.empty()) return;  // the store is gone: the job has ended
    }
    // Records the model's thread still queues wait on its stream, which may
    // never move again (a collective without its peer): not waited for.
    end_process("rank " + std::to_string(job.rank) + " ends: " + said);
  }

  std::mutex mutex_;
  std::condition_variable woken_;
  bool exiting_ = false;
  std::thread thread_;  // last: it starts once the members above exist
};

}  // namespace

void watch(const Settings& settings) {
  static std::once_flag once;
  // Destroyed at exit, after every static made before the first watch.
  static std::optional<Watcher> watcher;
  const std::optional<Job> job = this_job(settings);
  if (!job) return;
  std::call_once(once, [&] { watcher.emplace(*job); });
}

void stopped(const Settings& settings, const std::string& message) {
  const std::optional<Job> job = this_job(settings);
  if (!job) return;
  stopping.store(true);
  const std::string line = "rank " + std::to_string(job->rank) + " stopped the job: " + message;
  try {
    std::unique_ptr<c10d::TCPStore> store = connect(*job);
    // Where two ranks stop at once, the first one's line is the one the
    // others write.
    store->compareSet(job->stopped_key, {}, std::vector<uint8_t>(line.begin(), line.end()));
    wait_for_the_others(*store, *job);
  } catch (const std::exception& e) {
    report_error("end_job: the other ranks could not be told: " + std::string(e.what()));
  }
  flush_records();
  saver::wait_for_saves();  // _Exit runs no exit handler
  end_process(line);
}

}  // namespace aoti_debug_printer::job
