// device.h for CUDA: one fused statistics pass on the GPU, the error check
// after a kernel, and allocation ranges from the driver.
//
// Why a kernel of our own: ATen would read the tensor once per reduction
// (min, max, mean, std, isnan, isinf, ...) and sync once per .item(); this
// reads it once, at close to the copy bandwidth, in one launch whose blocks
// write their partial results straight into mapped host memory, where the
// host merges them. What a synchronous call costs beyond the read is that
// launch and one stream sync; a queued one (snapshot_later) costs the launch
// alone: each block also writes a ticket after its partial, which the host
// reads to know the record landed.
#include "device.h"

#include "fingerprint.h"

#include <ATen/Dispatch_v2.h>
#include <ATen/TensorIterator.h>
#include <ATen/ops/from_blob.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/complex.h>
#include <ATen/cuda/detail/OffsetCalculator.cuh>

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

namespace aoti_debug_printer::device {
namespace {

// As on the CPU (exact_t), but the narrow floating types keep min and max
// in float: every value of theirs is one, and float compares are cheaper.
template <typename T>
using key_t = std::conditional_t<std::is_same_v<exact_t<T>, double> && !std::is_same_v<T, double> &&
                                     !c10::is_complex<T>::value,
                                 float, exact_t<T>>;

// One block's (then the whole tensor's) partial result. Moments are sums of
// x - shift, shift being the tensor's first element when finite: every
// thread uses the same shift, so partials simply add. Real floating types
// leave `finite` and `absmax` at zero: stats_of derives them. `fingerprint`
// is the write guard's sum of terms (fingerprint.h), zero unless asked for.
template <typename K>
struct Acc {
  unsigned long long finite, nan, pos_inf, neg_inf, zeros;
  K min, max;
  double s1, s2, absmax, shift;
  unsigned long long fingerprint;
};

template <typename K>
__host__ __device__ __forceinline__ Acc<K> empty_acc() {
  Acc<K> a;
  a.finite = a.nan = a.pos_inf = a.neg_inf = a.zeros = 0;
  a.min = std::numeric_limits<K>::has_infinity ? std::numeric_limits<K>::infinity()
                                               : std::numeric_limits<K>::max();
  a.max = std::numeric_limits<K>::has_infinity ? -std::numeric_limits<K>::infinity()
                                               : std::numeric_limits<K>::lowest();
  a.s1 = a.s2 = a.absmax = a.shift = 0;
  a.fingerprint = 0;
  return a;
}

template <typename K>
__host__ __device__ __forceinline__ void merge(Acc<K>& a, const Acc<K>& b) {
  a.finite += b.finite;
  a.nan += b.nan;
  a.pos_inf += b.pos_inf;
  a.neg_inf += b.neg_inf;
  a.zeros += b.zeros;
  a.min = b.min < a.min ? b.min : a.min;
  a.max = a.max < b.max ? b.max : a.max;
  a.s1 += b.s1;
  a.s2 += b.s2;
  a.absmax = b.absmax > a.absmax ? b.absmax : a.absmax;
  a.fingerprint += b.fingerprint;
}

template <typename K>
__device__ __forceinline__ Acc<K> shfl_down(const Acc<K>& a, int offset) {
  constexpr unsigned all = 0xffffffffu;
  Acc<K> b;
  b.finite = __shfl_down_sync(all, a.finite, offset);
  b.nan = __shfl_down_sync(all, a.nan, offset);
  b.pos_inf = __shfl_down_sync(all, a.pos_inf, offset);
  b.neg_inf = __shfl_down_sync(all, a.neg_inf, offset);
  b.zeros = __shfl_down_sync(all, a.zeros, offset);
  b.min = __shfl_down_sync(all, a.min, offset);
  b.max = __shfl_down_sync(all, a.max, offset);
  b.s1 = __shfl_down_sync(all, a.s1, offset);
  b.s2 = __shfl_down_sync(all, a.s2, offset);
  b.absmax = __shfl_down_sync(all, a.absmax, offset);
  b.fingerprint = __shfl_down_sync(all, a.fingerprint, offset);
  return b;
}

// Leaves the block's result in thread 0. blockDim.x is a multiple of 32.
template <typename K>
__device__ void block_reduce(Acc<K>& a) {
  __shared__ Acc<K> warps[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int o = 16; o > 0; o >>= 1) merge(a, shfl_down(a, o));
  if (lane == 0) warps[warp] = a;
  __syncthreads();
  if (warp == 0) {
    a = lane < static_cast<int>(blockDim.x / 32) ? warps[lane] : empty_acc<K>();
    for (int o = 16; o > 0; o >>= 1) merge(a, shfl_down(a, o));
  }
}

template <typename T>
__device__ __forceinline__ double shift_of(T v) {
  if constexpr (c10::is_complex<T>::value) {
    const double re = static_cast<double>(v.real()), im = static_cast<double>(v.imag());
    return isfinite(re) && isfinite(im) ? hypot(re, im) : 0.0;
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<double>(v);
  } else {
    const auto x = static_cast<key_t<T>>(v);
    return isfinite(x) ? static_cast<double>(x) : 0.0;
  }
}

template <typename T>
constexpr bool is_real_floating = !c10::is_complex<T>::value && !std::is_integral_v<T>;

// One thread's running statistics, in registers.
template <typename T>
struct ThreadAcc {
  using K = key_t<T>;
  using A = std::conditional_t<std::is_same_v<K, float>, float, double>;
  uint32_t finite = 0, nan = 0, pos_inf = 0, neg_inf = 0, zeros = 0;
  K min, max;
  A absmax = 0;
  double s1 = 0, s2 = 0;
  unsigned long long fingerprint = 0;
  const double shift;

  __device__ explicit ThreadAcc(double shift) : shift(shift) {
    const Acc<K> e = empty_acc<K>();
    min = e.min;
    max = e.max;
  }

  __device__ __forceinline__ void add_finite(K k, double x) {
    ++finite;
    zeros += x == 0;
    min = k < min ? k : min;
    max = max < k ? k : max;
    const A a = static_cast<A>(fabs(x));
    absmax = a > absmax ? a : absmax;
    const double d = x - shift;
    s1 += d;
    s2 += d * d;
  }

  __device__ __forceinline__ void add(T v) {
    if constexpr (c10::is_complex<T>::value) {
      // As on the CPU: statistics of |z|; an infinite part is +Inf.
      const double re = static_cast<double>(v.real()), im = static_cast<double>(v.imag());
      if (isinf(re) || isinf(im)) {
        ++pos_inf;
      } else if (isnan(re) || isnan(im)) {
        ++nan;
      } else {
        const double m = hypot(re, im);
        add_finite(m, m);
      }
    } else if constexpr (std::is_integral_v<T>) {
      add_finite(static_cast<K>(v), static_cast<double>(v));
    } else {
      // Real floating types, the bandwidth-critical case. `finite` and
      // `absmax` are derived once at the end (stats_of), not per element.
      const K x = static_cast<K>(v);
      if (fabs(x) < std::numeric_limits<K>::infinity()) {
        add_real_finite(x);
      } else {
        nan += isnan(x);
        pos_inf += x > K(0);
        neg_inf += x < K(0);
      }
    }
  }

  __device__ __forceinline__ void add_real_finite(K x) {
    zeros += x == K(0);
    min = fmin(min, x);
    max = fmax(max, x);
    const double d = static_cast<double>(x) - shift;
    s1 += d;
    s2 += d * d;
  }

  // A 16-byte pack: real floating packs with no NaN/Inf (nearly all) skip
  // the per-element finiteness branch, about a third of the instructions.
  template <int N>
  __device__ __forceinline__ void add_pack(const T (&v)[N]) {
    if constexpr (is_real_floating<T>) {
      bool all_finite = true;
#pragma unroll
      for (int k = 0; k < N; ++k)
        all_finite &= fabs(static_cast<K>(v[k])) < std::numeric_limits<K>::infinity();
      if (all_finite) {
#pragma unroll
        for (int k = 0; k < N; ++k) add_real_finite(static_cast<K>(v[k]));
        return;
      }
    }
#pragma unroll
    for (int k = 0; k < N; ++k) add(v[k]);
  }

  __device__ Acc<K> to_acc() const {
    Acc<K> a;
    a.finite = finite;
    a.nan = nan;
    a.pos_inf = pos_inf;
    a.neg_inf = neg_inf;
    a.zeros = zeros;
    a.min = min;
    a.max = max;
    a.s1 = s1;
    a.s2 = s2;
    a.absmax = absmax;
    a.shift = shift;
    a.fingerprint = fingerprint;
    return a;
  }
};

constexpr int kThreads = 256;
// Dense tensors take blocks twice as large, the same threads per SM in half
// as many blocks: half as many partials to write and merge (measured on an
// H100 when the GPU still merged them: a 64 MiB tensor's kernel 1.36x ->
// 1.31x the bandwidth floor, float32).
constexpr int kDenseThreads = 512;
constexpr int kUnroll = 4;

// 16 bytes of elements: one 128-bit load.
template <typename T>
struct alignas(16) Pack {
  T v[16 / sizeof(T)];
};

// Where the blocks' results go: each block's partial straight into mapped
// host memory, where the host merges them when it reads the record. Why not
// the last block merging them on the GPU: that merge (an atomic, reloading
// every partial, a second block reduction) sat on the critical path of every
// record, while the host merges a few hundred partials off it, as the GPU
// already runs the next kernel.
template <typename T>
struct Reduction {
  Acc<key_t<T>>* parts;  // one per block, over every launch of the tensor
  const T* first;        // the tensor's first element: the moments' shift
  bool fingerprint;      // add the write guard's fingerprint terms
  // Queued snapshots: block i writes `ticket` to tickets[i] once its partial
  // is visible to the host. nullptr for a snapshot the host waits for.
  unsigned long long* tickets;
  unsigned long long ticket;
};

// Programmatic dependent launch (sm_90+, launch_kernel): a statistics
// kernel may be launched, and its blocks made resident, before the kernel
// ahead of it in the stream has finished, which hides the launch gap between
// one record's kernel and the next. It waits here, before its first read,
// for that kernel's completion and memory, so it reads what a plain launch
// would. (A no-op for a plain launch.)
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Called once every thread of the block has read its elements (past a
// barrier: the first thread to call it counts for the block). Once every
// block has, the next kernel may be launched early. Not sooner: a user's
// kernel launched as a dependent of ours may count on our reads being done
// when it starts (as they are when a kernel's blocks have exited), for
// instance before it writes in place the tensor we read. (Measured on an
// H100: triggering at the start gained nothing over this.)
__device__ __forceinline__ void let_next_kernel_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Ends every statistics kernel: the block's partial goes to parts[part].
template <typename T>
__device__ void finish_block(Acc<key_t<T>>& acc, unsigned int part, const Reduction<T>& r) {
  block_reduce(acc);  // thread 0's accumulator keeps its own (everyone's) shift
  let_next_kernel_launch();
  if (threadIdx.x == 0) {
    r.parts[part] = acc;
    if (r.tickets) {
      __threadfence_system();
      reinterpret_cast<volatile unsigned long long*>(r.tickets)[part] = r.ticket;
    }
  }
}

// Dense tensors (contiguous in any dimension order): statistics do not
// depend on element order, so the storage span is read as one flat array.
// Block `block` of `blocks` that share the tensor; its partial goes to
// parts[block]. The one body of both kernels below, so that a tensor's
// statistics are bit for bit the same in a batch as alone.
template <typename T>
__device__ __forceinline__ void dense_block(const T* __restrict__ x, int64_t n, unsigned int block,
                                            unsigned int blocks, const Reduction<T>& r) {
  constexpr int64_t kVec = 16 / sizeof(T);
  ThreadAcc<T> a(shift_of(x[0]));
  const int64_t g = static_cast<int64_t>(block) * blockDim.x + threadIdx.x;
  const int64_t G = static_cast<int64_t>(blocks) * blockDim.x;
  // Elements before the first 16-byte boundary (all of them when no element
  // starts on one).
  const int64_t misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(x) % 16);
  int64_t head = 0;
  if (misalign != 0) head = (16 - misalign) % sizeof(T) == 0 ? (16 - misalign) / sizeof(T) : n;
  head = head < n ? head : n;
  // An element's position (fingerprint.h) is its index in this flat array.
  const auto add = [&](int64_t i) {
    a.add(x[i]);
    if (r.fingerprint) a.fingerprint += fingerprint::term(x[i], i);
  };
  const auto add_pack = [&](const Pack<T>& b, int64_t pack) {
    a.add_pack(b.v);
    if (r.fingerprint) {
#pragma unroll
      for (int k = 0; k < kVec; ++k)
        a.fingerprint += fingerprint::term(b.v[k], head + pack * kVec + k);
    }
  };
  for (int64_t i = g; i < head; i += G) add(i);
  const auto* p = reinterpret_cast<const Pack<T>*>(x + head);
  const int64_t np = (n - head) / kVec;
  int64_t j = g;
  // Several loads in flight per thread before any arithmetic.
  for (; j + (kUnroll - 1) * G < np; j += kUnroll * G) {
    Pack<T> buf[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) buf[u] = p[j + u * G];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) add_pack(buf[u], j + u * G);
  }
  for (; j < np; j += G) add_pack(p[j], j);
  for (int64_t i = head + np * kVec + g; i < n; i += G) add(i);
  Acc<key_t<T>> acc = a.to_acc();
  finish_block(acc, block, r);
}

template <typename T>
__global__ void __launch_bounds__(kDenseThreads)
    dense_partials(const T* __restrict__ x, int64_t n, Reduction<T> r) {
  wait_for_previous_kernel();
  dense_block(x, n, blockIdx.x, gridDim.x, r);
}

// A batch: the dense tensors of one dtype that a launch event's records
// queued (snapshot_later(..., batched)), in one launch. Each keeps the
// blocks its own launch would have had, so its partials are the same. A
// tensor whose values are printed (a few, contiguous) has them copied here
// too, which saves the separate copy its own launch needs.
struct BatchItem {
  const void* x;
  int64_t n;
  void* parts;
  unsigned long long* tickets;
  unsigned long long ticket;
  void* values;  // nullptr: no values
  unsigned int first_block;
};
// Kernel parameters are limited to 4 KiB: 32 items take 1.8.
constexpr int kBatchItems = 32;
struct Batch {
  int count;
  BatchItem items[kBatchItems];
};

template <typename T>
__global__ void __launch_bounds__(kDenseThreads) batch_partials(const __grid_constant__ Batch b) {
  wait_for_previous_kernel();
  int i = 0;
  while (i + 1 < b.count && blockIdx.x >= b.items[i + 1].first_block) ++i;
  const BatchItem& item = b.items[i];
  const unsigned int end = i + 1 < b.count ? b.items[i + 1].first_block : gridDim.x;
  const unsigned int block = blockIdx.x - item.first_block, blocks = end - item.first_block;
  const T* x = static_cast<const T*>(item.x);
  if (item.values) {
    T* values = static_cast<T*>(item.values);
    for (int64_t k = static_cast<int64_t>(block) * blockDim.x + threadIdx.x; k < item.n;
         k += static_cast<int64_t>(blocks) * blockDim.x)
      values[k] = x[k];
    // Seen by the host before this block's ticket, which thread 0 writes.
    __threadfence_system();
  }
  const Reduction<T> r{static_cast<Acc<key_t<T>>*>(item.parts), x, false, item.tickets,
                       item.ticket};
  dense_block(x, item.n, block, blocks, r);
}

// Any other strides (views, zero strides), through ATen's offset calculator;
// a tensor of more than 2^31 elements takes several launches, the first
// block of this one being partial `part0`.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    strided_partials(const char* base, OffsetCalculator<1> offsets, uint32_t n, unsigned int part0,
                     Reduction<T> r) {
  wait_for_previous_kernel();
  ThreadAcc<T> a(shift_of(*r.first));
  const uint32_t G = gridDim.x * blockDim.x;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += G) {
    const T* e = reinterpret_cast<const T*>(base + offsets.get(i)[0]);
    a.add(*e);
    if (r.fingerprint) a.fingerprint += fingerprint::term(*e, e - r.first);
  }
  Acc<key_t<T>> acc = a.to_acc();
  finish_block(acc, part0 + blockIdx.x, r);
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <typename K>
c10::Scalar scalar_of(K v) {
  if constexpr (std::is_floating_point_v<K>) {
    return c10::Scalar(static_cast<double>(v));
  } else {
    return c10::Scalar(v);
  }
}

template <typename T>
TensorStats stats_of(const Acc<key_t<T>>& r, int64_t numel,
                     std::optional<at::ScalarType> fingerprint_of) {
  TensorStats s;
  s.numel = numel;
  s.nan = static_cast<int64_t>(r.nan);
  s.pos_inf = static_cast<int64_t>(r.pos_inf);
  s.neg_inf = static_cast<int64_t>(r.neg_inf);
  s.zeros = static_cast<int64_t>(r.zeros);
  s.finite =
      is_real_floating<T> ? numel - s.nan - s.pos_inf - s.neg_inf : static_cast<int64_t>(r.finite);
  const double n = static_cast<double>(s.finite);
  s.mean = s.finite > 0 ? r.shift + r.s1 / n : std::numeric_limits<double>::quiet_NaN();
  const double m2 = s.finite > 0 ? std::max(0.0, r.s2 - r.s1 * r.s1 / n) : 0.0;
  s.std = s.finite > 1 ? std::sqrt(m2 / (n - 1)) : std::numeric_limits<double>::quiet_NaN();
  s.absmax = is_real_floating<T> && s.finite > 0 ? std::max(std::fabs(static_cast<double>(r.min)),
                                                            std::fabs(static_cast<double>(r.max)))
                                                 : r.absmax;
  if (s.finite > 0) {
    s.min = scalar_of(r.min);
    s.max = scalar_of(r.max);
  }
  s.of_modulus = c10::is_complex<T>::value;
  if (fingerprint_of)
    s.fingerprint = fingerprint::finish(r.fingerprint, numel, static_cast<int>(*fingerprint_of));
  return s;
}

int64_t values_bytes(const at::Tensor& t, bool with_values) {
  return with_values ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

// The values' room in host memory and in the device scratch: whole 256-byte
// units, so that what follows stays aligned.
int64_t values_room(const at::Tensor& t, bool with_values) {
  return ceil_div(values_bytes(t, with_values), 256) * 256;
}

// What comes back to the host, in mapped pinned memory:
// [tickets: 8 bytes a partial | partials | values], each part 128-aligned.
struct Layout {
  int64_t parts = 0;        // blocks over every launch: one partial each
  int64_t values_room = 0;  // values_room(t, with_values)
};
int64_t round_up(int64_t bytes) { return ceil_div(bytes, 128) * 128; }
int64_t partials_at(const Layout& l) {
  return round_up(l.parts * static_cast<int64_t>(sizeof(unsigned long long)));
}
// Acc<double> is the largest partial of any dtype.
int64_t values_at(const Layout& l) {
  return partials_at(l) + round_up(l.parts * static_cast<int64_t>(sizeof(Acc<double>)));
}
int64_t result_bytes(const Layout& l) { return values_at(l) + l.values_room; }

// How one tensor's statistics are computed: which kernel, and how many
// blocks, hence partials. Decided before anything is queued, because the
// partials' room in host memory depends on it.
struct Plan {
  Layout layout;
  bool dense = false;
  std::vector<int64_t> blocks;  // strided: per 32-bit piece of `iter`
  std::optional<at::TensorIterator> iter;
  bool dependent_launch = false;  // programmatic dependent launches (sm_90+)
  int64_t scratch = 0;            // device scratch for the values made contiguous, 0: none needed
};

// At most one wave of resident blocks: each block strides over its share
// anyway, and a second, partial wave would only leave SMs idle at the end.
template <typename T>
int dense_blocks_per_sm() {
  static const int per_sm = [] {
    int n = 0;
    C10_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, dense_partials<T>, kDenseThreads, 0));
    return std::max(n, 1);
  }();
  return per_sm;
}

// What a launch plan needs of a device, asked once per host thread and
// device, not per tensor (device.h's Facts is what a dump's environment
// record says of it).
struct LaunchFacts {
  int sms = 0;
  bool dependent_launch = false;  // sm_90+
};
const LaunchFacts& launch_facts_of(int device) {
  thread_local std::vector<LaunchFacts> known;
  if (known.size() <= static_cast<size_t>(device)) known.resize(device + 1);
  LaunchFacts& f = known[device];
  if (f.sms == 0) {
    int major = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&f.sms, cudaDevAttrMultiProcessorCount, device));
    f.dependent_launch = major >= 9;
  }
  return f;
}

// nullopt when `t`'s dtype has no statistics. `t` has elements.
std::optional<Plan> plan_of(const at::Tensor& t, bool with_values) {
  const LaunchFacts& device = launch_facts_of(t.device().index());
  const int64_t sms = device.sms;
  Plan p;
  p.dependent_launch = device.dependent_launch;
  p.layout.values_room = values_room(t, with_values);
  p.scratch = with_values && !t.is_contiguous() ? p.layout.values_room : 0;
  p.dense = t.is_non_overlapping_and_dense();
  int per_sm = 0;
  try {
    AT_DISPATCH_V2(t.scalar_type(), "aoti_debug_printer_device_stats",
                   AT_WRAP([&] { per_sm = p.dense ? dense_blocks_per_sm<scalar_t>() : 0; }),
                   AOTI_DEBUG_PRINTER_DTYPES);
  } catch (const c10::NotImplementedError&) {
    return std::nullopt;
  }
  if (p.dense) {
    const int64_t packs = ceil_div(t.numel(), 16 / t.element_size());
    p.layout.parts = std::clamp<int64_t>(ceil_div(packs, kDenseThreads * kUnroll), 1, per_sm * sms);
    return p;
  }
  // Other strides: enough blocks of kThreads to fill every SM, shared among
  // the 32-bit pieces of a tensor of more than 2^31 elements.
  const int64_t max_parts = sms * 8;
  p.iter = at::TensorIteratorConfig()
               .add_const_input(t)
               .check_all_same_dtype(false)
               .resize_outputs(false)
               .build();
  for (auto& sub : p.iter->with_32bit_indexing()) p.blocks.push_back(sub.numel());
  TORCH_CHECK(static_cast<int64_t>(p.blocks.size()) <= max_parts,
              "tensor too large for device statistics");
  const int64_t per_piece = max_parts / static_cast<int64_t>(p.blocks.size());
  for (auto& b : p.blocks) {
    b = std::clamp<int64_t>(ceil_div(b, kThreads * 4), 1, per_piece);
    p.layout.parts += b;
  }
  return p;
}

template <typename Kernel, typename... Args>
void launch_kernel(Kernel kernel, int64_t blocks, int threads, cudaStream_t stream, bool dependent,
                   Args... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned int>(blocks));
  config.blockDim = dim3(threads);
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = dependent ? 1 : 0;
  C10_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args...));
}

// Launches the statistics kernels for `t` on `stream` by plan `p`, the
// partials going to `back` + partials_at(p.layout).
template <typename T>
void launch_stats(const at::Tensor& t, const Plan& p, cudaStream_t stream, uint8_t* back,
                  bool with_fingerprint, bool queued, unsigned long long ticket) {
  Reduction<T> r{reinterpret_cast<Acc<key_t<T>>*>(back + partials_at(p.layout)),
                 static_cast<const T*>(t.const_data_ptr()), with_fingerprint,
                 queued ? reinterpret_cast<unsigned long long*>(back) : nullptr, ticket};
  if (p.dense) {
    launch_kernel(dense_partials<T>, p.layout.parts, kDenseThreads, stream, p.dependent_launch,
                  r.first, t.numel(), r);
    return;
  }
  unsigned int part0 = 0;
  size_t piece = 0;
  for (auto& sub : p.iter->with_32bit_indexing()) {
    const int64_t n = p.blocks[piece++];
    launch_kernel(strided_partials<T>, n, kThreads, stream, p.dependent_launch,
                  static_cast<const char*>(sub.data_ptr(0)), make_offset_calculator<1>(sub),
                  static_cast<uint32_t>(sub.numel()), part0, r);
    part0 += static_cast<unsigned int>(n);
  }
}

// Mapped pinned host memory, kept per host thread: the kernel writes the
// partials into it directly (no copy call), and small tensors' values are
// copied into it; no allocator call on the per-tensor path. Each snapshot waits for its own
// kernels before returning, so one buffer per thread is never written by two
// tensors at once. Grows to the largest size asked for.
uint8_t* host_result_buffer(size_t bytes) {
  struct Buffer {
    void* data = nullptr;
    size_t size = 0;
    ~Buffer() {
      // At process exit the CUDA runtime may already be gone: nothing to report.
      if (data) (void)cudaFreeHost(data);
    }
  };
  thread_local Buffer buffer;
  if (bytes > buffer.size) {
    if (buffer.data) C10_CUDA_CHECK(cudaFreeHost(buffer.data));
    buffer.data = nullptr;
    buffer.size = 0;
    const size_t size = std::max<size_t>(bytes, 4096);
    // Portable: every device's kernels may write it (unified addressing makes
    // the host pointer the device pointer).
    C10_CUDA_CHECK(cudaHostAlloc(&buffer.data, size, cudaHostAllocMapped | cudaHostAllocPortable));
    buffer.size = size;
  }
  return static_cast<uint8_t*>(buffer.data);
}

// Device memory for a non-contiguous tensor's values, made contiguous before
// they are copied back; kept per host thread and device like the pinned
// buffer (no allocator call per tensor), returned when the thread exits.
struct ScratchBuffer {
  void* data = nullptr;
  int64_t size = 0;
};
ScratchBuffer& scratch_of(int device) {
  struct Buffers {
    std::vector<ScratchBuffer> per_device;
    ~Buffers() {
      for (const ScratchBuffer& b : per_device) {
        if (b.data) (void)cudaFree(b.data);
      }
    }
  };
  thread_local Buffers buffers;
  if (buffers.per_device.size() <= static_cast<size_t>(device))
    buffers.per_device.resize(device + 1);
  return buffers.per_device[device];
}

uint8_t* device_scratch(int device, int64_t bytes) {
  ScratchBuffer& b = scratch_of(device);
  if (bytes > b.size) {
    if (b.data) C10_CUDA_CHECK(cudaFree(b.data));
    b = ScratchBuffer{};
    C10_CUDA_CHECK(cudaMalloc(&b.data, bytes));
    b.size = bytes;
  }
  return static_cast<uint8_t*>(b.data);
}

// Queues on `stream`, by plan `p` (plan_of(t, with_values)): first the values
// (when asked) into back + values_at(p.layout), then the statistics kernels, whose
// blocks write their partials, and when `queued`, `ticket` after each.
void queue_snapshot(const at::Tensor& t, const Plan& p, cudaStream_t stream, bool with_values,
                    bool with_fingerprint, uint8_t* back, bool queued, unsigned long long ticket) {
  if (with_values) {
    // Small tensors only (max_values): one copy to the host, from a
    // contiguous copy on the device where the tensor is not one (the plan
    // gave it scratch).
    const void* from = t.const_data_ptr();
    if (p.scratch > 0) {
      uint8_t* scratch = device_scratch(t.device().index(), p.scratch);
      at::from_blob(scratch, t.sizes(), t.options()).copy_(t);
      from = scratch;
    }
    C10_CUDA_CHECK(cudaMemcpyAsync(back + values_at(p.layout), from, values_bytes(t, true),
                                   cudaMemcpyDeviceToHost, stream));
  }
  AT_DISPATCH_V2(t.scalar_type(), "aoti_debug_printer_device_stats", AT_WRAP([&] {
                   launch_stats<scalar_t>(t, p, stream, back, with_fingerprint, queued, ticket);
                 }),
                 AOTI_DEBUG_PRINTER_DTYPES);
}

std::string no_stats_for(at::ScalarType dtype) {
  return std::string("no statistics for dtype ") + c10::toString(dtype);
}

// The statistics (and values) written at `back` in `layout` for a tensor of
// `dtype` and `sizes`: the blocks' partials merged here.
Snapshot read_back(const uint8_t* back, const Layout& layout, at::ScalarType dtype,
                   at::IntArrayRef sizes, int64_t numel, bool with_values, bool with_fingerprint) {
  Snapshot snap;
  AT_DISPATCH_V2(
      dtype, "aoti_debug_printer_device_stats", AT_WRAP([&] {
        using Partial = Acc<key_t<scalar_t>>;
        const uint8_t* parts = back + partials_at(layout);
        Partial r = empty_acc<key_t<scalar_t>>();
        for (int64_t i = 0; i < layout.parts; ++i) {
          Partial part;
          std::memcpy(&part, parts + i * static_cast<int64_t>(sizeof(Partial)), sizeof part);
          merge(r, part);
          r.shift = part.shift;  // the same in every partial
        }
        snap.stats =
            stats_of<scalar_t>(r, numel, with_fingerprint ? std::optional(dtype) : std::nullopt);
      }),
      AOTI_DEBUG_PRINTER_DTYPES);
  if (with_values) {
    snap.values = at::from_blob(const_cast<uint8_t*>(back) + values_at(layout), sizes,
                                at::TensorOptions().dtype(dtype))
                      .clone();
  }
  return snap;
}

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
  ~Ring() {
    if (data) (void)cudaFreeHost(data);  // at process exit the runtime may be gone
  }
};

std::shared_ptr<Ring>& this_thread_ring() {
  thread_local std::shared_ptr<Ring> ring = std::make_shared<Ring>();
  return ring;
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
  std::string unsupported;
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

std::shared_ptr<Landing> snapshot_later(const at::Tensor& t, bool with_values, bool batched) {
  const DeviceMadeCurrent current(t.device().index());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
  std::shared_ptr<Ring>& ring = this_thread_ring();
  auto l = std::make_shared<Landing>();
  l->numel = t.numel();
  std::optional<Plan> plan = plan_of(t, with_values);
  if (!plan) {
    l->unsupported = no_stats_for(t.scalar_type());
    return l;
  }
  const int64_t bytes = result_bytes(plan->layout);
  TORCH_CHECK(bytes <= Ring::kBytes, "this tensor's results do not fit in the ring");
  std::lock_guard<std::mutex> lock(ring->mu);
  // None outstanding: every slot has been read, and the ring starts again
  // from the front.
  if (ring->outstanding.load(std::memory_order_acquire) == 0) ring->used = 0;
  if (ring->used > 0) {
    // Queued kernels share the device scratch in stream order: another
    // stream, or scratch that must grow under them, waits for them first.
    if (ring->stream != stream || ring->used + bytes > Ring::kBytes ||
        plan->scratch > scratch_of(t.device().index()).size) {
      return nullptr;
    }
  }
  if (!ring->data) {
    void* data = nullptr;
    C10_CUDA_CHECK(cudaHostAlloc(&data, Ring::kBytes, cudaHostAllocMapped | cudaHostAllocPortable));
    ring->data = static_cast<uint8_t*>(data);
  }
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
  // A dense tensor waits for the batch; its values, if printed, come with
  // its statistics where they are in order (contiguous).
  if (batched && plan->dense && (!with_values || t.is_contiguous())) {
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
  queue_snapshot(t, *plan, stream, with_values, false, slot, true, l->ticket);
  return l;
}

bool serves_for(const Landing& l, const at::Tensor& t, bool with_values) {
  return l.with_values == with_values && l.dtype == t.scalar_type() &&
         l.stream == c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

void launch_batch() { launch_batch_of(*this_thread_ring()); }

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
    snap = read_back(l.slot, l.layout, l.dtype, l.sizes, l.numel, l.with_values, false);
  }
  return snap;
}

std::string check_current_stream() {
  // Only a process that already uses CUDA is checked: the check must never
  // create a context (or initialize CUDA) for a CPU model.
  static const int devices = c10::cuda::device_count();
  if (devices == 0) return "";
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) return "";
  if (!c10::cuda::hasPrimaryContext(static_cast<c10::DeviceIndex>(dev))) return "";
  cudaError_t err = cudaStreamSynchronize(
      c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(dev)).stream());
  // A failed launch is not sticky: peek, so that the caller's own check
  // still sees it.
  if (err == cudaSuccess) err = cudaPeekAtLastError();
  if (err == cudaSuccess) return "";
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

namespace {
// A driver function, from the runtime's driver entry points, so this library
// never links libcuda itself (torch does not either); nullptr where the
// driver has none.
template <typename Function>
Function driver_function(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
  const cudaError_t err =
      cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found);
#else
  const cudaError_t err = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &found);
#endif
  return err == cudaSuccess && found == cudaDriverEntryPointSuccess ? reinterpret_cast<Function>(fn)
                                                                    : nullptr;
}
}  // namespace

int bind_context() {
  // Only a process that already uses CUDA: this must never create a context
  // (or initialize CUDA) for a CPU model.
  static const int devices = c10::cuda::device_count();
  if (devices == 0) return -1;
  using GetCurrent = CUresult (*)(CUcontext*);
  static const GetCurrent get_current = driver_function<GetCurrent>("cuCtxGetCurrent");
  CUcontext current = nullptr;
  if (!get_current || get_current(&current) != CUDA_SUCCESS || current != nullptr) return -1;
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) return -1;
  // A device this process has not used yet gets its context from the
  // package's own first runtime call (its first allocation).
  if (!c10::cuda::hasPrimaryContext(static_cast<c10::DeviceIndex>(dev))) return -1;
  // cudaSetDevice makes the device's primary context current on this thread
  // even where the device already is the current one (CUDA 12 and later).
  if (cudaSetDevice(dev) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return dev;
}

Allocation allocation_of(const void* address) {
  using GetRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  static const GetRange get_range = driver_function<GetRange>("cuMemGetAddressRange");
  Allocation a;
  CUdeviceptr base = 0;
  size_t size = 0;
  if (get_range && address &&
      get_range(&base, &size, reinterpret_cast<CUdeviceptr>(address)) == CUDA_SUCCESS) {
    a.known = true;
    a.base = static_cast<uintptr_t>(base);
    a.size = size;
  }
  return a;
}

Facts facts_of(int index) {
  Facts f;
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
    cudaGetLastError();  // asked of a device that is not there: no sticky error left
    return f;
  }
  f.name = prop.name;
  f.capability = std::to_string(prop.major) + "." + std::to_string(prop.minor);
  return f;
}

}  // namespace aoti_debug_printer::device
