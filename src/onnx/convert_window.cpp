// Window functions (opset 17): HannWindow, HammingWindow and BlackmanWindow fold to constants.
// Their only input is the window length, which must be known at import (a constant, or a graph
// input whose value is given at run time: OnnxExecutable), and the output depends on nothing else.
//
//   w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N),  n = 0 .. size-1
//   N = size (periodic, the default) or size - 1 (symmetric)
//   Hann a0 = a1 = 0.5; Hamming a0 = 25/46, a1 = 21/46; Blackman 0.42, 0.5, 0.08
//
// computed in double and rounded once to the output type (ONNX's reference computes in float: the
// two differ by at most a float rounding).
#include <cmath>
#include <numbers>

#include "onnx/converters.h"
#include "onnx/tensor_data.h"

namespace fusebox::onnx_import {

namespace {

// Enough for any real signal window; more is surely a corrupt or mistaken size.
constexpr int64_t kMaxWindow = int64_t(1) << 24;

struct Coefficients {
  double a0, a1, a2;
};

Coefficients coefficients(const std::string& op_type) {
  if (op_type == "HannWindow") return {0.5, 0.5, 0.0};
  if (op_type == "HammingWindow") return {25.0 / 46.0, 21.0 / 46.0, 0.0};
  return {0.42, 0.5, 0.08};  // BlackmanWindow
}

Status convert_window(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(double size_value, ctx.require_scalar(n, 0, "size"));
  int64_t size = static_cast<int64_t>(size_value);
  if (size < 0 || size > kMaxWindow) {
    return n.error("size must be in [0, " + std::to_string(kMaxWindow) + "], got " + std::to_string(size));
  }
  bool periodic = n.attr_int("periodic", 1) != 0;
  int64_t onnx_type = n.attr_int("output_datatype", 1);  // FLOAT
  std::optional<DType> dtype = dtype_from_onnx(static_cast<int32_t>(onnx_type));
  // Integer outputs would truncate values in [0, 1] to 0 and 1; nothing asks for them.
  if (!dtype || !is_float(*dtype)) {
    return n.error("output_datatype " + std::to_string(onnx_type) + " is not a float type fusebox supports");
  }
  Coefficients c = coefficients(n.op_type());
  double len = double(periodic ? size : size - 1);
  Array w(*dtype, {size});
  for (int64_t i = 0; i < size; ++i) {
    double t = len == 0 ? 0 : 2 * std::numbers::pi * double(i) / len;
    w.set_f64(i, c.a0 - c.a1 * std::cos(t) + c.a2 * std::cos(2 * t));
  }
  return ctx.set_output_constant(n, 0, std::move(w));
}

}  // namespace

void add_window_converters(ConverterTable& table) {
  for (const char* op : {"HannWindow", "HammingWindow", "BlackmanWindow"}) table[op] = convert_window;
}

}  // namespace fusebox::onnx_import
