// One record: where it was taken, what the tensor is, and its statistics,
// read from the tensor on its device or the host. The printer, the saver's
// manifest and the Python bindings all take records here, and format them
// in format.h.
#pragma once

#include "aoti_debug_printer.h"
#include "device.h"
#include "output.h"
#include "settings.h"
#include "stats.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace aoti_debug_printer {

// The C header's phase and role codes, as types. Records carry their names
// (phase_name, role_name); the words people read are made when formatting.
enum class Phase : int32_t {
  BeforeLaunch = AOTI_DEBUG_PRINTER_BEFORE_LAUNCH,
  AfterLaunch = AOTI_DEBUG_PRINTER_AFTER_LAUNCH,
  ModelInput = AOTI_DEBUG_PRINTER_MODEL_INPUT,
  // A record upstream's entry points took (aoti_torch_print_tensor_handle,
  // aoti_torch_save_tensor_handle): Where::label holds their message.
  Upstream = -1,
};
enum class Role : int32_t {
  Unknown = AOTI_DEBUG_PRINTER_ROLE_UNKNOWN,
  Read = AOTI_DEBUG_PRINTER_ROLE_READ,
  Write = AOTI_DEBUG_PRINTER_ROLE_WRITE,
  ReadWrite = AOTI_DEBUG_PRINTER_ROLE_READ_WRITE,
  Accumulate = AOTI_DEBUG_PRINTER_ROLE_ACCUMULATE,
};
// before_launch, after_launch, model_input, upstream; "phaseN" for a number
// the ABI was given that is none of them.
std::string phase_name(Phase phase);
// read, write, read_write; "" for Unknown (and any other number).
std::string role_name(Role role);

struct Where {
  Phase phase = Phase::Upstream;
  std::string label;   // upstream's message (Phase::Upstream only)
  std::string kernel;  // empty for upstream-style messages
  std::string arg;
  int64_t run = -1;  // -1: outside any run the generated code announced
  int64_t launch = -1;
  int64_t call = -1;    // how many times this kernel ran before, in this run
  int64_t rank = -1;    // the process's distributed rank; -1 outside one
  std::string node;     // the exported program's node the tensor holds, if known
  std::string why;      // why it holds no single node's value, if the codegen knows
  std::string formula;  // how that value is computed from the program's values (JSON), if known
  Role role = Role::Unknown;
  std::string inductor_config;  // digest of the config the program was compiled with
  // The replay of a captured CUDA graph that wrote it, from 0 (graphs.h);
  // -1 outside graphs.
  int64_t replay = -1;
};

// What a tensor is, as torch's codes: a record of a queued tensor is made
// on the model's thread, and its words (dtype_name, device, layout_name) only
// where it is formatted.
struct TensorRecord {
  Where where;
  bool defined = false;
  std::string problem;  // "null handle", "undefined tensor", copy failures
  at::DimVector shape, stride;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  c10::Device device = c10::kCPU;
  c10::Layout layout = c10::kStrided;
  bool contiguous = false;
  int64_t numel = 0;
  TensorStats stats;
  // Flattened values in row-major order, already formatted per dtype;
  // empty unless numel <= max_values.
  std::vector<std::string> values;
  // Level 1: how long the model's thread waited for the disk before this
  // snapshot could be taken (the saver's memory was full, or the snapshot
  // was saved on that thread: saver.h).
  double save_waited_ms = 0;
};

// The one device-to-host copy: the tensor in its own dtype, on the CPU.
at::Tensor to_host(const at::Tensor& t);

// What a record reads from a tensor's elements: statistics, and the values
// of tensors with at most max_values elements (a CPU tensor, else undefined).
struct Contents {
  TensorStats stats;
  at::Tensor values;
};
// CUDA tensors are reduced on their device, and the statistics and values
// come back in one copy; other tensors are copied to the host once. With
// `with_fingerprint`, the statistics carry the write guard's fingerprint
// where the pass read `t`'s own memory.
Contents read_contents(const at::Tensor& t, int64_t max_values, bool with_fingerprint = false);
// The same from a host copy already made (the saver's).
Contents host_contents(const at::Tensor& host, int64_t max_values, bool with_fingerprint = false);

// The bytes `t`'s elements span from its data pointer; 0 when it has none.
uint64_t bytes_spanned(const at::Tensor& t);

// Which memory a tensor views, and how: what tells a later tensor to be the
// same view of the same memory, and what a write overlaps. The storage is
// weak: the memory goes back to the allocator when the model frees it, as
// with the printer off, and another tensor that gets the address meanwhile
// is not taken for it. Only for tensors `viewable` takes.
struct TensorView {
  explicit TensorView(const at::Tensor& t);
  // The same view of this memory, which is still alive.
  bool is(const at::Tensor& t) const;
  // Whether the bytes [begin, begin + bytes) meet this view's.
  bool overlaps(uintptr_t begin, uint64_t bytes) const {
    return span > 0 && data < begin + bytes && begin < data + span;
  }
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  uintptr_t data;
  uint64_t span;
  c10::ScalarType dtype;
  at::DimVector sizes, strides;
};
// A strided tensor with storage.
bool viewable(const at::Tensor& t);

// Metadata of `t`, with its contents.
TensorRecord describe(Where where, const at::Tensor& t, const Contents& contents);
// A record's statistics and values, from what was read of its tensor.
void fill_contents(TensorRecord& r, const Contents& contents);
// A host tensor's elements in row-major order, each as text for its dtype
// (non-finite floats as nan, inf, -inf), for TensorRecord::values.
std::vector<std::string> value_texts(const at::Tensor& host);

// What the records of a run read, while nothing changed the memory they
// read. A tensor recorded again is read once: the next kernel's input
// before its launch (the last kernel's output after its own), a residual
// read kernels later, a model input or a constant read by several kernels.
// What a kernel writes, it says in its records after launch (role: written),
// and those reads go; what the caller cannot vouch for (a kernel that writes
// memory no record names, wrapper code that runs between launch events, a
// kernel without records) ends them all (shim.cpp, at launch events).
class ReadsWhileUnchanged {
 public:
  // read_contents(t, max_values), without a fingerprint. Host tensors only
  // are shared: other devices' tensors are read each time.
  Contents contents(const at::Tensor& t, int64_t max_values);
  // device::snapshot_later(t, takes_values(t, max_values), batched), or the
  // snapshot of the same memory queued earlier while it was unchanged;
  // nullptr as there. With `with_fingerprint` (the write guard's, inside a
  // captured graph), always a pass of its own, never batched, and kept for
  // no later record: the guard compares two records' landings, and one
  // shared by both would be compared with itself.
  std::shared_ptr<device::Landing> landing(const at::Tensor& t, int64_t max_values, bool batched,
                                           bool with_fingerprint = false);
  // A kernel wrote `t`: what was read of any memory it overlaps has gone.
  void written(const at::Tensor& t);
  // Reads begin, and what was read before is forgotten: whatever came
  // before may have changed every tensor.
  void begin() {
    reads_.clear();
    open_ = true;
  }
  // Outside any run (upstream's print between the built-in's kernels, a
  // caller's own records) every record reads.
  void end() {
    reads_.clear();
    open_ = false;
  }
  // Lets go of what was read (the snapshots' slots of the ring, which a
  // full ring needs back), reads open or not as they were.
  void forget() { reads_.clear(); }
  // How many tensors records have read through these reads, in all
  // threads: the statistics passes printed records took (the tests' and
  // the bench's count of what was read once).
  static int64_t tensors_read();

 private:
  struct Read {
    TensorView view;
    // A host tensor's statistics (no values: they are the tensor itself,
    // and no reference to it is kept)...
    TensorStats stats;
    // ...or a CUDA tensor's queued snapshot, which holds no tensor either.
    std::shared_ptr<device::Landing> landing;
  };
  // The read of the memory `t` views, as `t` views it, if any.
  const Read* find(const at::Tensor& t) const;
  void add(const at::Tensor& t, TensorStats stats, std::shared_ptr<device::Landing> landing);
  std::deque<Read> reads_;
  bool open_ = false;
};

// Whether a record of `t` can wait for its contents to land, read on the
// GPU without waiting (late.h: record_later).
bool can_record_later(const at::Tensor& t, int64_t max_values);
// Whether a record of `t` can take its statistics from the slot a generated
// kernel kept as it stored `t`: a floating-point tensor the kernels keep
// statistics of, whose values are not printed, and a workspace that holds
// them: a CUDA tensor's run workspace (device.h: StoredRun), a CPU tensor's
// this thread's CPU workspace, `cpu_workspace` (aoti_debug_printer_cpu_statistics).
bool can_record_stored(const at::Tensor& t, const at::Tensor& workspace,
                       const at::Tensor& cpu_workspace, int64_t max_values);
// Its contents read now, from the slot (the trap's: it judges each kernel).
Contents stored_contents(const at::Tensor& t, const at::Tensor& workspace, int64_t field);
// A record taken while its run was captured into a CUDA graph, as one
// replay of the graph wrote it: its contents `taken` from its landing
// (device::take), which the replay's kernels filled.
TensorRecord replayed(const TensorRecord& r, device::Snapshot taken, int64_t replay);
// Where `arg` was taken before the launch of `at_kernel`'s kernel (a copy
// the trap, the guard or a replay saved), knowing nothing of what it holds.
Where before_launch_of(const Where& at_kernel, const std::string& arg);
// A record that carries only a problem (null handle, undefined tensor).
TensorRecord describe_problem(const Where& where, std::string problem);

// A kernel's tensor argument as it was at launch, kept while the printer
// checks for CUDA errors after kernels: enough to say, once the context is
// dead, what the kernel was given and whether it lay where it should.
struct WatchedArg {
  std::string name;
  std::vector<int64_t> shape;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  std::string device;
  uintptr_t data = 0;
  // The bytes the tensor's elements span, from `data`.
  uint64_t span = 0;
  uintptr_t storage = 0;
  uint64_t storage_bytes = 0;
  bool allocation_known = false;
  uintptr_t allocation = 0;
  uint64_t allocation_bytes = 0;
  // A host copy, taken before launch (replay, or the trap's argument the
  // kernel may write)...
  at::Tensor host;
  // ...or the argument itself, where the kernel only reads it and only the
  // trap needs its contents: the kernel must not change it, so what it
  // holds after launch is what it held before, copied only where the trap
  // fires (take_kept_copies). A copy per argument before each launch was
  // the trap's cost: one device-to-host copy each on the GPU.
  at::Tensor kept;
  std::string saved_as;
  // An output the kernel has not written yet: its copy is leftover memory,
  // never one of the kernel's inputs.
  bool unwritten_output = false;
};
// What watch keeps of an argument's contents as they were before launch.
enum class Before { Nothing, HostCopy, Kept };
WatchedArg watch(const std::string& name, const at::Tensor& t, Before before);
// A kernel's arguments watched so far: one kept (Before::Kept) whose memory
// an argument the kernel writes shares (every other one: watch keeps only
// arguments the kernel reads) would change with it, so it is copied now,
// before launch, after all.
void copy_kept_shared_with_writes(std::vector<WatchedArg>& watched);
// The host copies of the arguments watch kept, taken now.
void take_kept_copies(std::vector<WatchedArg>& watched);

}  // namespace aoti_debug_printer
