// device.h's snapshots: one now (snapshot), or queued without waiting into
// this thread's ring of pinned memory (snapshot_later), dense tensors
// waiting in the thread's batch for one launch per dtype (launch_batch).
#include "device.h"

#include "cuda/memory.cuh"
#include "cuda/plan.cuh"
#include "cuda/stats_kernels.cuh"

#include <ATen/Dispatch_v2.h>
#include <ATen/EmptyTensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace aoti_debug_printer::device {

using namespace detail;

namespace {

// `device` current for this object's life. The wrapper runs on its
// tensors' device, so it mostly is already: then no CUDAGuard, whose
// constructor and destructor would each ask CUDA for it again.
class DeviceMadeCurrent {
 public:
  explicit DeviceMadeCurrent(int device) {
    if (c10::cuda::current_device() != device)
      guard_.emplace(static_cast<c10::DeviceIndex>(device));
  }

 private:
  std::optional<c10::cuda::CUDAGuard> guard_;
};

// Pinned, mapped host memory that this thread's queued snapshots land in,
// filled front to back and reused from the front once every snapshot queued
// in it has been taken. Kept alive by its outstanding Landings, so that a
// thread's exit never frees memory a queued kernel still writes. Its thread
// queues snapshots; the writer thread (output.cpp) takes them.
struct Ring {
  static constexpr int64_t kBytes = int64_t{4} << 20;
  // A dense tensor's statistics waiting in the batch (snapshot_later with
  // `batched`): its slot is taken, its kernel not launched yet.
  struct Waiting {
    const Landing* landing;  // erased from the batch if it goes first
    // Kept until launched: the wrapper may release it before records_end
    // (AOTI_DEBUG_PRINTER_RECORDS_CONTINUE), and its memory must not go
    // back to the allocator, or the driver, before the kernel reading it
    // is queued.
    at::Tensor tensor;
    BatchItem item;
    int64_t blocks;
  };
  std::mutex mu;  // guards used and batch
  uint8_t* data = nullptr;
  int64_t used = 0;
  // Landings not released yet. Taken under `mu`; released without it (the
  // writer thread releases one per record). `used` goes back to the front
  // when the next snapshot finds none outstanding.
  std::atomic<int64_t> outstanding{0};
  cudaStream_t stream{};
  int device = 0;  // the stream's
  bool dependent_launch = false;
  std::vector<Waiting> batch;
  std::vector<Waiting> launching;  // the batch being launched, by the owner only
  // The thread that queues into this ring: the only one that may launch
  // its batch, in its stream order.
  const std::thread::id owner = std::this_thread::get_id();
  // Unique per slot use: a ticket left in reused memory never matches.
  unsigned long long next_ticket = 1;
  // A captured graph's ring: device memory, merged into host memory by the
  // graph itself (end_capture).
  const bool on_device = false;
  Ring() = default;
  explicit Ring(bool device_memory) : on_device(device_memory) {}
  ~Ring() {
    // At process exit the runtime may be gone.
    if (data) (void)(on_device ? cudaFree(data) : cudaFreeHost(data));
  }
};

std::shared_ptr<Ring>& this_thread_ring() {
  thread_local std::shared_ptr<Ring> ring = std::make_shared<Ring>();
  return ring;
}

// While this thread captures a CUDA graph (begin_capture to end_capture):
// the capture's ring, in device memory. A captured kernel writes its slot at
// every replay, so a slot is never reused: a full ring is followed by a new
// one, and each is kept by the Landings of the captured run (graphs.h keeps
// those), which end_capture points at their merged results in host memory.
thread_local std::shared_ptr<Ring> capture_ring;
thread_local std::vector<std::shared_ptr<Landing>> captured_landings;

// Pinned memory for a ring. Inside a capture cudaHostAlloc is not captured,
// but a capture in the global mode (torch.cuda.graph's) forbids it on every
// thread: relaxed for this call only, as PyTorch's caching host allocator
// does.
// A captured ring's device memory likewise (cudaMalloc).
void* allocate(int64_t bytes, bool on_device) {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  C10_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  void* data = nullptr;
  const cudaError_t err =
      on_device ? cudaMalloc(&data, bytes)
                : cudaHostAlloc(&data, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
  C10_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  C10_CUDA_CHECK(err);
  return data;
}

void allocate(Ring& ring) {
  ring.data = static_cast<uint8_t*>(allocate(Ring::kBytes, ring.on_device));
}

// Launches `count` waiting tensors of one dtype (at most kBatchItems) on
// `ring`'s stream.
template <typename T>
void launch_batch_of(const Ring& ring, const Ring::Waiting* waiting, size_t count) {
  Batch b{};
  int64_t blocks = 0;
  for (size_t i = 0; i < count; ++i) {
    b.items[i] = waiting[i].item;
    b.items[i].first_block = static_cast<unsigned int>(blocks);
    blocks += waiting[i].blocks;
  }
  b.count = static_cast<int>(count);
  launch_kernel(batch_partials<T>, blocks, kDenseThreads, ring.stream, ring.dependent_launch, b);
}

// Launches what `ring`'s batch holds, when called by its owner.
void launch_batch_of(Ring& ring) {
  if (std::this_thread::get_id() != ring.owner) return;
  std::vector<Ring::Waiting>& batch = ring.launching;  // the owner's alone
  {
    std::lock_guard<std::mutex> lock(ring.mu);
    if (ring.batch.empty()) return;
    batch.swap(ring.batch);
  }
  // Emptied however this ends: the tensors' references go, the capacity
  // stays for the next batch.
  struct Cleared {
    std::vector<Ring::Waiting>& batch;
    ~Cleared() { batch.clear(); }
  } cleared{batch};
  // Their slots stay taken while the ring lives (this thread queues no
  // other snapshot meanwhile), even if a Landing has gone since the swap.
  const DeviceMadeCurrent current(ring.device);
  // One launch per dtype, kBatchItems tensors at most, each dtype's in the
  // order they were queued.
  const auto by_dtype = [](const Ring::Waiting& a, const Ring::Waiting& b) {
    return a.tensor.scalar_type() < b.tensor.scalar_type();
  };
  // Mostly of one dtype already: then stable_sort's buffer is not asked for.
  if (!std::is_sorted(batch.begin(), batch.end(), by_dtype))
    std::stable_sort(batch.begin(), batch.end(), by_dtype);
  for (size_t first = 0, end = 0; first < batch.size(); first = end) {
    const at::ScalarType dtype = batch[first].tensor.scalar_type();
    while (end < batch.size() && end - first < kBatchItems &&
           batch[end].tensor.scalar_type() == dtype)
      ++end;
    AT_DISPATCH_V2(dtype, "aoti_debug_printer_device_stats",
                   AT_WRAP([&] { launch_batch_of<scalar_t>(ring, &batch[first], end - first); }),
                   AOTI_DEBUG_PRINTER_DTYPES);
  }
}

}  // namespace

struct Landing {
  std::shared_ptr<Ring> ring;
  const uint8_t* slot = nullptr;
  Layout layout;  // not the Plan: its iterator borrows the tensor, freed by now
  unsigned long long ticket = 0;
  // Partials known to have landed, in order: landed() reads each ticket once.
  mutable int64_t parts_landed = 0;
  cudaStream_t stream{};
  at::ScalarType dtype{};
  at::DimVector sizes;
  int64_t numel = 0;
  bool with_values = false;
  // The partials hold the fingerprint's terms: take finishes it.
  bool with_fingerprint = false;
  std::string unsupported;
  // A captured record's merged result (end_capture): the host memory `slot`
  // points into, shared by the capture's records.
  std::shared_ptr<void> merged;
  ~Landing() {
    if (!ring) return;
    // Every partial landed: launched and run, so out of the batch. Else it
    // may never have been launched, and nothing may write the slot once it
    // is free again.
    if (parts_landed < layout.parts) {
      std::lock_guard<std::mutex> lock(ring->mu);
      auto& batch = ring->batch;
      batch.erase(std::remove_if(batch.begin(), batch.end(),
                                 [this](const Ring::Waiting& w) { return w.landing == this; }),
                  batch.end());
    }
    ring->outstanding.fetch_sub(1, std::memory_order_release);
  }
};

bool computes_stats_on(const at::Tensor& t) { return t.is_cuda() && t.layout() == at::kStrided; }

Snapshot snapshot(const at::Tensor& t, bool with_values, bool with_fingerprint) {
  TORCH_CHECK(t.is_cuda(), "device statistics need a CUDA tensor");
  Snapshot snap;
  snap.stats.numel = t.numel();
  if (t.numel() == 0) {
    snap.stats.mean = snap.stats.std = std::numeric_limits<double>::quiet_NaN();
    if (with_fingerprint)
      snap.stats.fingerprint = fingerprint::finish(0, 0, static_cast<int>(t.scalar_type()));
    return snap;
  }
  const c10::cuda::CUDAGuard guard(t.device());
  const std::optional<Plan> plan = plan_of(t, with_values);
  if (!plan) {
    snap.stats.unsupported = no_stats_for(t.scalar_type());
    return snap;
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
  // Each synchronous snapshot waits for its own kernels before returning, so
  // one buffer per thread is never written by two tensors at once.
  uint8_t* back = host_result_buffer(static_cast<size_t>(result_bytes(plan->layout)));
  queue_snapshot(t, *plan, stream, with_values, with_fingerprint, back, false, 0);
  C10_CUDA_CHECK(cudaStreamSynchronize(stream));
  return read_back(back, plan->layout, t.scalar_type(), t.sizes(), t.numel(), with_values,
                   with_fingerprint);
}

bool can_snapshot_later(const at::Tensor& t, bool with_values) {
  // Half the ring leaves room for the partials: 8 per SM at most (plan_of),
  // about 110 KB on an H100.
  return computes_stats_on(t) && t.numel() > 0 && values_room(t, with_values) <= Ring::kBytes / 2;
}

std::shared_ptr<Landing> snapshot_later(const at::Tensor& t, bool with_values, bool batched,
                                        bool with_fingerprint) {
  const DeviceMadeCurrent current(t.device().index());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
  const bool captured = capture_ring != nullptr;
  auto l = std::make_shared<Landing>();
  l->numel = t.numel();
  std::optional<Plan> plan = plan_of(t, with_values);
  if (captured && plan) {
    // The scratch is the thread's, shared with its records outside the
    // graph, which may run beside a replay: a captured record of a
    // non-contiguous tensor prints no values. And no programmatic
    // dependent launch: the graph's edges order its kernels.
    if (plan->scratch > 0) {
      with_values = false;
      plan = plan_of(t, false);
    }
    if (plan) plan->dependent_launch = false;
  }
  if (!plan) {
    l->unsupported = no_stats_for(t.scalar_type());
    return l;
  }
  const int64_t bytes = result_bytes(plan->layout);
  TORCH_CHECK(bytes <= Ring::kBytes, "this tensor's results do not fit in the ring");
  if (captured && capture_ring->data &&
      (capture_ring->used + bytes > Ring::kBytes || capture_ring->stream != stream)) {
    // Its batch goes first, into the graph: then a ring of its own.
    launch_batch_of(*capture_ring);
    capture_ring = std::make_shared<Ring>(true);
  }
  std::shared_ptr<Ring>& ring = captured ? capture_ring : this_thread_ring();
  std::lock_guard<std::mutex> lock(ring->mu);
  // None outstanding: every slot has been read, and the ring starts again
  // from the front (never a capture's: its graph writes them at each replay).
  if (!captured && ring->outstanding.load(std::memory_order_acquire) == 0) ring->used = 0;
  if (!captured && ring->used > 0) {
    // Queued kernels share the device scratch in stream order: another
    // stream, or scratch that must grow under them, waits for them first.
    if (ring->stream != stream || ring->used + bytes > Ring::kBytes ||
        plan->scratch > scratch_of(t.device().index()).size) {
      return nullptr;
    }
  }
  if (!ring->data) allocate(*ring);
  l->ring = ring;
  ring->outstanding.fetch_add(1, std::memory_order_relaxed);
  ring->stream = stream;
  ring->device = t.device().index();
  ring->dependent_launch = plan->dependent_launch;
  uint8_t* slot = ring->data + ring->used;
  ring->used += bytes;
  l->slot = slot;
  l->layout = plan->layout;
  l->ticket = ring->next_ticket++;
  l->stream = stream;
  l->dtype = t.scalar_type();
  l->sizes = t.sizes();
  l->with_values = with_values;
  l->with_fingerprint = with_fingerprint;
  if (captured) captured_landings.push_back(l);
  // A dense tensor waits for the batch; its values, if printed, come with
  // its statistics where they are in order (contiguous). The batch's kernel
  // adds no fingerprint: the guard's snapshot takes a launch of its own.
  if (batched && !with_fingerprint && plan->dense && (!with_values || t.is_contiguous())) {
    BatchItem item{};
    item.x = t.const_data_ptr();
    item.n = t.numel();
    item.parts = slot + partials_at(plan->layout);
    item.tickets = reinterpret_cast<unsigned long long*>(slot);
    item.ticket = l->ticket;
    item.values = with_values ? slot + values_at(plan->layout) : nullptr;
    ring->batch.push_back({l.get(), t, item, plan->layout.parts});
    return l;
  }
  queue_snapshot(t, *plan, stream, with_values, with_fingerprint, slot, true, l->ticket);
  return l;
}

bool serves_for(const Landing& l, const at::Tensor& t, bool with_values) {
  return l.with_values == with_values && l.dtype == t.scalar_type() &&
         l.stream == c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

void launch_batch() {
  if (capture_ring) launch_batch_of(*capture_ring);
  launch_batch_of(*this_thread_ring());
}

namespace {

// Captures, after the captured records' kernels, the merge of each one's
// partials into one, in host memory that its Landing then points at: one
// launch per stream and dtype (stats_kernels.cuh: merge_partials).
void merge_captured(std::vector<std::shared_ptr<Landing>>& landings) {
  landings.erase(std::remove_if(landings.begin(), landings.end(),
                                [](const auto& l) { return !l->unsupported.empty() || !l->ring; }),
                 landings.end());
  if (landings.empty()) return;
  std::stable_sort(landings.begin(), landings.end(), [](const auto& a, const auto& b) {
    return a->stream != b->stream ? a->stream < b->stream : a->dtype < b->dtype;
  });
  // [jobs | each record's result: ticket, one partial, its values].
  const int64_t jobs_bytes = round_up(static_cast<int64_t>(landings.size() * sizeof(MergeJob)));
  int64_t bytes = jobs_bytes;
  for (const auto& l : landings) bytes += result_bytes(Layout{1, l->layout.values_room});
  auto* memory = static_cast<uint8_t*>(allocate(bytes, false));
  const std::shared_ptr<void> merged(memory, [](void* m) { (void)cudaFreeHost(m); });
  auto* jobs = reinterpret_cast<MergeJob*>(memory);
  int64_t at = jobs_bytes;
  for (size_t i = 0; i < landings.size(); ++i) {
    Landing& l = *landings[i];
    const Layout one{1, l.layout.values_room};
    uint8_t* out = memory + at;
    at += result_bytes(one);
    const int64_t values = l.with_values ? l.numel * c10::elementSize(l.dtype) : 0;
    jobs[i] = MergeJob{l.slot + partials_at(l.layout),
                       l.layout.parts,
                       out + partials_at(one),
                       reinterpret_cast<unsigned long long*>(out),
                       l.ticket,
                       values ? l.slot + values_at(l.layout) : nullptr,
                       out + values_at(one),
                       values};
    // Set now: no replay has run yet, and only replays read it.
    *reinterpret_cast<unsigned long long*>(out) = 0;
    l.slot = out;
    l.layout = one;
    l.parts_landed = 0;
    l.merged = merged;
  }
  const DeviceMadeCurrent current(landings.front()->ring->device);
  for (size_t first = 0, end = 0; first < landings.size(); first = end) {
    const cudaStream_t stream = landings[first]->stream;
    const at::ScalarType dtype = landings[first]->dtype;
    while (end < landings.size() && landings[end]->stream == stream &&
           landings[end]->dtype == dtype)
      ++end;
    AT_DISPATCH_V2(dtype, "aoti_debug_printer_device_stats", AT_WRAP([&] {
                     launch_kernel(merge_partials<scalar_t>, static_cast<int64_t>(end - first),
                                   kMergeThreads, stream, false,
                                   static_cast<const MergeJob*>(jobs + first));
                   }),
                   AOTI_DEBUG_PRINTER_DTYPES);
  }
}

}  // namespace

void begin_capture() {
  capture_ring = std::make_shared<Ring>(true);
  captured_landings.clear();
}

void end_capture() {
  if (!capture_ring) return;
  // Emptied however this ends.
  struct Cleared {
    ~Cleared() {
      capture_ring.reset();  // the captured run's Landings keep its rings
      captured_landings.clear();
    }
  } cleared;
  launch_batch_of(*capture_ring);
  merge_captured(captured_landings);
}

CapturedCopy capture_copy(const at::Tensor& t) {
  TORCH_CHECK(t.is_cuda() && t.layout() == at::kStrided && t.numel() > 0,
              "a captured copy needs a strided CUDA tensor with elements");
  CapturedCopy copy;
  copy.bytes = static_cast<int64_t>(
      at::detail::computeStorageNbytes(t.sizes(), t.strides(), t.element_size()));
  copy.host.reset(allocate(copy.bytes, false), [](void* m) { (void)cudaFreeHost(m); });
  const DeviceMadeCurrent current(t.device().index());
  C10_CUDA_CHECK(cudaMemcpyAsync(copy.host.get(), t.const_data_ptr(), copy.bytes,
                                 cudaMemcpyDeviceToHost,
                                 c10::cuda::getCurrentCUDAStream(t.device().index()).stream()));
  return copy;
}

bool landed(const Landing& l) {
  if (!l.unsupported.empty()) return true;
  const auto* tickets = reinterpret_cast<const volatile unsigned long long*>(l.slot);
  while (l.parts_landed < l.layout.parts && tickets[l.parts_landed] == l.ticket) ++l.parts_landed;
  return l.parts_landed == l.layout.parts;
}

std::string wait_for(const Landing& l) {
  // Its kernel may still wait in the batch of the thread that waits now.
  if (l.ring) launch_batch_of(*l.ring);
  // This record's tickets, not the whole stream: records are then written as
  // they land, each while the GPU still runs those queued after it (a stream
  // sync would write them all only after the last kernel).
  while (!landed(l)) {
    const cudaError_t err = cudaStreamQuery(l.stream);
    if (err == cudaSuccess) break;  // all of the stream ran: take() says what landed
    if (err != cudaErrorNotReady)
      return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    std::this_thread::yield();
  }
  return "";
}

Snapshot take(const Landing& l, const std::string& error) {
  Snapshot snap;
  snap.stats.numel = l.numel;
  if (!l.unsupported.empty()) {
    snap.stats.unsupported = l.unsupported;
  } else if (!landed(l)) {
    snap.stats.unsupported =
        "statistics not computed: " +
        (error.empty() ? std::string("the GPU has not run this record's kernels")
                       : "the GPU failed before this record's kernels ran (" + error + ")");
  } else {
    // The tickets were read first; the partials behind them must not be read before.
    std::atomic_thread_fence(std::memory_order_acquire);
    snap =
        read_back(l.slot, l.layout, l.dtype, l.sizes, l.numel, l.with_values, l.with_fingerprint);
  }
  return snap;
}

}  // namespace aoti_debug_printer::device
