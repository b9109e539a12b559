// A custom op with a C++ kernel and the bug the write guard exists for: with
// `past` > 0 its loop runs `past` rows beyond the output it declares, writing
// through a raw pointer as a wrong bound does. Nothing faults when the rows
// after the output belong to a live neighbour in the same allocation.
// models.py's FillRows calls it as adp_cpp::fill_rows_ (the same op as
// adp_models::fill_rows_, whose kernel is Python); test_guard.py loads it.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace {

void fill_rows_(const at::Tensor& out, const at::Tensor& x, int64_t past) {
  TORCH_CHECK(
      out.is_cpu() && out.is_contiguous() && out.scalar_type() == at::kFloat && out.dim() == 2,
      "fill_rows_: out must be a contiguous 2-D float32 CPU tensor");
  const at::Tensor first_row = x[0].to(at::kFloat).contiguous();
  const int64_t cols = out.size(1), rows = out.size(0) + past;
  float* o = out.data_ptr<float>();
  const float* row = first_row.const_data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) o[r * cols + c] = row[c];
  }
}

}  // namespace

TORCH_LIBRARY(adp_cpp, m) { m.def("fill_rows_(Tensor(a!) out, Tensor x, int past) -> ()"); }
TORCH_LIBRARY_IMPL(adp_cpp, CPU, m) { m.impl("fill_rows_", &fill_rows_); }
TORCH_LIBRARY_IMPL(adp_cpp, Meta, m) {
  m.impl("fill_rows_", [](const at::Tensor&, const at::Tensor&, int64_t) {});
}
