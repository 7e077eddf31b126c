// The prologue kernel (prologue_kernel.h).
//
//   the cut axis: the last axis of the plan's rows (row tables, preprocess_rows.h: for a CHW
//   result, rows are (channel, y)), else the first of size > 1; windows are one index of each
//   axis before it and a run of its indices, about kWindowElements each:
//     per window, in parallel:  transform rows of the window -> a window-sized buffer (cache)
//                               (by the row tables when the plan factors into rows)
//                               region program over (buffer, operand blocks of the window)
//                               -> the window of every result
//
// An operand is viewed at the window's block: its index along each axis before the cut where it
// varies, the window's run along the cut where it varies, whole along the rest (it broadcasts
// where it has size 1). When the plan's windows do not tile the rows, or the transform has no
// plan, the transform runs whole into one buffer and the program once over it.
#include "backends/cpu/prologue_kernel.h"

#include <algorithm>
#include <cstdint>
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

// The product of d[from, to).
int64_t product_of(const std::vector<int64_t>& d, size_t from, size_t to = SIZE_MAX) {
  int64_t p = 1;
  for (size_t i = from; i < std::min(to, d.size()); ++i) p *= d[i];
  return p;
}

// The block of `a` (its axes right-aligned against the R axes of the result) for the window at
// `index` along the axes before `cut` and [a0, a1) along `cut`; where `a` has size 1 it
// broadcasts. Fixing leading axes and a run of the next keeps the block contiguous.
Array block_of(const Array& a, size_t R, size_t cut, const std::vector<int64_t>& index, int64_t a0,
               int64_t a1) {
  std::vector<int64_t> shape = a.shape();
  const size_t lead = R - shape.size();
  int64_t offset = 0, stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    const size_t axis = d + lead;
    const int64_t extent = shape[d];
    if (extent != 1 && axis < cut) offset += index[axis] * stride, shape[d] = 1;
    if (extent != 1 && axis == cut) offset += a0 * stride, shape[d] = a1 - a0;
    stride *= extent;
  }
  auto* base = static_cast<uint8_t*>(const_cast<void*>(a.raw()));
  return Array::view(a.dtype(), std::move(shape), base + size_t(offset) * size_t(dtype_size(a.dtype())));
}

class PrologueKernel final : public Kernel {
 public:
  PrologueKernel(PrologueParts parts, std::shared_ptr<const TransformPlan> plan,
                 std::shared_ptr<const RegionProgram> program)
      : parts_(std::move(parts)), plan_(std::move(plan)), program_(std::move(program)) {
    for (const Dim& d : parts_.read.shape) read_dims_.push_back(d.value());
    // Row tables when the read is the plan's result, or that result under leading unit axes (a
    // reshape to a batch of one).
    if (plan_ && plan_->out_shape.size() <= read_dims_.size() &&
        std::equal(plan_->out_shape.begin(), plan_->out_shape.end(),
                   read_dims_.end() - plan_->out_shape.size())) {
      row_lead_ = read_dims_.size() - plan_->out_shape.size();
      if (product_of(read_dims_, 0) == product_of(plan_->out_shape, 0)) {
        rows_ = row_tables(*plan_, nullptr, /*merge_rows=*/true);
      }
    }
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
    const size_t R = dims.size();
    size_t cut = 0;
    if (rows_) {
      cut = row_lead_ + size_t(rows_->row_axes - 1);
    } else {
      while (cut < R && dims[cut] == 1) ++cut;
    }
    if (cut + 1 >= R) return run_whole(ins, outs);  // nothing (or one axis) to cut
    const int64_t outer = product_of(dims, 0, cut);
    const int64_t inner = product_of(dims, cut + 1);
    // The row tables compute any run of rows; the plan's own windows start at its unit.
    if (!rows_ && inner % transform_window_unit(*plan_) != 0) return run_whole(ins, outs);
    const int64_t step = std::max<int64_t>(1, kWindowElements / inner);
    const int64_t blocks = (dims[cut] + step - 1) / step;
    const int64_t windows = outer * blocks;
    if (windows < 2) return run_whole(ins, outs);
    const size_t k = parts_.input;
    for (size_t j = 0; j < ins.size(); ++j) {
      if (j != k && size_t(ins[j].rank()) > R) return run_whole(ins, outs);
    }
    Status first_error = Status::ok();
    // The windows of one block of rows at every index before the cut run one after another on one
    // thread: for a channels-first result they are the channels of the same source rows, which
    // the first one brings into the cache for the others (one pass over a crop, not one per
    // channel).
#pragma omp parallel for schedule(dynamic, outer)
    for (int64_t w = 0; w < windows; ++w) {
      const int64_t o = w % outer, a0 = (w / outer) * step, a1 = std::min(dims[cut], a0 + step);
      std::vector<int64_t> index(cut, 0), wdims = dims;
      for (int64_t rest = o, a = int64_t(cut) - 1; a >= 0; --a)
        index[size_t(a)] = rest % dims[size_t(a)], rest /= dims[size_t(a)];
      for (size_t a = 0; a < cut; ++a) wdims[a] = 1;
      wdims[cut] = a1 - a0;
      Array read(parts_.read.dtype, wdims);
      // The window's rows in the row-major order of the axes up to the cut.
      const int64_t r0 = o * dims[cut] + a0, r1 = o * dims[cut] + a1;
      Status s = rows_ ? fill_rows(*plan_, *rows_, ins[k], read.raw(), r0, r1)
                       : run_transform_window(*plan_, ins[k], read.raw(), r0 * inner, r1 * inner);
      std::vector<Array> win_in(ins.size()), win_out;
      for (size_t j = 0; j < ins.size(); ++j)
        win_in[j] = j == k ? read : block_of(ins[j], R, cut, index, a0, a1);
      for (const Array& out : outs) win_out.push_back(block_of(out, R, cut, index, a0, a1));
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
  size_t row_lead_ = 0;            // unit axes of the read before the plan's first axis
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
