// device.h's statistics kept by generated kernels: a run's workspace back
// to the host in one copy, and a slot's fields as a record's statistics.
//
// Why one copy a run: the kernels that Inductor generates reduce what they
// store into the workspace as they run (inductor/stored_stats.py), so a
// record needs no statistics launch of its own. What is left is getting the
// slots to the host, which costs one copy and one ticket per run, whatever
// the number of kernels, and nothing on the model's thread but queuing them.
#include "device.h"

#include "aoti_debug_printer.h"
#include "cuda/memory.cuh"
#include "cuda/stats_kernels.cuh"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace aoti_debug_printer::device {

using namespace detail;

namespace {

constexpr int64_t kSlotBytes = AOTI_DEBUG_PRINTER_STORED_SLOT * sizeof(int64_t);

double double_of_bits(int64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

// One slot's fields as the partial result every statistics kernel makes,
// so that stats_of, the one place that turns partials into statistics, makes
// the record's. The shift is zero: the kernels sum the values themselves.
TensorStats stats_of_slot(const int64_t* slot, int64_t numel) {
  Acc<float> a = empty_acc<float>();
  a.nan = static_cast<unsigned long long>(slot[AOTI_DEBUG_PRINTER_STORED_NAN]);
  a.pos_inf = static_cast<unsigned long long>(slot[AOTI_DEBUG_PRINTER_STORED_POS_INF]);
  a.neg_inf = static_cast<unsigned long long>(slot[AOTI_DEBUG_PRINTER_STORED_NEG_INF]);
  a.zeros = static_cast<unsigned long long>(slot[AOTI_DEBUG_PRINTER_STORED_ZEROS]);
  // A key of zero: no finite value (stats_of then sets no min or max).
  if (slot[AOTI_DEBUG_PRINTER_STORED_MAX_KEY] != 0) {
    a.max = float_of_stored_key(slot[AOTI_DEBUG_PRINTER_STORED_MAX_KEY]);
    a.min = float_of_stored_key((int64_t{1} << 33) - slot[AOTI_DEBUG_PRINTER_STORED_MIN_KEY]);
  }
  a.s1 = double_of_bits(slot[AOTI_DEBUG_PRINTER_STORED_SUM]);
  a.s2 = double_of_bits(slot[AOTI_DEBUG_PRINTER_STORED_SUM_OF_SQUARES]);
  a.shift = 0;
  // Real floating types derive `finite` and `absmax` from the counts and
  // min/max, as stats_of does for every such dtype (key_t is float for all
  // the dtypes the kernels keep: float32, float16, bfloat16).
  return stats_of<float>(a, numel, std::nullopt);
}

// Pinned buffers that ended runs gave back: a run's copy must not cost a
// cudaHostAlloc (tens of microseconds) on the model's thread.
struct Pinned {
  void* data = nullptr;
  int64_t bytes = 0;
};
class PinnedPool {
 public:
  Pinned take(int64_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->bytes >= bytes) {
          const Pinned p = *it;
          free_.erase(it);
          return p;
        }
      }
    }
    Pinned p;
    p.bytes = std::max<int64_t>(bytes, 4096);
    C10_CUDA_CHECK(cudaHostAlloc(&p.data, static_cast<size_t>(p.bytes), cudaHostAllocPortable));
    return p;
  }
  void give(Pinned p) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(p);
  }

 private:
  std::mutex mu_;
  std::vector<Pinned> free_;
};

// Never destroyed: runs may end while the process exits.
PinnedPool& pinned_pool() {
  static auto* pool = new PinnedPool;
  return *pool;
}

}  // namespace

class StoredRun {
 public:
  explicit StoredRun(const at::Tensor& workspace)
      : workspace_(workspace),
        stream_(c10::cuda::getCurrentCUDAStream(workspace.device().index()).stream()),
        bytes_(workspace.numel() * static_cast<int64_t>(sizeof(int64_t))) {
    // Pinned, with the ticket behind the slots.
    pinned_ = pinned_pool().take(bytes_ + static_cast<int64_t>(sizeof(int64_t)));
    host_ = pinned_.data;
    ticket() = 0;
  }
  ~StoredRun() {
    // Its copy may still be in flight (a run that never ended): the memory
    // must outlive it. At process exit the runtime may be gone.
    if (queued_.load() && !landed_now()) (void)cudaStreamSynchronize(stream_);
    pinned_pool().give(pinned_);
  }
  StoredRun(const StoredRun&) = delete;
  StoredRun& operator=(const StoredRun&) = delete;

  bool serves(const at::Tensor& workspace) const {
    return workspace.const_data_ptr() == workspace_.const_data_ptr() &&
           workspace.numel() == workspace_.numel() &&
           c10::cuda::getCurrentCUDAStream(workspace.device().index()).stream() == stream_;
  }

  // Never throws: where CUDA refuses the copy (a context an earlier kernel
  // broke), the run's records say so, and the ones behind them still go out.
  void copy_back() noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    if (queued_.load()) return;
    try {
      const c10::cuda::CUDAGuard guard(workspace_.device());
      C10_CUDA_CHECK(cudaMemcpyAsync(host_, workspace_.const_data_ptr(), bytes_,
                                     cudaMemcpyDeviceToHost, stream_));
      C10_CUDA_CHECK(cudaMemcpyAsync(&ticket(), device_one(workspace_.device().index()),
                                     sizeof(int64_t), cudaMemcpyDeviceToHost, stream_));
    } catch (const c10::Error& e) {
      failed_ = e.what_without_backtrace();
    } catch (const std::exception& e) {
      failed_ = e.what();
    }
    queued_.store(true);
    // The workspace goes back to the model's allocator once its copy is
    // queued: stream order keeps the copy ahead of any later use.
    workspace_ = at::Tensor();
  }

  bool landed_now() const {
    return queued_.load() &&
           (!failed_.empty() || reinterpret_cast<const volatile int64_t&>(ticket()) == 1);
  }

  std::string wait() {
    if (!queued_.load()) copy_back();
    if (!failed_.empty()) return failed_;
    while (!landed_now()) {
      const cudaError_t err = cudaStreamQuery(stream_);
      if (err == cudaSuccess) break;
      if (err != cudaErrorNotReady)
        return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
      std::this_thread::yield();
    }
    return "";
  }

  TensorStats stats(int64_t field, int64_t numel, const std::string& error) const {
    if (!landed_now() || !failed_.empty() || field < 0 ||
        (field + AOTI_DEBUG_PRINTER_STORED_SLOT) * 8 > bytes_) {
      TensorStats s;
      s.numel = numel;
      s.unsupported = "statistics not computed: " +
                      (error.empty() && failed_.empty()
                           ? std::string("the GPU has not run this record's kernel")
                           : "the GPU failed before this record's statistics came back (" +
                                 (failed_.empty() ? error : failed_) + ")");
      return s;
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    return stats_of_slot(static_cast<const int64_t*>(host_) + field, numel);
  }

 private:
  int64_t& ticket() const {
    return *reinterpret_cast<int64_t*>(static_cast<uint8_t*>(host_) + bytes_);
  }

  at::Tensor workspace_;
  cudaStream_t stream_;
  int64_t bytes_;
  Pinned pinned_;
  void* host_ = nullptr;
  std::mutex mu_;
  std::atomic<bool> queued_{false};
  // Why the copy back could not be queued; set before queued_.
  std::string failed_;
};

bool is_statistics_workspace(const at::Tensor& workspace) {
  return workspace.is_cuda() && workspace.scalar_type() == at::kLong && workspace.is_contiguous() &&
         workspace.numel() > 0 && workspace.numel() % AOTI_DEBUG_PRINTER_STORED_SLOT == 0;
}

void switch_on_stored(const at::Tensor& workspace) {
  const c10::cuda::CUDAGuard guard(workspace.device());
  C10_CUDA_CHECK(cudaMemcpyAsync(
      workspace.data_ptr<int64_t>() + AOTI_DEBUG_PRINTER_STORED_SWITCH,
      device_one(workspace.device().index()), sizeof(int64_t), cudaMemcpyDeviceToDevice,
      c10::cuda::getCurrentCUDAStream(workspace.device().index()).stream()));
}

std::shared_ptr<StoredRun> stored_run(const at::Tensor& workspace) {
  return std::make_shared<StoredRun>(workspace);
}

bool stored_run_serves(const StoredRun& run, const at::Tensor& workspace) {
  return run.serves(workspace);
}

void copy_back(StoredRun& run) { run.copy_back(); }

bool landed(const StoredRun& run) { return run.landed_now(); }

std::string wait_for(StoredRun& run) { return run.wait(); }

TensorStats stored_stats(const StoredRun& run, int64_t field, int64_t numel,
                         const std::string& error) {
  return run.stats(field, numel, error);
}

TensorStats stored_stats_now(const at::Tensor& workspace, int64_t field, int64_t numel) {
  TORCH_CHECK(is_statistics_workspace(workspace) && field >= 0 &&
                  field + AOTI_DEBUG_PRINTER_STORED_SLOT <= workspace.numel(),
              "no statistics slot at field ", field, " of this workspace");
  const c10::cuda::CUDAGuard guard(workspace.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(workspace.device().index()).stream();
  auto* host = reinterpret_cast<int64_t*>(host_result_buffer(kSlotBytes));
  C10_CUDA_CHECK(cudaMemcpyAsync(host, workspace.const_data_ptr<int64_t>() + field, kSlotBytes,
                                 cudaMemcpyDeviceToHost, stream));
  C10_CUDA_CHECK(cudaStreamSynchronize(stream));
  return stats_of_slot(host, numel);
}

}  // namespace aoti_debug_printer::device
