// aoti-debug-printer: the C ABI of the shim library.
//
// This header is also spliced verbatim into every wrapper that Inductor
// generates with the printer on, so it must stay self-contained: C types,
// the AOTI shim header, and (for C++) a header-only loader.
//
// Why a loader instead of linking: libtorch exports the upstream
// aoti_torch_print_tensor_handle / aoti_torch_save_tensor_handle too, so
// which one a plain call binds to depends on load order. Generated code
// never calls those names. It asks for our uniquely named
// aoti_debug_printer_get_api() with dlopen/dlsym and calls through the
// returned table, so our implementation runs whatever else is loaded, in a
// Python process or in a C++ program using AOTIModelPackageLoader.
#ifndef AOTI_DEBUG_PRINTER_H
#define AOTI_DEBUG_PRINTER_H

#include <stdint.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>

// 3 added tensor_held (roles and the reason a tensor has no node); 4 runs
// that end (begin_run_with_end, end_run); 5 tensor_computed (the formula of
// a value no single node holds) and compiled_with (the Inductor config of
// the run's program); 6 launch_at_level (the compiled level, as itself, on
// launch events too); 7 records_end (a launch event's records may wait for
// it to reach the GPU, together); 8 check_input (a model input against
// what the package was compiled for); 9 sources (where the program's nodes
// came from in the user's code); 10 tensor_stored and statistics_workspace
// (statistics generated kernels keep as they store); 11 stop_message (the
// stop's own words for the error a package raises, and launch events
// return their stop's code); 12 cpu_statistics and keep_cpu_statistics
// (statistics the C++ kernels keep as they store). Tables only grow at the end, and
// `size` says how much of one a caller may use, so packages compiled
// against an older header keep loading.
#define AOTI_DEBUG_PRINTER_ABI_VERSION 12
#define AOTI_DEBUG_PRINTER_OLDEST_ABI_VERSION 2
// The version of the records' JSON: every record carries it as "schema" (the
// fields are in docs/output.md). Readers refuse a newer one. 2: upstream's
// records have phase "upstream" and their message in "label"; "why" is a
// reason code (aoti_debug_printer/records.py), its detail after a colon.
// 3: role "accumulate", and a value changed in place carries the node it
// holds once changed. 4: event "wrong_input" (a model input the package was
// not compiled for). 5: findings carry "source" (the user's frames that
// made their node, innermost first), environment records "sources".
// 6: a snapshot that could not be saved keeps its record in the manifest,
// with "unsaved" (why) in place of "file". 7: a record a replay of a
// captured CUDA graph wrote carries "replay", the replay's index from 0.
#define AOTI_DEBUG_PRINTER_RECORD_SCHEMA 8

#ifdef __cplusplus
extern "C" {
#endif

// The printer level a model was compiled at, as
// AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER numbers it. Generated code
// passes it, as itself, to every record and launch event (`level`); what a
// record does then (save, print, or at level 3 note a tensor argument for
// the CUDA error check) the shim decides from it and the run-time level
// (AOTI_DEBUG_PRINTER_LEVEL).
enum {
  AOTI_DEBUG_PRINTER_LEVEL_SAVE = 1,
  AOTI_DEBUG_PRINTER_LEVEL_PRINT = 2,
  AOTI_DEBUG_PRINTER_LEVEL_KERNEL_NAMES = 3,
};

// Flags of a launch event. 2 is taken: packages compiled against ABI 5 or
// older pass their level 3 there, through aoti_debug_printer_launch.
enum {
  // Print the event (level 3, kernels the filter selects).
  AOTI_DEBUG_PRINTER_ANNOUNCE = 1,
  // The compile-time filter did not select this kernel: it has no records,
  // and the run-time filter cannot select it.
  AOTI_DEBUG_PRINTER_UNSELECTED = 4,
  // The kernel writes memory that none of its records name (a view passed
  // as an expression, or writes the code generator does not know): the
  // write guard vouches for no buffer across it.
  AOTI_DEBUG_PRINTER_WRITES_UNSEEN = 8,
  // aoti_debug_printer_records_end follows this event's records, before
  // any other GPU work: their statistics may wait for it and go to the GPU
  // in one launch. Without it, each record's go at once.
  AOTI_DEBUG_PRINTER_RECORDS_END = 16,
  // The last launch event's records continue into this one's: between them
  // the code does no GPU work, and its records_end was left out. What they
  // queued waits for this event's records_end.
  AOTI_DEBUG_PRINTER_RECORDS_CONTINUE = 32,
  // Since the last launch event (or the run's start), the code wrote no
  // constant but through kernels whose records say so: the constants'
  // contents read before still hold (AOTI_DEBUG_PRINTER_WHY_CONSTANT).
  // Without it, they are read again.
  AOTI_DEBUG_PRINTER_CONSTANTS_HOLD = 64,
};

// Where a record sits relative to its kernel launch.
enum {
  AOTI_DEBUG_PRINTER_BEFORE_LAUNCH = 0,
  AOTI_DEBUG_PRINTER_AFTER_LAUNCH = 1,
  AOTI_DEBUG_PRINTER_MODEL_INPUT = 2,
};

// What a kernel does to a tensor argument, as the code generator knows it.
enum {
  AOTI_DEBUG_PRINTER_ROLE_UNKNOWN = 0,
  AOTI_DEBUG_PRINTER_ROLE_READ = 1,        // only reads it
  AOTI_DEBUG_PRINTER_ROLE_WRITE = 2,       // stores its value, which nothing held before
  AOTI_DEBUG_PRINTER_ROLE_READ_WRITE = 3,  // changes a value it was given (in place)
  // Adds into a value it was given in an order the hardware picks (float
  // atomics): nondeterministic by construction, in its last bits.
  AOTI_DEBUG_PRINTER_ROLE_ACCUMULATE = 4,
};

// Statistics kept inside generated kernels (AOTI_DEBUG_PRINTER_STATS_IN_KERNELS):
// a Triton or C++ kernel that stores a whole floating-point buffer also
// reduces the values it stores, as stored, into a slot of the run's
// statistics workspace: on the GPU an int64 CUDA tensor the wrapper zeroes
// once per run, on the CPU this thread's (aoti_debug_printer_cpu_statistics),
// whose slots each kernel zeroes before it runs. A slot is
// AOTI_DEBUG_PRINTER_STORED_SLOT int64 fields; each one's identity is zero,
// so programs add (counts, sums) or take the maximum (keys) atomically, and
// a C++ kernel's threads merge into it one at a time.
enum {
  // The workspace's first field, in slot 0, which holds no statistics:
  // nonzero while the kernels keep them (aoti_debug_printer_statistics_workspace).
  AOTI_DEBUG_PRINTER_STORED_SWITCH = 0,
  AOTI_DEBUG_PRINTER_STORED_NAN = 0,
  AOTI_DEBUG_PRINTER_STORED_POS_INF = 1,
  AOTI_DEBUG_PRINTER_STORED_NEG_INF = 2,
  AOTI_DEBUG_PRINTER_STORED_ZEROS = 3,  // finite values that are zero
  // The largest finite value's key, and 2^33 minus the smallest's: a float's
  // bits b (as int32) give the key (b < 0 ? b ^ 0x7fffffff : b) + 2^31 + 1,
  // which orders as the floats do and is never zero.
  AOTI_DEBUG_PRINTER_STORED_MAX_KEY = 4,
  AOTI_DEBUG_PRINTER_STORED_MIN_KEY = 5,
  // float64 sums of the finite values and of their squares, each value less
  // the shift (field 8).
  AOTI_DEBUG_PRINTER_STORED_SUM = 6,
  AOTI_DEBUG_PRINTER_STORED_SUM_OF_SQUARES = 7,
  // The shift, float64 bits: zero in a Triton kernel's slot; in a C++
  // kernel's, the first finite value a thread stored, which keeps a
  // constant tensor's deviation exactly zero.
  AOTI_DEBUG_PRINTER_STORED_SHIFT = 8,
  // The finite values counted so far (a C++ kernel's threads merge by it).
  AOTI_DEBUG_PRINTER_STORED_FINITE = 9,
  // Fields a slot holds: 128 bytes, so that slots share no cache line.
  AOTI_DEBUG_PRINTER_STORED_SLOT = 16,
};

// The reason code (a record's `why`; aoti_debug_printer/records.py: Reason)
// of a weight or buffer the program was given that no kernel of the run has
// written yet: such a record's contents are read once a process, while the
// tensor is unchanged.
#define AOTI_DEBUG_PRINTER_WHY_CONSTANT "constant"

// Why a tensor record returns nonzero: the caller must stop the run.
enum {
  AOTI_DEBUG_PRINTER_STOPPED_BY_TRAP = 1,  // the NaN/Inf trap fired
  AOTI_DEBUG_PRINTER_STOPPED_BY_GUARD =
      2,  // the write guard found a kernel writing where it must not
  AOTI_DEBUG_PRINTER_STOPPED_BY_INPUT_CHECK =
      3,  // a model input is not what the package was compiled for
  // From launch events (a library older than ABI 11 returns 1 for either).
  AOTI_DEBUG_PRINTER_STOPPED_BY_CUDA_ERROR = 4,  // the check after a kernel found one
  // The trap fired at a replay of a captured CUDA graph, which no replay
  // can stop: this run, the first outside the graph, does.
  AOTI_DEBUG_PRINTER_STOPPED_BY_EARLIER_REPLAY = 5,
};

// Every function below catches all exceptions: a failure is reported on the
// output (once for repeated save failures) and the model keeps running.

// Starts a new run of a model on this thread: resets launch and call indices.
void aoti_debug_printer_begin_run(void);
// The same, for a run that aoti_debug_printer_end_run will end (the C++
// helper aoti_debug_printer::Run does both, also when the run throws). In
// such a run a printed record of a CUDA tensor does not wait for the GPU:
// its statistics are computed in stream order and the record is written, in
// its turn, once they have landed. end_run writes every record of the run
// before it returns, and a thread's exit writes what is left.
void aoti_debug_printer_begin_run_with_end(void);
void aoti_debug_printer_end_run(void);
// Marks a kernel launch of a model compiled at `level`. BEFORE_LAUNCH
// advances this thread's launch index and the kernel's call index. While
// the sync setting applies (with "auto": a model compiled at level 3),
// AFTER_LAUNCH waits for the GPU and checks CUDA's error state: on an error
// it writes a record that names this kernel and returns
// AOTI_DEBUG_PRINTER_STOPPED_BY_CUDA_ERROR, and the caller must stop the run
// (the CUDA context is lost). The first BEFORE_LAUNCH of a run returns
// AOTI_DEBUG_PRINTER_STOPPED_BY_EARLIER_REPLAY where the trap fired at a
// replay of a captured CUDA graph since the last run outside one.
int32_t aoti_debug_printer_launch_at_level(int32_t level, int32_t phase, const char* kernel,
                                           int32_t flags);
// The same for packages compiled against ABI 5 or older: level 3 as flag 2,
// else level 2.
int32_t aoti_debug_printer_launch(int32_t phase, const char* kernel, int32_t flags);
// The records of the last launch event (AOTI_DEBUG_PRINTER_RECORDS_END) end
// here: the statistics they queued are launched now, before the kernel (or
// whatever follows) may change those tensors.
void aoti_debug_printer_records_end(void);
// One tensor argument of a model compiled at `level`: print a record or
// save a snapshot, as the run-time level says. Returns nonzero
// (AOTI_DEBUG_PRINTER_STOPPED_BY_*) when the NaN/Inf trap or the write guard
// fired (reported already); the caller must stop.
int32_t aoti_debug_printer_tensor(int32_t level, int32_t phase, const char* kernel, const char* arg,
                                  AtenTensorHandle tensor);
// The same, naming the node of the exported program whose value the tensor
// holds (its provenance), which `aoti-debug diverge` matches against eager.
int32_t aoti_debug_printer_tensor_of_node(int32_t level, int32_t phase, const char* kernel,
                                          const char* arg, const char* node,
                                          AtenTensorHandle tensor);
// The same with everything the code generator knows of the argument: its
// role, and either the node whose value it holds or (`why`) the reason it
// holds no single node's value. Empty strings stand for "not known".
int32_t aoti_debug_printer_tensor_held(int32_t level, int32_t phase, const char* kernel,
                                       const char* arg, const char* node, const char* why,
                                       int32_t role, AtenTensorHandle tensor);
// The same, with `formula`: how the value the tensor holds is computed from
// values the exported program names, where it holds no single node's value
// (JSON: its steps and which one it is, see aoti_debug_printer/inductor/provenance.py).
// Empty when not known.
int32_t aoti_debug_printer_tensor_computed(int32_t level, int32_t phase, const char* kernel,
                                           const char* arg, const char* node, const char* why,
                                           const char* formula, int32_t role,
                                           AtenTensorHandle tensor);
// The same for a tensor a generated kernel stored whole: `statistics` is
// the run's statistics workspace and `slot` the first field of the slot the
// kernel reduced its stores into (the kernel's before the next write of the
// tensor). The statistics come from there, with no pass of their own, where
// the record prints them; elsewhere (a save, the write guard, a CUDA graph
// being captured) the record reads the tensor as tensor_computed does.
int32_t aoti_debug_printer_tensor_stored(int32_t level, int32_t phase, const char* kernel,
                                         const char* arg, const char* node, const char* why,
                                         const char* formula, int32_t role, AtenTensorHandle tensor,
                                         AtenTensorHandle statistics, int64_t slot);
// The run's statistics workspace, just zeroed by the wrapper: where this
// run's records print what the kernels keep, its switch
// (AOTI_DEBUG_PRINTER_STORED_SWITCH) is set, in stream order, and the
// kernels keep their statistics; elsewhere they skip that work: the printer
// switched off or to another level at run time, the write guard on, a CUDA
// graph being captured (its records read the tensors at each replay), and
// Inductor's autotuning at compile time, which never calls this, so that the
// statistics never sway which kernel configs it picks.
void aoti_debug_printer_statistics_workspace(AtenTensorHandle workspace);
// This thread's CPU statistics workspace, which tensor_stored takes as
// `statistics` for a tensor a C++ kernel stored whole: a handle the library
// keeps, valid while the thread lives, never deleted by the caller.
AtenTensorHandle aoti_debug_printer_cpu_statistics(void);
// Before the call of a C++ kernel that keeps the statistics of what it
// stores: zeroes `fields` fields of this thread's CPU statistics workspace
// from `first` and returns where they start, which the kernel reduces into;
// NULL where this run's records take nothing from kernels (as
// statistics_workspace leaves the switch off), and the kernel keeps nothing.
int64_t* aoti_debug_printer_keep_cpu_statistics(int64_t first, int64_t fields);
// The digest of the Inductor config the running program was compiled with,
// recorded in the run's environment record; called after begin_run.
void aoti_debug_printer_compiled_with(const char* inductor_config);
// Where the running program's nodes came from in the user's code, for its
// findings to say; called after begin_run. One line per node:
//   NODE \t FRAME \t FRAME ... \n
// a FRAME "file:line in function: code", the innermost first, with no tab
// or newline inside (see aoti_debug_printer/source_lines.py).
void aoti_debug_printer_sources(const char* table);
// Scalar and SymInt arguments, each in its own type's format.
void aoti_debug_printer_int64(int32_t level, int32_t phase, const char* kernel, const char* arg,
                              int64_t value);
void aoti_debug_printer_float64(int32_t level, int32_t phase, const char* kernel, const char* arg,
                                double value);
void aoti_debug_printer_bool(int32_t level, int32_t phase, const char* kernel, const char* arg,
                             int32_t value);
// Model input `arg` (the exported program's input `name`, "" where not
// known) of a model compiled at `level`, checked against what the package
// was compiled for, before the first kernel. `compiled_for`, made by the
// codegen (aoti_debug_printer/inductor/compiled_inputs.py):
//   DTYPE DEVICE_TYPE [DIM,...] [STRIDE,...]
// DTYPE is torch's name (float32), DEVICE_TYPE cpu or cuda. A DIM is a size
// N, SYMBOL:LO..HI (one of the run's symbols: every dim that names it must
// be equal) or ?:LO..HI (an expression, checked against its range), HI
// empty for no bound; either may end in (LO..HI), the range the exported
// program gave it where the package accepts less. A STRIDE is a number, or
// ? where it is not fixed. Returns AOTI_DEBUG_PRINTER_STOPPED_BY_INPUT_CHECK
// (reported already) when the input differs and the input_check setting
// says stop; the caller must stop.
int32_t aoti_debug_printer_check_input(int32_t level, const char* arg, const char* name,
                                       const char* compiled_for, AtenTensorHandle tensor);
// The message of this thread's last stop (whatever returned a nonzero
// AOTI_DEBUG_PRINTER_STOPPED_BY_* code last), as the output reported it:
// the error the caller raises says it. "" where none; valid until the
// thread's next stop.
const char* aoti_debug_printer_stop_message(void);
// Run-time settings; see docs/usage.md ("Switches"). Returns 0 on success, nonzero
// with a message on the output for an unknown key or a bad value.
int32_t aoti_debug_printer_set_option(const char* key, const char* value);

// The table generated code calls through.
typedef struct aoti_debug_printer_api {
  uint32_t abi_version;
  uint32_t size;
  void (*begin_run)(void);
  int32_t (*launch)(int32_t, const char*, int32_t);
  int32_t (*tensor)(int32_t, int32_t, const char*, const char*, AtenTensorHandle);
  void (*int64)(int32_t, int32_t, const char*, const char*, int64_t);
  void (*float64)(int32_t, int32_t, const char*, const char*, double);
  void (*boolean)(int32_t, int32_t, const char*, const char*, int32_t);
  int32_t (*tensor_of_node)(int32_t, int32_t, const char*, const char*, const char*,
                            AtenTensorHandle);
  // ABI 3.
  int32_t (*tensor_held)(int32_t, int32_t, const char*, const char*, const char*, const char*,
                         int32_t, AtenTensorHandle);
  // ABI 4.
  void (*begin_run_with_end)(void);
  void (*end_run)(void);
  // ABI 5.
  int32_t (*tensor_computed)(int32_t, int32_t, const char*, const char*, const char*, const char*,
                             const char*, int32_t, AtenTensorHandle);
  void (*compiled_with)(const char*);
  // ABI 6.
  int32_t (*launch_at_level)(int32_t, int32_t, const char*, int32_t);
  // ABI 7.
  void (*records_end)(void);
  // ABI 8.
  int32_t (*check_input)(int32_t, const char*, const char*, const char*, AtenTensorHandle);
  // ABI 9.
  void (*sources)(const char*);
  // ABI 10.
  int32_t (*tensor_stored)(int32_t, int32_t, const char*, const char*, const char*, const char*,
                           const char*, int32_t, AtenTensorHandle, AtenTensorHandle, int64_t);
  void (*statistics_workspace)(AtenTensorHandle);
  // ABI 11.
  const char* (*stop_message)(void);
  // ABI 12.
  AtenTensorHandle (*cpu_statistics)(void);
  int64_t* (*keep_cpu_statistics)(int64_t, int64_t);
} aoti_debug_printer_api;

// Returns the table, or NULL when the caller wants an ABI we do not have
// (older than AOTI_DEBUG_PRINTER_OLDEST_ABI_VERSION or newer than ours). A
// caller built against ABI N uses only the members its header had, and any
// member past `size` is absent.
const aoti_debug_printer_api* aoti_debug_printer_get_api(uint32_t abi_version);

// Upstream's signatures, kept as aliases of the functions above so that code
// written against PyTorch's shim.h reaches our implementation when it binds
// to this library.
void aoti_torch_print_tensor_handle(AtenTensorHandle self, const char* msg);
void aoti_torch_save_tensor_handle(AtenTensorHandle self, const char* tensor_name,
                                   const char* launch_prefix, const char* kernel_name);

#ifdef __cplusplus
}  // extern "C"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace aoti_debug_printer {

// Finds the shim library once per loaded model. `built_with` is the absolute
// path of the library the model was compiled against; the environment
// variable AOTI_DEBUG_PRINTER_LIBRARY overrides it when the model moves to
// another machine. Returns nullptr (after one message) when nothing loads,
// and the model then runs without records.
inline const aoti_debug_printer_api* load_api(const char* built_with) {
  static const aoti_debug_printer_api* api = [built_with]() {
    const char* env = getenv("AOTI_DEBUG_PRINTER_LIBRARY");
    const char* candidates[] = {env && *env ? env : nullptr, built_with,
                                "libaoti_debug_printer.so"};
    for (const char* path : candidates) {
      if (!path) continue;
      // RTLD_NOLOAD first: an instance already loaded (by the Python module)
      // is the one whose counters and output the process already uses.
      void* lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
      if (!lib) lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (!lib) continue;
      using GetApi = const aoti_debug_printer_api* (*)(uint32_t);
      auto get = reinterpret_cast<GetApi>(dlsym(lib, "aoti_debug_printer_get_api"));
      const aoti_debug_printer_api* found = get ? get(AOTI_DEBUG_PRINTER_ABI_VERSION) : nullptr;
      // An older library is asked for the newest table it can give.
      for (uint32_t v = AOTI_DEBUG_PRINTER_ABI_VERSION;
           get && !found && v-- > AOTI_DEBUG_PRINTER_OLDEST_ABI_VERSION;) {
        found = get(v);
      }
      if (found) return found;
    }
    fprintf(stderr,
            "[aoti-debug-printer] ERROR: cannot load the shim library (tried "
            "$AOTI_DEBUG_PRINTER_LIBRARY and '%s'); this model runs without "
            "debug records\n",
            built_with);
    fflush(stderr);
    return static_cast<const aoti_debug_printer_api*>(nullptr);
  }();
  return api;
}

// One run of the model, from where it is declared to where it goes out of
// scope, by a return or an exception: every record of the run is written
// before the run returns. A library older than this header has no end_run:
// the run then only begins, and its records are written as they are taken.
class Run {
 public:
  // `inductor_config`: the digest of the config the program was compiled
  // with; `sources`: where its nodes came from (aoti_debug_printer_sources).
  explicit Run(const aoti_debug_printer_api* api, const char* inductor_config = "",
               const char* sources = "")
      : api_(api && api->size >= offsetof(aoti_debug_printer_api, end_run) + sizeof(api->end_run)
                 ? api
                 : nullptr) {
    if (api_) {
      api_->begin_run_with_end();
    } else if (api) {
      api->begin_run();
    }
    if (api &&
        api->size >= offsetof(aoti_debug_printer_api, compiled_with) + sizeof(api->compiled_with)) {
      api->compiled_with(inductor_config);
    }
    if (api && api->size >= offsetof(aoti_debug_printer_api, sources) + sizeof(api->sources)) {
      api->sources(sources);
    }
  }
  ~Run() {
    if (api_) api_->end_run();
  }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

 private:
  const aoti_debug_printer_api* api_;
};

// The error a package's run ends with where the library said stop (`stop`,
// an AOTI_DEBUG_PRINTER_STOPPED_BY_* code): the stop's own words, which
// the output reported. A library older than ABI 11 gives only the code.
inline std::string stop_text(const aoti_debug_printer_api* api, int32_t stop, const char* kernel,
                             const char* arg) {
  const char* said =
      api->size >= offsetof(aoti_debug_printer_api, stop_message) + sizeof(api->stop_message)
          ? api->stop_message()
          : nullptr;
  std::string text = "aoti-debug-printer: ";
  if (said && *said) return text + said;
  switch (stop) {
    case AOTI_DEBUG_PRINTER_STOPPED_BY_CUDA_ERROR: text += "CUDA error at kernel "; break;
    case AOTI_DEBUG_PRINTER_STOPPED_BY_GUARD: text += "write guard at "; break;
    case AOTI_DEBUG_PRINTER_STOPPED_BY_INPUT_CHECK: text += "wrong input at "; break;
    case AOTI_DEBUG_PRINTER_STOPPED_BY_EARLIER_REPLAY:
      text += "stopped for an earlier replay of a captured CUDA graph, at ";
      break;
    default: text += "NaN/Inf trap at "; break;
  }
  return text + (*kernel ? kernel : "model input") + (*arg ? " " : "") + arg +
         "; its record is above";
}

// A launch event of a model compiled at `level`; throws where the library
// says stop (a CUDA error after a kernel, a replay's trap), which ends the
// model's run with the stop's own words. A library older than this header
// takes the level as it did (3 as flag 2).
inline void launch(const aoti_debug_printer_api* api, int32_t level, int32_t phase,
                   const char* kernel, int32_t flags) {
  if (!api) return;
  const bool takes_level =
      api->size >= offsetof(aoti_debug_printer_api, launch_at_level) + sizeof(api->launch_at_level);
  const int32_t failed =
      takes_level ? api->launch_at_level(level, phase, kernel, flags)
                  : api->launch(phase, kernel,
                                flags | (level == AOTI_DEBUG_PRINTER_LEVEL_KERNEL_NAMES ? 2 : 0));
  if (failed != 0) {
    // Before ABI 11 a launch event stopped for a CUDA error only, and said 1.
    const bool coded =
        api->size >= offsetof(aoti_debug_printer_api, stop_message) + sizeof(api->stop_message);
    throw std::runtime_error(
        stop_text(api, coded ? failed : AOTI_DEBUG_PRINTER_STOPPED_BY_CUDA_ERROR, kernel, ""));
  }
}

// The end of a launch event's records (AOTI_DEBUG_PRINTER_RECORDS_END). A
// library older than this header never lets them wait: nothing to do.
inline void records_end(const aoti_debug_printer_api* api) {
  if (api && api->size >= offsetof(aoti_debug_printer_api, records_end) + sizeof(api->records_end))
    api->records_end();
}

// A model input against what the package was compiled for
// (aoti_debug_printer_check_input); throws when the run must stop. A library
// older than this header does not check.
inline void check_input(const aoti_debug_printer_api* api, int32_t level, const char* arg,
                        const char* name, const char* compiled_for, AtenTensorHandle tensor) {
  if (!api || api->size < offsetof(aoti_debug_printer_api, check_input) + sizeof(api->check_input))
    return;
  if (const int32_t stop = api->check_input(level, arg, name, compiled_for, tensor); stop != 0)
    throw std::runtime_error(stop_text(api, stop, "", *name ? name : arg));
}

// Throws where a tensor record said the run must stop.
inline void stop_if_asked(const aoti_debug_printer_api* api, int32_t stop, const char* kernel,
                          const char* arg) {
  if (stop != 0) throw std::runtime_error(stop_text(api, stop, kernel, arg));
}

// One call site for every argument the codegen emits: the C++ type of the
// expression picks the record, so a float is never printed as an integer.
// `node`, `why`, `role` and `formula`: what the code generator knows of a
// tensor argument (see aoti_debug_printer_tensor_computed).
template <typename T>
inline void value(const aoti_debug_printer_api* api, int32_t level, int32_t phase,
                  const char* kernel, const char* arg, const T& v, const char* node = "",
                  const char* why = "", int32_t role = AOTI_DEBUG_PRINTER_ROLE_UNKNOWN,
                  const char* formula = "") {
  if (!api) return;
  if constexpr (std::is_convertible_v<const T&, AtenTensorHandle>) {
    const AtenTensorHandle h = static_cast<AtenTensorHandle>(v);
    // A library older than this header has a shorter table: the record goes
    // without what the missing members would have carried.
    auto has = [api](size_t offset, size_t size) { return api->size >= offset + size; };
    stop_if_asked(
        api,
        has(offsetof(aoti_debug_printer_api, tensor_computed), sizeof(api->tensor_computed))
            ? api->tensor_computed(level, phase, kernel, arg, node, why, formula, role, h)
        : has(offsetof(aoti_debug_printer_api, tensor_held), sizeof(api->tensor_held))
            ? api->tensor_held(level, phase, kernel, arg, node, why, role, h)
            : api->tensor_of_node(level, phase, kernel, arg, node, h),
        kernel, arg);
  } else if constexpr (std::is_same_v<T, bool>) {
    api->boolean(level, phase, kernel, arg, v ? 1 : 0);
  } else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
    api->int64(level, phase, kernel, arg, static_cast<int64_t>(v));
  } else if constexpr (std::is_floating_point_v<T>) {
    api->float64(level, phase, kernel, arg, static_cast<double>(v));
  }
  // Any other type (pointers, array refs) has no record; the codegen only
  // passes tensors and scalars, and a model must never fail to build because
  // the printer is on.
}

// The run's statistics workspace, just zeroed
// (aoti_debug_printer_statistics_workspace). A library older than this
// header never switches the kernels' statistics on.
inline void statistics_workspace(const aoti_debug_printer_api* api, AtenTensorHandle workspace) {
  if (api && api->size >= offsetof(aoti_debug_printer_api, statistics_workspace) +
                              sizeof(api->statistics_workspace))
    api->statistics_workspace(workspace);
}

// This thread's CPU statistics workspace (aoti_debug_printer_cpu_statistics);
// nullptr from a library older than this header, whose records then read
// the tensors.
inline AtenTensorHandle cpu_statistics(const aoti_debug_printer_api* api) {
  return api && api->size >=
                     offsetof(aoti_debug_printer_api, cpu_statistics) + sizeof(api->cpu_statistics)
             ? api->cpu_statistics()
             : nullptr;
}

// Where the C++ kernel about to be called reduces what it stores: set by
// the wrapper just before the call, on the thread that makes it, from
// keep_cpu_statistics; taken (and left null) as the kernel starts, before
// its threads run. The package's one definition serves its wrapper and its
// kernels.
inline thread_local int64_t* kernel_statistics = nullptr;

inline int64_t* keep_cpu_statistics(const aoti_debug_printer_api* api, int64_t first,
                                    int64_t fields) {
  return api && api->size >= offsetof(aoti_debug_printer_api, keep_cpu_statistics) +
                                 sizeof(api->keep_cpu_statistics)
             ? api->keep_cpu_statistics(first, fields)
             : nullptr;
}

// A finite float's key in a slot (AOTI_DEBUG_PRINTER_STORED_MAX_KEY), and
// the float of a key: the one encoding, which the Triton kernels' code
// (inductor/stored_stats.py) writes too.
inline int64_t stored_key(float value) {
  int32_t bits;
  memcpy(&bits, &value, sizeof bits);
  return static_cast<int64_t>(bits < 0 ? bits ^ 0x7fffffff : bits) + (int64_t{1} << 31) + 1;
}
inline float float_of_stored_key(int64_t key) {
  const int64_t ordered = key - (int64_t{1} << 31) - 1;
  const auto bits = static_cast<int32_t>(ordered < 0 ? ordered ^ 0x7fffffff : ordered);
  float value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

// A tensor a generated kernel stored whole, with its statistics in `slot`
// of the run's `statistics` workspace (aoti_debug_printer_tensor_stored). A
// library older than this header reads the tensor instead.
inline void value_stored(const aoti_debug_printer_api* api, int32_t level, int32_t phase,
                         const char* kernel, const char* arg, AtenTensorHandle tensor,
                         AtenTensorHandle statistics, int64_t slot, const char* node = "",
                         const char* why = "", int32_t role = AOTI_DEBUG_PRINTER_ROLE_UNKNOWN,
                         const char* formula = "") {
  if (!api) return;
  if (api->size < offsetof(aoti_debug_printer_api, tensor_stored) + sizeof(api->tensor_stored)) {
    value(api, level, phase, kernel, arg, tensor, node, why, role, formula);
    return;
  }
  stop_if_asked(api,
                api->tensor_stored(level, phase, kernel, arg, node, why, formula, role, tensor,
                                   statistics, slot),
                kernel, arg);
}

}  // namespace aoti_debug_printer
#endif  // __cplusplus

#endif  // AOTI_DEBUG_PRINTER_H
