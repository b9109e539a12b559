// What only an accelerator needs: statistics computed where the tensor
// lives, the error check after a kernel, and where allocations begin and end.
// csrc/cuda/ implements it for CUDA; no_cuda.cpp when the build has no CUDA.
#pragma once

#include "stats.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

namespace aoti_debug_printer::device {

// Why this build computes no statistics on a CUDA device (the host-copy
// fallback is in use), or "" where its CUDA statistics kernels are built.
std::string cuda_statistics_unavailable();

// True when this build can compute statistics on `t`'s device.
bool computes_stats_on(const at::Tensor& t);

// Statistics of `t` computed on its device, on the current stream, in one
// fused pass that writes them into host memory. With `with_values`, the
// elements come too, in one device-to-host copy: `values` is then a
// contiguous CPU tensor of `t`'s dtype and shape; else undefined. With
// `with_fingerprint`, the same pass adds stats.fingerprint.
struct Snapshot {
  TensorStats stats;
  at::Tensor values;
};
Snapshot snapshot(const at::Tensor& t, bool with_values, bool with_fingerprint = false);

// The same kernels, queued without waiting: the results land in pinned host
// memory of this thread's ring, to be taken when the GPU has written them.
// Stream order keeps them right: the tensor is read before any later kernel
// of its stream can change or reuse it.
struct Landing;
// Whether snapshot_later can ever take `t` (a CUDA tensor with elements whose
// results fit in the ring).
bool can_snapshot_later(const at::Tensor& t, bool with_values);
// For a `t` that can_snapshot_later. nullptr while the ring has no room, or
// `t`'s stream is not the one its outstanding snapshots were queued on: take
// those first (every Landing released), then ask again.
// With `batched`, a dense tensor's kernel is not launched yet: it waits in
// this thread's batch for launch_batch, which launches the whole batch at
// once. The caller must call launch_batch before any other GPU work may
// change `t`; waiting for a Landing (wait_for) launches it too. Until then
// the batch keeps a reference to `t`, which may be released meanwhile.
// With `with_fingerprint` (the write guard's, inside a captured graph), the
// pass adds the fingerprint's terms, and take finishes it into
// stats.fingerprint; such a snapshot is never batched (the batch's kernel
// adds no terms), and the capture's merge adds its terms as it adds counts.
std::shared_ptr<Landing> snapshot_later(const at::Tensor& t, bool with_values, bool batched,
                                        bool with_fingerprint = false);
// Whether `l`, a snapshot of memory that nothing changed since, serves as a
// snapshot_later(t, with_values) now: queued on `t`'s current stream, with
// values where these would be.
bool serves_for(const Landing& l, const at::Tensor& t, bool with_values);
// Launches this thread's batch: one launch per dtype in it, each computing
// every tensor's statistics exactly as its own launch would have.
void launch_batch();
// Whether the results are in host memory (no waiting).
bool landed(const Landing& l);
// Waits for this snapshot's results (not the whole stream). "" or CUDA's
// error, after which the results that had not landed never will.
std::string wait_for(const Landing& l);
// The results; the statistics say "not computed" when they never landed.
Snapshot take(const Landing& l, const std::string& error);

// Statistics a generated kernel kept as it stored a tensor whole, in a slot
// of its run's statistics workspace (aoti_debug_printer.h:
// AOTI_DEBUG_PRINTER_STORED_*). A run's workspace comes back to the host in
// one copy, queued by copy_back at the run's end, with a ticket after it:
// the records that wait for it (LateRecord) are written once it has landed.
class StoredRun;
// Whether `workspace` can be one: an int64 CUDA tensor of whole slots.
bool is_statistics_workspace(const at::Tensor& workspace);
// Sets `workspace`'s switch (AOTI_DEBUG_PRINTER_STORED_SWITCH) on the
// current stream: the kernels that follow keep their statistics.
void switch_on_stored(const at::Tensor& workspace);
// A StoredRun for `workspace`, to be copied back on the current stream.
std::shared_ptr<StoredRun> stored_run(const at::Tensor& workspace);
// Whether `run` is of `workspace`'s memory, to be copied on the current stream.
bool stored_run_serves(const StoredRun& run, const at::Tensor& workspace);
// Queues the copy back (once; the run's thread, once its kernels are queued).
// Never throws: a copy CUDA refuses makes the run's records say why.
void copy_back(StoredRun& run);
bool landed(const StoredRun& run);
// Waits for the copy (queuing it first, where the run has not ended: a flush
// before the run's end); "" or CUDA's error.
std::string wait_for(StoredRun& run);
// The statistics of a tensor of `numel` elements in the slot at `field`,
// once landed; "not computed" where they never landed (`error`).
TensorStats stored_stats(const StoredRun& run, int64_t field, int64_t numel,
                         const std::string& error);
// The same, read now: waits for the slot on the current stream.
TensorStats stored_stats_now(const at::Tensor& workspace, int64_t field, int64_t numel);

// Level 1 off the model's thread (saver.h): a CUDA tensor's bytes copied
// into pinned host memory the saver stages them in, queued on its current
// stream without waiting. Pinned memory of `bytes` (portable: any device's
// copies may land in it), freed with the pointer; it throws where CUDA
// cannot give it.
std::shared_ptr<uint8_t> pinned_host_memory(int64_t bytes);
// Copies `bytes` from `t`'s data pointer into `host`, then 1 into
// `*ticket` (pinned too, 0 before), both queued on `t`'s current stream:
// the copy has landed once the ticket reads 1. Throws where CUDA refuses
// the copy (a context an earlier kernel broke).
struct HostCopy;
std::shared_ptr<HostCopy> copy_to_host_later(const at::Tensor& t, int64_t bytes, void* host,
                                             int64_t* ticket);
// Waits for the copy; "" or CUDA's error, after which it never lands.
std::string wait_for(const HostCopy& copy);

// CUDA graphs. Whether the current stream of the current device is being
// captured (never true where this process has no CUDA context: the check
// creates none).
bool capturing();
// Between these two, this thread's snapshot_later goes to rings of the
// capture's own: slots never reused, kept by the Landings of the captured
// run, which the graph's host call reads at each of its replays.
void begin_capture();
void end_capture();
// Captures into the graph being captured on the current stream a call of
// `fn(arg)` on a CUDA thread, after the work captured before it, at each
// replay. `fn` must make no CUDA call.
void capture_host_call(void (*fn)(void*), void* arg);
// Level 1 inside a CUDA graph: captures a copy of every byte of `t`'s
// memory its strides reach, from its first element, into pinned host
// memory that `host` keeps (at::empty_strided's size for `t`'s sizes and
// strides). The graph copies them again at each replay, before a host call
// captured after it. For a strided CUDA tensor with elements.
struct CapturedCopy {
  std::shared_ptr<void> host;
  int64_t bytes = 0;
};
CapturedCopy capture_copy(const at::Tensor& t);

// Waits for the current stream of the current device and returns CUDA's
// error state as "cudaErrorName: description", or "" when all is well or no
// CUDA context exists in this process (a check never creates one).
std::string check_current_stream();

// AOTInductor launches its kernels with the driver's cuLaunchKernel, on the
// calling thread's current context. A thread that has made no CUDA runtime
// call yet has none: a fresh worker thread whose first CUDA work is a
// package of Triton kernels only, since nothing in such a run calls the
// runtime (the wrapper's device guard skips cudaSetDevice when the device is
// the current one already, and cached allocations reach no CUDA call). Its
// first launch then fails with "CUDA driver error: invalid device context",
// with this library or without. Where CUDA is in use and this thread has no
// current context, makes the current device's primary context current and
// returns that device; -1 where nothing was done.
int bind_context();

// The driver allocation holding `address`: [base, base + size). `known` is
// false where it cannot be told (no CUDA, not device memory).
struct Allocation {
  bool known = false;
  uintptr_t base = 0;
  uint64_t size = 0;
};
Allocation allocation_of(const void* address);

// What a dump's environment record says of a GPU: its name and compute
// capability ("9.0"); empty where there is no such device.
struct Facts {
  std::string name;
  std::string capability;
};
Facts facts_of(int index);

}  // namespace aoti_debug_printer::device
