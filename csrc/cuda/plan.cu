// Launch planning (plan.cuh): one tensor's launches, and its results read back.
#include "cuda/plan.cuh"

#include "cuda/memory.cuh"
#include "cuda/stats_kernels.cuh"

#include <ATen/Dispatch_v2.h>
#include <ATen/ops/from_blob.h>
#include <c10/cuda/CUDAException.h>

#include <cstring>

namespace aoti_debug_printer::device::detail {

namespace {

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

}  // namespace

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
    // Default: `back` is device memory in a captured graph's ring (snapshots.cu).
    C10_CUDA_CHECK(cudaMemcpyAsync(back + values_at(p.layout), from, values_bytes(t, true),
                                   cudaMemcpyDefault, stream));
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

}  // namespace aoti_debug_printer::device::detail
