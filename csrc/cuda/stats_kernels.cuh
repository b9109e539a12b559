// The statistics kernels and their arithmetic: one fused pass reads a
// tensor once and each block writes its partial result (and, queued, a
// ticket) straight into mapped host memory, where the host merges them
// (stats_of). Device code and templates only: included by the rooms that
// launch them (plan.cu: one tensor; snapshots.cu: a batch).
//
// Why a kernel of our own: ATen would read the tensor once per reduction
// (min, max, mean, std, isnan, isinf, ...) and sync once per .item(); this
// reads it once, at close to the copy bandwidth, in one launch whose blocks
// write their partial results straight into mapped host memory, where the
// host merges them. What a synchronous call costs beyond the read is that
// launch and one stream sync; a queued one (snapshot_later) costs the launch
// alone: each block also writes a ticket after its partial, which the host
// reads to know the record landed.
#pragma once

#include "fingerprint.h"
#include "stats.h"

#include <c10/util/complex.h>
#include <ATen/cuda/detail/OffsetCalculator.cuh>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>

namespace aoti_debug_printer::device::detail {

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

// A captured CUDA graph's records (graphs.h): every replay's blocks write
// their partials into the capture's ring in device memory, and one block
// per record merges them into a single partial, with the record's values,
// in mapped host memory, then its ticket. The graph's host call then reads
// one partial a record, not the hundreds a large tensor's blocks wrote.
struct MergeJob {
  const void* parts;  // `count` partials in device memory
  long long count;
  void* merged;  // one partial, in host memory
  unsigned long long* ticket_at;
  unsigned long long ticket;
  const unsigned char* values_from;  // nullptr: no values
  unsigned char* values_to;
  long long values_bytes;
};
constexpr int kMergeThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kMergeThreads) merge_partials(const MergeJob* jobs) {
  using K = key_t<T>;
  const MergeJob job = jobs[blockIdx.x];
  const Acc<K>* parts = static_cast<const Acc<K>*>(job.parts);
  Acc<K> a = empty_acc<K>();
  for (long long i = threadIdx.x; i < job.count; i += blockDim.x) merge(a, parts[i]);
  // Raw storage: a __shared__ array of a type with constructors is refused.
  __shared__ alignas(16) unsigned char raw[kMergeThreads * sizeof(Acc<K>)];
  Acc<K>* shared = reinterpret_cast<Acc<K>*>(raw);
  shared[threadIdx.x] = a;
  __syncthreads();
  for (unsigned int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) merge(shared[threadIdx.x], shared[threadIdx.x + s]);
    __syncthreads();
  }
  for (long long i = threadIdx.x; i < job.values_bytes; i += blockDim.x)
    job.values_to[i] = job.values_from[i];
  if (threadIdx.x == 0) {
    Acc<K> r = shared[0];
    r.shift = parts[0].shift;  // the same in every partial
    *static_cast<Acc<K>*>(job.merged) = r;
  }
  // Every thread's writes are seen by the host before the ticket.
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) *reinterpret_cast<volatile unsigned long long*>(job.ticket_at) = job.ticket;
}

}  // namespace aoti_debug_printer::device::detail
