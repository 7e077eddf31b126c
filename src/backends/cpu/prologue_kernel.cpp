// The prologue kernel (prologue_kernel.h).
//
//   out axis `ax` (the first of size > 1), cut into windows of about kWindowElements:
//     per window, in parallel:  transform rows of the window -> a window-sized buffer (cache)
//                               (by the plan's row tables, preprocess_rows.h, when `ax` is the
//                               plan's first axis and the plan factors into rows)
//                               region program over (buffer, operand views of the window)
//                               -> the window of every result
//
// An operand that varies along `ax` is viewed at the window's rows; one that broadcasts along it
// is passed whole. When the plan's rows do not tile the windows, or the transform has no plan,
// the transform runs whole into one buffer and the program once over it.
#include "backends/cpu/prologue_kernel.h"

#include <algorithm>
#include <optional>

#include "backends/cpu/preprocess_rows.h"
#include "backends/cpu/reference/reference.h"
#include "backends/cpu/transform_kernel.h"
#include "backends/transform_plan.h"
#include "ir/region_prologue.h"

namespace fusebox::cpu {

namespace {

// Large enough that the region program generates code for a window (kJitMinElements), small
// enough that the window's buffer stays in the L2 cache.
constexpr int64_t kWindowElements = int64_t(1) << 15;

int64_t product_of(const std::vector<int64_t>& d, size_t from) {
  int64_t p = 1;
  for (size_t i = from; i < d.size(); ++i) p *= d[i];
  return p;
}

// `a` restricted to [a0, a1) along its axis `axis` (all axes before it have size 1).
Array window_of(const Array& a, size_t axis, int64_t a0, int64_t a1) {
  std::vector<int64_t> shape = a.shape();
  const int64_t inner = product_of(shape, axis + 1);
  shape[axis] = a1 - a0;
  auto* base = static_cast<uint8_t*>(const_cast<void*>(a.raw()));
  return Array::view(a.dtype(), std::move(shape), base + size_t(a0 * inner) * size_t(dtype_size(a.dtype())));
}

class PrologueKernel final : public Kernel {
 public:
  PrologueKernel(PrologueParts parts, std::shared_ptr<const TransformPlan> plan,
                 std::shared_ptr<const RegionProgram> program)
      : parts_(std::move(parts)), plan_(std::move(plan)), program_(std::move(program)) {
    for (const Dim& d : parts_.read.shape) read_dims_.push_back(d.value());
    if (plan_ && plan_->out_shape == read_dims_) rows_ = row_tables(*plan_);
  }

  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    std::vector<Array> ins = arrays_over(in), outs = arrays_over(out);
    if (plan_ && !outs.empty() && outs[0].shape() == read_dims_) return run_windows(ins, outs);
    return run_whole(ins, outs);
  }
  std::string_view kind() const override { return "region"; }

 private:
  Status run_whole(std::vector<Array>& ins, std::vector<Array>& outs) const {
    const size_t k = parts_.input;
    Array read(parts_.read.dtype, read_dims_);
    if (plan_) {
      FUSEBOX_RETURN_IF_ERROR(run_transform_plan(*plan_, ins[k], read));
    } else {
      std::vector<Array> r{read};
      FUSEBOX_RETURN_IF_ERROR(run_reference(parts_.transform, std::span<const Array>(ins).subspan(k, 1), r));
    }
    ins[k] = std::move(read);
    return program_->run(ins, outs);
  }

  Status run_windows(std::vector<Array>& ins, std::vector<Array>& outs) const {
    const std::vector<int64_t>& dims = read_dims_;
    size_t ax = 0;
    while (ax < dims.size() && dims[ax] == 1) ++ax;
    if (ax + 1 >= dims.size()) return run_whole(ins, outs);  // nothing (or one axis) to cut
    const int64_t inner = product_of(dims, ax + 1);
    if (inner % transform_window_unit(*plan_) != 0) return run_whole(ins, outs);
    const int64_t step = std::max<int64_t>(1, kWindowElements / inner);
    const int64_t windows = (dims[ax] + step - 1) / step;
    if (windows < 2) return run_whole(ins, outs);
    // Which operands vary along `ax` (viewed per window) and which broadcast over it (whole).
    const size_t k = parts_.input, R = dims.size();
    std::vector<int> axis_of(ins.size(), -1);
    for (size_t j = 0; j < ins.size(); ++j) {
      if (j == k) continue;
      const auto& s = ins[j].shape();
      if (s.size() > R) return run_whole(ins, outs);
      const size_t lead = R - s.size();
      if (ax < lead || s[ax - lead] == 1) continue;
      for (size_t a = lead; a < ax; ++a)
        if (s[a - lead] != 1) return run_whole(ins, outs);
      axis_of[j] = int(ax - lead);
    }
    Status first_error = Status::ok();
#pragma omp parallel for schedule(dynamic)
    for (int64_t w = 0; w < windows; ++w) {
      const int64_t a0 = w * step, a1 = std::min(dims[ax], a0 + step);
      std::vector<int64_t> wdims = dims;
      wdims[ax] = a1 - a0;
      Array read(parts_.read.dtype, wdims);
      Status s = rows_ && ax == 0 ? fill_rows(*plan_, *rows_, ins[k], read.raw(), a0, a1)
                                  : run_transform_window(*plan_, ins[k], read.raw(), a0 * inner, a1 * inner);
      std::vector<Array> win_in(ins.size()), win_out;
      for (size_t j = 0; j < ins.size(); ++j) {
        win_in[j] = j == k ? read : axis_of[j] < 0 ? ins[j] : window_of(ins[j], size_t(axis_of[j]), a0, a1);
      }
      for (const Array& o : outs) win_out.push_back(window_of(o, ax, a0, a1));
      if (s.is_ok()) s = program_->run(win_in, win_out);
      if (!s.is_ok()) {
#pragma omp critical(fusebox_prologue_error)
        if (first_error.is_ok()) first_error = s;
      }
    }
    return first_error;
  }

  PrologueParts parts_;
  std::shared_ptr<const TransformPlan> plan_;  // null: the transform's steps run one by one
  std::shared_ptr<const RegionProgram> program_;
  std::vector<int64_t> read_dims_;
  std::optional<RowTables> rows_;  // the plan as rows (preprocess_rows.h) when it factors so
};

}  // namespace

Expected<std::shared_ptr<const Kernel>> make_prologue_kernel(const Graph& g, const Node& region, Codegen codegen) {
  FUSEBOX_ASSIGN_OR_RETURN(PrologueParts parts, split_prologue(region));
  if (!is_static(parts.read.shape)) return Status::invalid("region prologue: the transform's result is not static");
  std::vector<TensorType> in;
  for (ValueId v : region.inputs) in.push_back(g.type(v));
  in[parts.input] = parts.read;
  FUSEBOX_ASSIGN_OR_RETURN(auto program, RegionProgram::compile(parts.region, in, codegen));
  std::shared_ptr<const TransformPlan> plan = plan_transform_region(parts.transform);
  return std::shared_ptr<const Kernel>(
      std::make_shared<PrologueKernel>(std::move(parts), std::move(plan), std::move(program)));
}

}  // namespace fusebox::cpu
