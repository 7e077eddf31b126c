// The row path of the batch kernel (batch_rows.h).
#include "backends/cpu/batch_rows.h"

#include <omp.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>

#include "backends/cpu/preprocess_rows.h"
#include "backends/transform_plan.h"
#include "ir/batch_region.h"
#include "ir/region_prologue.h"

namespace fusebox::cpu {

namespace {

// A window of rows holds about this many elements: enough for the region program to generate
// code (kJitMinElements), few enough that its two buffers stay in the L2 cache.
constexpr int64_t kWindowElements = int64_t(1) << 15;
// The lookup table of the nearest path: 256 byte values and one entry per pad step, per channel.
constexpr int64_t kLutValues = 256;
constexpr int64_t kMaxLutEntries = int64_t(1) << 16;

std::vector<int64_t> static_dims(const TensorType& t) {
  std::vector<int64_t> d;
  for (const Dim& x : t.shape) d.push_back(x.value());
  return d;
}

int64_t product(const std::vector<int64_t>& d, size_t from = 0) {
  int64_t p = 1;
  for (size_t i = from; i < d.size(); ++i) p *= d[i];
  return p;
}

// One contiguous run of the destination: columns order[k0, k1) go to dst, dst + 1, ... When those
// columns step evenly (one channel of an HWC row into a CHW plane: every C-th), `stride` is the
// step and the run is copied by strided32 instead of gathered.
struct Segment {
  int64_t dst;
  int32_t k0, k1;
  int32_t stride = 0;
};

struct Item {
  std::shared_ptr<const TransformPlan> plan;
  RowTables rows;
  int64_t base = 0;             // y element of the item's read element (0, 0)
  std::vector<int32_t> off;     // the nearest path's column offsets, in destination order
};

class BatchRowsKernel final : public Kernel {
 public:
  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override;
  std::string_view kind() const override { return "region"; }

  size_t input = 0;                                // the prologue operand
  std::shared_ptr<const RegionProgram> program;    // item 0's region (every item has this body)
  DType read_dtype = DType::F32, out_dtype = DType::F32;
  std::vector<int64_t> read;                       // the region's result shape, rows first
  int64_t rows = 0, cols = 0, row_stride = 0, window = 1;
  std::vector<int32_t> order;                      // destination order -> column
  std::vector<int64_t> dst;                        // per column: its y offset within a row
  std::vector<Segment> segments;
  std::vector<Item> items;
  bool lut = false;                                // the nearest path with a lookup table
  int64_t lut_width = 0;                           // entries per channel
  std::vector<int32_t> lut_base;                   // per column: its channel * lut_width
  std::vector<int32_t> lut_base_k;                 // the same in destination order

 private:
  Status build_lut(const std::vector<Array>& ins, std::vector<uint32_t>& table) const;
  void run_lut_rows(const Item& it, const uint32_t* table, const uint8_t* src, uint32_t* y, int64_t r0,
                    int64_t r1) const;
  // A thread's window: the operands (the frame's slot pointing at `read`) and two buffers.
  struct Window {
    std::vector<Array> ins;
    Array read, result;
  };
  Status run_window(const Item& it, const Array& frame, Window& w, uint32_t* y, int64_t r0, int64_t r1) const;
};

// Every byte value (and every pad constant) of every channel through the region's program:
// read shape [1, .., L, C] against the per-channel operands, as the region broadcasts them.
Status BatchRowsKernel::build_lut(const std::vector<Array>& ins, std::vector<uint32_t>& table) const {
  const int64_t C = read.back(), L = lut_width;
  std::vector<int64_t> shape(read.size(), 1);
  shape[shape.size() - 2] = L;
  shape.back() = C;
  Array values(read_dtype, shape);
  const TransformPlan& p = *items[0].plan;
  for (int64_t v = 0; v < L; ++v) {
    const double x = v < kLutValues ? double(v) : p.const_value[size_t(v - kLutValues)];
    for (int64_t c = 0; c < C; ++c) values.set_f64(v * C + c, x);
  }
  std::vector<Array> lut_in = ins, lut_out{Array(out_dtype, shape)};
  lut_in[input] = values;
  FUSEBOX_RETURN_IF_ERROR(program->run(lut_in, lut_out));
  table.resize(size_t(L * C));
  const auto* o = static_cast<const uint32_t*>(lut_out[0].raw());
  for (int64_t v = 0; v < L; ++v)
    for (int64_t c = 0; c < C; ++c) table[size_t(c * L + v)] = o[v * C + c];
  return Status::ok();
}

void BatchRowsKernel::run_lut_rows(const Item& it, const uint32_t* table, const uint8_t* src, uint32_t* y,
                                   int64_t r0, int64_t r1) const {
  const PreprocessLoops& loops = preprocess_loops();
  const RowTables& t = it.rows;
  for (int64_t r = r0; r < r1; ++r) {
    prefetch_row(t, src, 1, r + 1);
    uint32_t* row = y + it.base + r * row_stride;
    if (const int rs = t.row_const[size_t(r)]; rs >= 0) {
      for (int64_t j = 0; j < cols; ++j) {
        const int step = std::max(rs, t.col_const[size_t(j)]);
        row[dst[size_t(j)]] = table[size_t(lut_base[size_t(j)] + kLutValues + step)];
      }
      continue;
    }
    const int64_t before = t.row_off[2 * size_t(r)];
    for (const Segment& g : segments) {
      loops.lut_row(src + before, before, it.off.data() + g.k0, lut_base_k.data() + g.k0, table, row + g.dst,
                    g.k1 - g.k0);
    }
    for (int32_t j : t.const_cols) {
      row[dst[size_t(j)]] = table[size_t(lut_base[size_t(j)] + kLutValues + t.col_const[size_t(j)])];
    }
  }
}

Status BatchRowsKernel::run_window(const Item& it, const Array& frame, Window& w, uint32_t* y, int64_t r0,
                                   int64_t r1) const {
  std::vector<int64_t> shape = read;
  shape[0] = r1 - r0;
  w.ins[input] = Array::view(read_dtype, shape, w.read.raw());
  FUSEBOX_RETURN_IF_ERROR(fill_rows(*it.plan, it.rows, frame, w.ins[input].raw(), r0, r1));
  std::vector<Array> result{Array::view(out_dtype, shape, w.result.raw())};
  FUSEBOX_RETURN_IF_ERROR(program->run(w.ins, result));
  const PreprocessLoops& loops = preprocess_loops();
  const auto* v = static_cast<const uint32_t*>(w.result.raw());
  for (int64_t r = r0; r < r1; ++r) {
    uint32_t* row = y + it.base + r * row_stride;
    for (const Segment& g : segments) {
      if (g.stride > 0)
        loops.strided32(v + (r - r0) * cols + order[size_t(g.k0)], g.stride, row + g.dst, g.k1 - g.k0);
      else
        loops.gather32(v + (r - r0) * cols, order.data() + g.k0, row + g.dst, g.k1 - g.k0);
    }
  }
  return Status::ok();
}

Status BatchRowsKernel::run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const {
  std::vector<Array> ins = arrays_over(in), outs = arrays_over(out);
  if (outs.size() != 1) return Status::internal("batch kernel: one result expected");
  std::vector<uint32_t> table;
  if (lut) FUSEBOX_RETURN_IF_ERROR(build_lut(ins, table));
  auto* y = static_cast<uint32_t*>(outs[0].raw());
  const auto* src = static_cast<const uint8_t*>(ins[input].raw());
  const int64_t per_item = (rows + window - 1) / window, tasks = int64_t(items.size()) * per_item;
  Status first_error = Status::ok();
#pragma omp parallel
  {
    Window w;  // one per thread, reused by its windows
    if (!lut) {
      std::vector<int64_t> shape = read;
      shape[0] = std::min(rows, window);
      w = Window{ins, Array(read_dtype, shape), Array(out_dtype, shape)};
    }
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      const Item& it = items[size_t(task / per_item)];
      const int64_t r0 = (task % per_item) * window, r1 = std::min(rows, r0 + window);
      Status s = Status::ok();
      if (lut) run_lut_rows(it, table.data(), src, y, r0, r1);
      else s = run_window(it, ins[input], w, y, r0, r1);
      if (!s.is_ok()) {
#pragma omp critical(fusebox_batch_rows_error)
        if (first_error.is_ok()) first_error = s;
      }
    }
  }
  return first_error;
}

// Where each element of the read lands in the result: the per-item transform (a permutation
// with reshape views) and the batch's layout, as a step in y per read axis (and in
// `item_stride`, per unit of an item's batch offset); empty (with `why`) when the item
// transform is not such a permutation.
std::vector<int64_t> read_strides(const Graph& body, const BatchTable& table, const std::vector<int64_t>& read,
                                  int64_t& item_stride, std::string* why) {
  const bool post = body.nodes().size() == 2;
  std::vector<int64_t> item = static_dims(body.type(body.nodes().back().outputs[0]));
  std::vector<int64_t> y = item;
  y[size_t(table.axis)] *= int64_t(table.items);
  const std::vector<int64_t> ys = contiguous_strides(y);
  item_stride = ys[size_t(table.axis)];
  if (!post) return ys;
  std::shared_ptr<const TransformPlan> p = plan_transform_region(body.nodes()[1], why);
  if (!p) return {};
  if (p->linear || p->src_dtype != p->out_dtype) return *why = "the item transform interpolates or casts", std::vector<int64_t>{};
  // The core's steps in y: y's own when the plan has the item's shape, else the item's
  // contiguous layout, which its slice of y has when no axis before the batch axis is split.
  std::vector<int64_t> core_stride;
  if (p->out_shape == item) core_stride = ys;
  else if (product(y) / product(y, size_t(table.axis)) == 1) core_stride = contiguous_strides(p->out_shape);
  else return *why = "the item transform reshapes into a strided slice", std::vector<int64_t>{};
  // Each plan axis must read one read axis at its own stride: off[i] = i * step.
  std::vector<int64_t> step(p->axes.size(), 0);
  for (size_t d = 0; d < p->axes.size(); ++d) {
    const auto& ax = p->axes[d];
    if (ax.count.size() > 1) step[d] = ax.off[2];
    for (size_t i = 0; i < ax.count.size(); ++i) {
      if (ax.count[i] != 1 || ax.off[2 * i] != int64_t(i) * step[d]) {
        return *why = "the item transform is not a permutation", std::vector<int64_t>{};
      }
    }
  }
  if (product(p->out_shape) != product(read)) return *why = "the item transform is not a permutation", std::vector<int64_t>{};
  const std::vector<int64_t> rs = contiguous_strides(read);
  std::vector<int64_t> out(read.size(), 0);
  std::vector<bool> used(p->out_axes, false);
  for (size_t a = 0; a < read.size(); ++a) {
    if (read[a] == 1) continue;
    size_t d = 0;
    while (d < p->out_axes && (used[d] || p->out_shape[d] != read[a] || step[d] != rs[a])) ++d;
    if (d == p->out_axes) return *why = "the item transform is not a permutation", std::vector<int64_t>{};
    used[d] = true;
    out[a] = core_stride[d];
  }
  return out;
}

}  // namespace

Expected<std::shared_ptr<const Kernel>> make_batch_rows_kernel(const Node& batch, Codegen codegen, std::string* why) {
  std::string reason;
  if (!why) why = &reason;
  auto decline = [why](std::string r) {
    *why = std::move(r);
    return std::shared_ptr<const Kernel>();
  };
  FUSEBOX_ASSIGN_OR_RETURN(BatchTable table, batch_table(batch));
  auto k = std::make_shared<BatchRowsKernel>();
  std::vector<int64_t> read_stride;
  int64_t item_stride = 0;
  for (size_t i = 0; i < table.items; ++i) {
    FUSEBOX_ASSIGN_OR_RETURN(Graph body, batch_item_body(batch, i));
    for (ValueId v : body.inputs()) {
      if (!is_static(body.type(v).shape)) return decline("an operand's shape is not static");
    }
    const Node& region = body.nodes()[0];
    if (region.outputs.size() != 1) return decline("the region has several results");
    FUSEBOX_ASSIGN_OR_RETURN(PrologueParts parts, split_prologue(region));
    if (!is_static(parts.read.shape)) return decline("the crop's result is not static");
    if (i == 0) {
      k->input = parts.input;
      k->read = static_dims(parts.read);
      k->read_dtype = parts.read.dtype;
      k->out_dtype = body.type(body.outputs()[0]).dtype;
      if (!is_static(body.type(body.outputs()[0]).shape)) return decline("the item's result is not static");
      if (dtype_size(k->out_dtype) != 4) return decline("results of other than 4 bytes");
      if (k->read.size() < 2) return decline("the region's result has fewer than two axes");
      if (static_dims(body.type(region.outputs[0])) != k->read) return decline("the region broadcasts the crop to a larger shape");
      if (product(k->read, 1) > std::numeric_limits<int32_t>::max()) return decline("rows of more than 2^31 elements");
      std::vector<TensorType> in;
      for (ValueId v : region.inputs) in.push_back(body.type(v));
      in[parts.input] = parts.read;
      FUSEBOX_ASSIGN_OR_RETURN(k->program, RegionProgram::compile(parts.region, in, codegen));
      read_stride = read_strides(body, table, k->read, item_stride, why);
      if (read_stride.empty()) return std::shared_ptr<const Kernel>();
      // Operands other than the frame: whole in every window, so none may vary along the rows;
      // the lookup table needs them constant over every axis but the channels.
      k->lut = true;
      const size_t R = k->read.size();
      for (size_t j = 0; j < region.inputs.size(); ++j) {
        if (j == parts.input) continue;
        std::vector<int64_t> s = static_dims(body.type(region.inputs[j]));
        if (s.size() > R) return decline("an operand has more axes than the region's result");
        const size_t lead = R - s.size();
        if (lead == 0 && s[0] != 1) return decline("an operand varies along the rows");
        for (size_t a = std::max<size_t>(lead, 1); a + 1 < R; ++a) k->lut = k->lut && s[a - lead] == 1;
      }
    }
    std::string plan_why;
    std::shared_ptr<const TransformPlan> plan = plan_transform_region(parts.transform, &plan_why);
    if (!plan) return decline("the crop's transform has no plan: " + plan_why);
    if (plan->out_shape != k->read) return decline("the crop's transform ends in a reshape");
    std::optional<RowTables> rows = row_tables(*plan, why);
    if (!rows) return std::shared_ptr<const Kernel>();
    k->items.push_back(Item{plan, std::move(*rows), table.offsets[i] * item_stride, {}});
  }

  // Columns in destination order, cut into contiguous runs.
  k->rows = k->read[0];
  k->cols = product(k->read, 1);
  k->row_stride = read_stride[0];
  k->window = std::max<int64_t>(1, kWindowElements / k->cols);
  std::vector<size_t> index(k->read.size(), 0);
  for (int64_t j = 0; j < k->cols; ++j) {
    int64_t d = 0;
    for (size_t a = 1; a < k->read.size(); ++a) d += int64_t(index[a]) * read_stride[a];
    k->dst.push_back(d);
    for (size_t a = k->read.size(); a-- > 1;) {
      if (++index[a] < size_t(k->read[a])) break;
      index[a] = 0;
    }
  }
  k->order.resize(size_t(k->cols));
  std::iota(k->order.begin(), k->order.end(), 0);
  std::sort(k->order.begin(), k->order.end(), [&](int32_t a, int32_t b) { return k->dst[size_t(a)] < k->dst[size_t(b)]; });
  for (int32_t i = 0; i < int32_t(k->cols); ++i) {
    const int64_t d = k->dst[size_t(k->order[size_t(i)])];
    if (i > 0 && d == k->dst[size_t(k->order[size_t(i - 1)])]) return decline("two columns land on one element");
    if (i > 0 && d == k->dst[size_t(k->order[size_t(i - 1)])] + 1) k->segments.back().k1 = i + 1;
    else k->segments.push_back(Segment{d, i, i + 1});
  }
  for (Segment& g : k->segments) {
    const int32_t* o = k->order.data() + g.k0;
    g.stride = int32_t(even_step(g.k1 - g.k0, [o](int64_t i) { return o[i]; }));
  }

  // The lookup table: nearest from u8 only (the byte is the whole input of the region).
  const TransformPlan& p0 = *k->items[0].plan;
  const int64_t C = k->read.back();
  k->lut_width = kLutValues + int64_t(p0.const_value.size());
  k->lut = k->lut && !p0.linear && p0.src_dtype == DType::U8 &&
           (k->read_dtype == DType::F32 || k->read_dtype == DType::U8) && C * k->lut_width <= kMaxLutEntries;
  if (k->lut) {
    for (int64_t j = 0; j < k->cols; ++j) k->lut_base.push_back(int32_t((j % C) * k->lut_width));
    for (int32_t j : k->order) k->lut_base_k.push_back(k->lut_base[size_t(j)]);
    for (Item& it : k->items)
      for (int32_t j : k->order) it.off.push_back(it.rows.col_off0[size_t(j)]);
  }
  why->clear();
  return std::shared_ptr<const Kernel>(std::move(k));
}

}  // namespace fusebox::cpu
