// Records as people and programs read them: the text format and one JSON
// line per record, for tensors, scalars, launches, the run's environment,
// and findings (CUDA errors, the trap, the write guard, wrong inputs). The
// one place either format is spelled, so text, JSON lines and manifest
// never disagree.
#pragma once

#include "json.h"
#include "record.h"
#include "stats.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace aoti_debug_printer {

// A whole record, newline included, as text or as one JSON line.
std::string format_record(const TensorRecord& r, bool json);
std::string format_text(const TensorRecord& r);
// One JSON object, no newline; `file`, where not empty, is the snapshot that
// holds the tensor (relative to the dump directory); `unsaved`, where not
// empty, why there is none (its save failed).
std::string format_json(const TensorRecord& r, const std::string& file = "",
                        const std::string& unsaved = "");

// Scalars and launch events, in both formats.
std::string format_scalar(const Where& where, const char* type, const std::string& value,
                          bool json);
std::string format_launch(const Where& where, bool json);

// The numerics settings a run was made in, as one JSON line: torch's
// version, the device (`device` is a record's device string: "cpu",
// "cuda:0"), and ATen's TF32, matmul-precision, reduced-precision reduction
// and determinism flags. A dump holds one per run, before its first
// snapshot, so `compare` and `diverge` judge by the run's settings, not by
// those of the process that reads the dump.
std::string format_environment(const Where& where, const std::string& device);

// The record of a CUDA error found by the check after `where`'s kernel.
std::string format_cuda_error(const Where& where, const std::string& error,
                              const std::vector<WatchedArg>& args, bool json);

// The NaN/Inf trap's record: what fired (`what`), the offending tensor's
// counts, and the kernel's inputs as they were before launch, with the files
// they were saved to (parallel to `inputs`; empty where not saved).
std::string format_trap(const Where& where, const TensorStats& stats, const std::string& what,
                        const std::vector<TensorRecord>& inputs, bool json,
                        const std::vector<std::string>& files = {});

// What the write guard found: a kernel changed an argument it only reads
// (`where` is its after-launch record), or a buffer changed between the
// kernel that wrote it and the next kernel that reads it (`where` is the
// reader's before-launch record).
struct GuardFinding {
  Where where;
  std::string kind;     // "read_only_argument_changed" or "overwritten_before_read"
  std::string message;  // one line that says it all
  int64_t numel = 0;
  int64_t changed = -1;              // elements changed; -1 when not known (only a fingerprint)
  int64_t first_index = -1;          // row-major index of the first changed element
  std::string writer;                // the kernel that wrote the buffer, with its launch
  std::vector<std::string> between;  // kernels launched between writer and reader
  std::string culprit;               // what changed it, when the guard could tell
  std::vector<std::pair<std::string, std::string>> files;  // (what, file) saved
};
std::string format_guard(const GuardFinding& f, bool json);

// A model input that is not what its package was compiled for (inputs.h):
// `kind` is inputs::Mismatch's code, `dim` -1 for the tensor as a whole.
struct WrongInput {
  Where where;  // a model_input record's: arg, and node, the input's name
  std::string kind, given, compiled_for, message;
  int64_t dim = -1;
};
std::string format_wrong_input(const WrongInput& w, bool json);

// A record of `event` begins with where it was taken, and the schema.
JsonObject json_record(const char* event, const Where& w);

std::string dtype_name(c10::ScalarType t);
// torch's spelling, lower case: strided, sparse, sparsecsr, ...
std::string layout_name(c10::Layout layout);

}  // namespace aoti_debug_printer
