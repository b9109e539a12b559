// A model input against what its package was compiled for: the sizes (a
// size, a range, or a symbol that other dims share), the strides that are
// fixed, the dtype and the device. AOTInductor's wrapper checks this only
// under AOTI_RUNTIME_CHECK_INPUTS=1; without it, an input of another size
// runs, and its kernels read it as the size they were compiled for.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace aoti_debug_printer::inputs {

constexpr int64_t kNoBound = std::numeric_limits<int64_t>::max();

struct Range {
  int64_t lo = 0, hi = kNoBound;
  bool holds(int64_t v) const { return v >= lo && v <= hi; }
  bool one() const { return lo == hi; }
};
// "64", "8..512", "8.." (no upper bound).
std::string range_text(const Range& r);

struct CompiledDim {
  Range accepted;
  // The run's symbol this size is ("s27"), whose every dim must be equal;
  // empty for a fixed size or an expression.
  std::string symbol;
  // The range the exported program gave this dim, where the package
  // accepts less (the compiler specialized or narrowed it).
  std::optional<Range> exported;
};

struct CompiledInput {
  std::string dtype, device;
  std::vector<CompiledDim> sizes;
  std::vector<std::optional<int64_t>> strides;  // nullopt: not fixed
};

// The codegen's text (the grammar: aoti_debug_printer_check_input in
// aoti_debug_printer.h). Throws std::invalid_argument.
CompiledInput parse(const std::string& compiled_for);

// What differs, as a finding: a code for what (kind), the dim (-1 for the
// tensor as a whole), what was given and what the package takes.
struct Mismatch {
  std::string kind;  // size, rank, relation, stride, dtype, device
  int64_t dim = -1;
  std::string given, compiled_for;
  std::string message;  // one line that says it all, naming the input
};

// The first thing about `t` that `compiled` does not accept. `symbols`:
// the run's symbols bound so far (by earlier inputs), each with the input
// and dim that bound it; this input's symbols are added.
struct Binding {
  int64_t value;
  std::string where;  // "input x dim 1"
};
std::optional<Mismatch> check(const CompiledInput& compiled, const at::Tensor& t,
                              const std::string& input,
                              std::unordered_map<std::string, Binding>& symbols);

}  // namespace aoti_debug_printer::inputs
