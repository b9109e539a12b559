#include "saver.h"

#include "device.h"
#include "format.h"
#include "output.h"
#include "save.h"
#include "settings.h"

#include <ATen/ops/from_blob.h>

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <thread>

namespace aoti_debug_printer::saver {
namespace staging {

constexpr int64_t kAlign = 64;

int64_t aligned(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Host memory handed out first in, first out: the saver frees snapshots in
// the order they were taken, so a ring needs no allocator. Data lives in
// [tail, head) or, wrapped, in [tail, size) and [0, head).
class Ring {
 public:
  Ring(std::shared_ptr<uint8_t> memory, int64_t size) : memory_(std::move(memory)), size_(size) {}
  int64_t size() const { return size_; }
  bool empty() const { return live_ == 0; }
  uint8_t* at(int64_t offset) const { return memory_.get() + offset; }

  std::optional<int64_t> take(int64_t bytes) {
    if (live_ == 0) head_ = tail_ = 0;
    const bool wrapped = head_ < tail_ || (head_ == tail_ && live_ > 0);
    int64_t offset = head_;
    if (wrapped) {
      if (tail_ - head_ < bytes) return std::nullopt;
    } else if (size_ - head_ < bytes) {
      if (tail_ < bytes) return std::nullopt;
      offset = 0;  // the end's room is skipped until the data before it goes
    }
    head_ = offset + bytes;
    ++live_;
    return offset;
  }
  // The oldest piece taken, [offset, offset + bytes), goes back.
  void give(int64_t offset, int64_t bytes) {
    --live_;
    tail_ = offset + bytes;
  }
  // The newest piece taken, at `offset`, goes back unused. Where its take
  // skipped the end's room, that room stays behind the tail until the
  // pieces before it go.
  void untake(int64_t offset) {
    --live_;
    head_ = offset;
  }

 private:
  std::shared_ptr<uint8_t> memory_;
  int64_t size_;
  int64_t head_ = 0, tail_ = 0, live_ = 0;
};

// What the saver's thread does, in order: a snapshot staged in a ring, or a
// manifest line alone.
struct Job {
  std::string dir;
  std::string line;
  // The run's environment line, noted on the model's thread ("" for none).
  std::string environment;
  TensorRecord record;
  at::Tensor host;  // a view of the ring's memory; undefined for a line
  std::shared_ptr<Ring> ring;
  int64_t offset = 0, bytes = 0;
  std::shared_ptr<device::HostCopy> copy;  // a CUDA tensor's, until it lands
};

class Saver {
 public:
  // Never destroyed: saves are written while the process exits.
  static Saver& get() {
    static auto* saver = new Saver;
    return *saver;
  }

  // Stages `t` and queues its snapshot; false where it cannot be staged.
  bool stage(const std::string& dir, TensorRecord& record, const at::Tensor& t) {
    const bool cuda = t.is_cuda();
    if (t.layout() != at::kStrided || !t.has_storage() || t.is_quantized() ||
        !(cuda || t.device().is_cpu())) {
      return false;
    }
    // Whole pieces only (aligned_alloc's size is a multiple of them).
    const int64_t bound = settings_now().save_memory / kAlign * kAlign;
    if (bound == 0) return false;
    // A dense tensor keeps its strides and is copied as its bytes lie; any
    // other view is made contiguous first, its elements only.
    const at::Tensor source = t.is_non_overlapping_and_dense() ? t : t.contiguous();
    const int64_t data_bytes = t.numel() * static_cast<int64_t>(t.element_size());
    const int64_t bytes = aligned(std::max<int64_t>(data_bytes, 1)) + (cuda ? kAlign : 0);
    std::unique_lock<std::mutex> lock(mu_);
    std::shared_ptr<Ring>& ring = cuda ? pinned_ : plain_;
    if (!ring || (ring->empty() && ring->size() != bound)) {
      std::shared_ptr<uint8_t> memory =
          cuda ? device::pinned_host_memory(bound)
               : std::shared_ptr<uint8_t>(static_cast<uint8_t*>(std::aligned_alloc(kAlign, bound)),
                                          [](uint8_t* m) { std::free(m); });
      if (!memory) throw std::bad_alloc();
      ring = std::make_shared<Ring>(std::move(memory), bound);
      // The CUDA runtime's own exit handlers may have come after the
      // constructor's: the queue is written before they run, too.
      if (cuda) std::atexit([] { get().wait(); });
    }
    if (bytes > ring->size()) return false;
    std::optional<int64_t> offset = ring->take(bytes);
    if (!offset) {
      const auto start = std::chrono::steady_clock::now();
      while (!(offset = ring->take(bytes))) room_.wait(lock);
      record.save_waited_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
    }
    // From here to the queue, whatever throws gives the piece back (the
    // newest), and the caller saves the record itself.
    try {
      Job job;
      job.dir = dir;
      job.ring = ring;
      job.offset = *offset;
      job.bytes = bytes;
      // The copy is made with the lock held: jobs are queued in the ring's
      // order, which is the order they go back in.
      uint8_t* memory = ring->at(*offset);
      job.host = at::from_blob(memory, source.sizes(), source.strides(),
                               at::TensorOptions().dtype(source.scalar_type()).device(at::kCPU));
      if (cuda) {
        job.copy = device::copy_to_host_later(source, data_bytes, memory,
                                              reinterpret_cast<int64_t*>(memory + bytes - kAlign));
      } else {
        job.host.copy_(source);
      }
      job.record = record;
      job.environment = environment_to_note(dir, record);
      push(std::move(job));
    } catch (...) {
      ring->untake(*offset);
      throw;
    }
    return true;
  }

  void line(const std::string& dir, const std::string& line) {
    std::unique_lock<std::mutex> lock(mu_);
    if (jobs_.empty()) {
      lock.unlock();
      saving([&] { aoti_debug_printer::append_to_manifest(dir, line); });
      return;
    }
    Job job;
    job.dir = dir;
    job.line = line;
    try {
      push(std::move(job));
    } catch (const std::exception&) {
      // No thread for it: written here, behind what the queue holds.
      lock.unlock();
      wait();
      saving([&] { aoti_debug_printer::append_to_manifest(dir, line); });
    }
  }

  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t mine = queued_;
    done_cv_.wait(lock, [&] { return done_ >= mine; });
  }

 private:
  Saver() {
    // A child of fork() has no saver thread, and the parent's queue and
    // staged memory are the parent's to write: the child starts with none.
    // The fork waits until the saver is between two jobs and holds its
    // lock, so that no lock the saver takes while writing (save.cpp's) is
    // left held in the child; the child's condition variables are made
    // afresh, as nothing of the parent waits on them there, and the
    // parent's rings are left as they are (pinned memory cannot be freed
    // in a child).
    pthread_atfork(
        [] {
          Saver& s = get();
          s.mu_.lock();
          while (s.writing_) {
            s.mu_.unlock();
            std::this_thread::sleep_for(std::chrono::microseconds(100));
            s.mu_.lock();
          }
        },
        [] { get().mu_.unlock(); },
        [] {
          Saver& s = get();
          s.mu_.unlock();
          new (&s.room_) std::condition_variable;
          new (&s.work_) std::condition_variable;
          new (&s.done_cv_) std::condition_variable;
          new std::deque<Job>(std::move(s.jobs_));  // never freed: the parent's
          s.jobs_.clear();
          s.done_ = s.queued_;
          s.running_ = false;
          new std::shared_ptr<Ring>(std::move(s.pinned_));  // never freed, as above
          new std::shared_ptr<Ring>(std::move(s.plain_));
        });
    // What is queued is written before the process ends.
    std::atexit([] { get().wait(); });
  }

  // With mu_ held. Throws, queuing nothing, where no thread can run it.
  void push(Job job) {
    jobs_.push_back(std::move(job));
    if (!running_) {
      try {
        std::thread([this] { run(); }).detach();
      } catch (...) {
        jobs_.pop_back();
        throw;
      }
      running_ = true;
    }
    ++queued_;
    work_.notify_one();
  }

  void run() {
    for (;;) {
      Job* job = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_.wait(lock, [&] { return !jobs_.empty(); });
        // A deque's elements stay put while others are pushed behind them.
        job = &jobs_.front();
        writing_ = true;
      }
      try {
        write(*job);
      } catch (...) {
        // Reported where it failed (saving); the jobs behind it go on.
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (job->ring) job->ring->give(job->offset, job->bytes);
      jobs_.pop_front();
      writing_ = false;
      ++done_;
      room_.notify_all();
      done_cv_.notify_all();
    }
  }

  static void write(Job& job) {
    if (!job.host.defined()) {
      saving([&] { aoti_debug_printer::append_to_manifest(job.dir, job.line); });
      return;
    }
    const std::string error = job.copy ? device::wait_for(*job.copy) : "";
    if (!error.empty()) {
      // The GPU failed before the copy landed: the line says so, as a save
      // that failed does, the value counts as lost, and the failure is
      // reported as theirs are.
      const std::string why = "the GPU failed before its copy landed (" + error + ")";
      job.record.stats.unsupported = "statistics not computed: " + why;
      saving([&] {
        if (!job.environment.empty())
          aoti_debug_printer::append_to_manifest(job.dir, job.environment);
        aoti_debug_printer::append_to_manifest(job.dir, format_json(job.record, "", why) + "\n");
        throw std::runtime_error("a snapshot of " + job.record.where.kernel +
                                 " could not be saved: " + why);
      });
      return;
    }
    try {
      fill_contents(job.record, host_contents(job.host, 0));
    } catch (const std::exception& e) {
      job.record.stats.unsupported = std::string("statistics not computed: ") + e.what();
    }
    saving([&] { save_snapshot(job.dir, job.record, job.host, job.environment); });
  }

  std::mutex mu_;
  std::condition_variable room_, work_, done_cv_;
  std::deque<Job> jobs_;
  uint64_t queued_ = 0, done_ = 0;
  bool running_ = false;
  bool writing_ = false;  // the saver's thread is writing the front job
  std::shared_ptr<Ring> pinned_, plain_;
};

}  // namespace staging

void save(const std::string& dir, TensorRecord record, const at::Tensor& t) {
  try {
    if (staging::Saver::get().stage(dir, record, t)) return;
  } catch (const std::exception& e) {
    // No staging memory, or a copy CUDA would not queue: saved as before.
    static std::once_flag told;
    std::call_once(told, [&] {
      report_note(std::string("level 1 saves on the model's thread: ") + e.what());
    });
  }
  save_now(dir, std::move(record), t, false);
}

TensorStats save_now(const std::string& dir, TensorRecord record, const at::Tensor& t,
                     bool with_fingerprint) {
  // Behind what is queued: the time is the model's wait. A snapshot needs
  // every element on the host anyway: one copy, and the statistics from it.
  const auto start = std::chrono::steady_clock::now();
  staging::Saver::get().wait();
  const at::Tensor host = to_host(t);
  fill_contents(record, host_contents(host, 0, with_fingerprint && t.device().is_cpu()));
  record.save_waited_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  saving([&] { save_snapshot(dir, record, host); });
  return record.stats;
}

void append_to_manifest(const std::string& dir, const std::string& line) {
  staging::Saver::get().line(dir, line);
}

void wait_for_saves() { staging::Saver::get().wait(); }

}  // namespace aoti_debug_printer::saver
