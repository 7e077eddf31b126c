#include "backends/cpu/row_kernels.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "backends/cpu/reference/reference.h"
#include "ir/check.h"
#include "ir/fused_norm_ops.h"

namespace fusebox::cpu {

namespace row_generic { const RowLoops& row_loops(); }
namespace row_avx2 { const RowLoops& row_loops(); }
namespace row_avx512 { const RowLoops& row_loops(); }

std::string_view row_isa_name(RowIsa isa) {
  switch (isa) {
    case RowIsa::Generic: return "generic";
    case RowIsa::Avx2: return "avx2";
    case RowIsa::Avx512: return "avx512";
  }
  return "?";
}

bool row_isa_available(RowIsa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case RowIsa::Generic: return true;
    case RowIsa::Avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case RowIsa::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("fma");
  }
  return false;
#else
  return isa == RowIsa::Generic;
#endif
}

RowIsa best_row_isa() {
  static const RowIsa best = [] {
    RowIsa isa = row_isa_available(RowIsa::Avx512) ? RowIsa::Avx512
                 : row_isa_available(RowIsa::Avx2) ? RowIsa::Avx2
                                                   : RowIsa::Generic;
    // FUSEBOX_ROW_ISA=generic|avx2 runs a narrower ISA's loops (to measure them on a wider host);
    // never a wider one than the processor has.
    if (const char* e = std::getenv("FUSEBOX_ROW_ISA")) {
      for (RowIsa narrower : {RowIsa::Generic, RowIsa::Avx2}) {
        if (row_isa_name(narrower) == e && int(narrower) < int(isa)) isa = narrower;
      }
    }
    return isa;
  }();
  return best;
}

const RowLoops& row_loops(RowIsa isa) {
  FUSEBOX_CHECK(row_isa_available(isa)) << "row loops for " << row_isa_name(isa) << " on a processor without it";
  switch (isa) {
    case RowIsa::Generic: return row_generic::row_loops();
    case RowIsa::Avx2: return row_avx2::row_loops();
    case RowIsa::Avx512: return row_avx512::row_loops();
  }
  return row_generic::row_loops();
}

namespace {

// Rows below this many elements in all run on one thread (the pool's start costs more).
constexpr int64_t kParallelElements = int64_t(1) << 15;

}  // namespace

void softmax_rows(RowIsa isa, const float* x, float* y, int64_t rows, int64_t n, bool log) {
  const RowLoops& loops = row_loops(isa);
#pragma omp parallel for schedule(static) if (rows > 1 && rows * n >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) loops.softmax_row(x + r * n, y + r * n, n, log);
}

void norm_rows(RowIsa isa, const NormRows& a) {
  const RowLoops& loops = row_loops(isa);
#pragma omp parallel for schedule(static) if (a.rows > 1 && a.rows * a.n >= kParallelElements)
  for (int64_t r = 0; r < a.rows; ++r) loops.norm_row(a, r);
}

namespace {

// An operand of n values along the last axis only ([n], [1,..,1,n]).
bool is_row_vector(const Array& a, int64_t n) { return a.numel() == n && (a.rank() == 0 || a.shape().back() == n); }

class RowKernel final : public Kernel {
 public:
  RowKernel(const Node& n, RowIsa isa) : node_(n), isa_(isa) {}

  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    std::vector<Array> ins = arrays_over(in), outs = arrays_over(out);
    const Array& x = ins[0];
    const int64_t n = x.rank() == 0 ? 1 : x.shape().back();
    if (x.numel() == 0 || n == 0) return run_reference(node_, ins, outs);
    const int64_t rows = x.numel() / n;
    if (node_.op == Op::Softmax || node_.op == Op::LogSoftmax) {
      softmax_rows(isa_, x.data<float>(), outs[0].data<float>(), rows, n, node_.op == Op::LogSoftmax);
      return Status::ok();
    }
    NormRows a;
    a.x = x.data<float>();
    a.y = outs[0].data<float>();
    a.rows = rows;
    a.n = n;
    a.eps = node_.attr_f64("eps");
    size_t params = 1;  // where the scale (then the shift) sits
    // A parameter of one value (a scale folded from `* 2`, a scalar bias) is spread over a row,
    // so the row loops take it: the reference kernel would cost ten times the rows.
    std::vector<float> spread[3];
    auto row_of = [&](const Array& v, std::vector<float>& buf) -> const float* {
      if (is_row_vector(v, n)) return v.data<float>();
      if (v.numel() != 1) return nullptr;
      buf.assign(static_cast<size_t>(n), v.data<float>()[0]);
      return buf.data();
    };
    if (is_fused_norm(node_.op)) {
      const NormRoles roles = fused_norm_roles(node_);
      a.rms = node_.op == Op::FusedResidualRmsNorm;
      a.r = ins[static_cast<size_t>(roles.residual)].data<float>();
      if (outs.size() == 2) a.sum = outs[1].data<float>();
      if (roles.bias >= 0) {
        const Array& b = ins[static_cast<size_t>(roles.bias)];
        if (b.numel() == x.numel() && b.shape() == x.shape()) {
          a.bias_row_stride = n;
          a.bias = b.data<float>();
        } else {
          a.bias = row_of(b, spread[2]);
          if (!a.bias) return run_reference(node_, ins, outs);  // a bias along another axis
        }
      }
      params = static_cast<size_t>(roles.scale >= 0 ? roles.scale : static_cast<int>(ins.size()));
    } else {
      a.rms = node_.op == Op::RmsNorm;
    }
    for (size_t i = params; i < ins.size(); ++i) {
      const float* v = row_of(ins[i], spread[i == params ? 0 : 1]);
      if (!v) return run_reference(node_, ins, outs);  // a scale along another axis
      (i == params ? a.scale : a.shift) = v;
    }
    norm_rows(isa_, a);
    return Status::ok();
  }
  std::string_view kind() const override { return "rows"; }

 private:
  Node node_;  // a copy: kernels outlive the graph they were compiled from
  RowIsa isa_;
};

bool takes(const Graph& g, const Node& n) {
  switch (n.op) {
    case Op::Softmax: case Op::LogSoftmax: case Op::LayerNorm: case Op::RmsNorm:
    case Op::FusedResidualLayerNorm: case Op::FusedResidualRmsNorm: break;
    default: return false;
  }
  const TensorType& x = g.type(n.inputs[0]);
  if (x.dtype != DType::F32 || x.rank() == 0) return false;
  for (ValueId v : n.inputs)
    if (g.type(v).dtype != DType::F32) return false;
  std::optional<int> axis = normalize_axis(n.attr_i64("axis"), x.rank());
  return axis && *axis == x.rank() - 1;
}

}  // namespace

std::shared_ptr<const Kernel> make_row_kernel(const Graph& g, const Node& n, RowIsa isa) {
  if (!takes(g, n)) return nullptr;
  return std::make_shared<RowKernel>(n, isa);
}

}  // namespace fusebox::cpu
