#include "backends/transform_plan.h"

#include <algorithm>
#include <cstring>

#include "backends/resize_index.h"
#include "ir/shape_inference.h"

namespace fusebox {

namespace {


struct Tap {
  int64_t index;  // in the current axis, or kConst
  int step;       // for kConst: the pad step whose constant it reads
  double weight;
};

// One axis of the plan's output (or a phantom axis: a unit source axis a reshape removed).
struct WorkAxis {
  int cur;  // the axis of the tensor being walked, -1 when none
  std::vector<std::vector<Tap>> taps;
  int resize_pos = -1;  // its axis in the linear resize, ordering the weights
};

std::vector<int64_t> dims_of(const Graph& g, ValueId v) {
  std::vector<int64_t> out;
  for (const Dim& d : g.type(v).shape) out.push_back(d.value());
  return out;
}

int norm_axis(int64_t a, size_t rank) { return static_cast<int>(a < 0 ? a + static_cast<int64_t>(rank) : a); }

}  // namespace

std::shared_ptr<const TransformPlan> plan_transform_region(const Node& region, std::string* why) {
  auto fail = [why](std::string reason) -> std::shared_ptr<const TransformPlan> {
    if (why) *why = std::move(reason);
    return nullptr;
  };
  if (!region.body) return fail("no body");
  const Graph& body = *region.body;
  const auto& steps = body.nodes();
  const int n = static_cast<int>(steps.size());
  auto plan = std::make_shared<TransformPlan>();
  plan->src_dtype = body.type(body.inputs()[0]).dtype;
  plan->out_dtype = body.type(body.outputs()[0]).dtype;
  plan->const_value.assign(static_cast<size_t>(n), 0.0);
  plan->const_bytes.resize(static_cast<size_t>(n));

  // Reshapes (and casts) at either end are views of the contiguous source or result.
  auto view_only = [&](int k) { return steps[size_t(k)].op == Op::Reshape || steps[size_t(k)].op == Op::Cast; };
  int lo = 0, hi = n;
  while (lo < hi && view_only(lo)) ++lo;
  while (hi > lo && view_only(hi - 1)) --hi;
  ValueId src_view = lo == 0 ? body.inputs()[0] : steps[size_t(lo - 1)].outputs[0];
  ValueId core = hi == lo ? src_view : steps[size_t(hi - 1)].outputs[0];
  for (ValueId v : {body.inputs()[0], body.outputs()[0]}) {
    for (int64_t d : dims_of(body, v))
      if (d == 0) return fail("an empty axis");
  }

  std::vector<WorkAxis> work;
  plan->out_shape = dims_of(body, core);
  for (size_t d = 0; d < plan->out_shape.size(); ++d) {
    WorkAxis a{static_cast<int>(d), {}, -1};
    for (int64_t i = 0; i < plan->out_shape[d]; ++i) a.taps.push_back({{i, 0, 1.0}});
    work.push_back(std::move(a));
  }
  plan->out_axes = work.size();
  auto each_index_tap = [&](int axis, auto&& f) {
    for (WorkAxis& w : work) {
      if (w.cur != axis) continue;
      for (auto& list : w.taps)
        for (Tap& t : list)
          if (t.index != kConst) f(t);
    }
  };

  for (int k = hi - 1; k >= lo; --k) {
    const Node& s = steps[size_t(k)];
    std::vector<int64_t> in = dims_of(body, s.inputs[0]), out = dims_of(body, s.outputs[0]);
    switch (s.op) {
      case Op::Cast: break;
      case Op::Reshape: {
        std::vector<int> in_axes;  // the non-unit input axes, in order
        std::vector<int64_t> in_big, out_big;
        for (size_t a = 0; a < in.size(); ++a)
          if (in[a] != 1) in_axes.push_back(int(a)), in_big.push_back(in[a]);
        for (int64_t d : out)
          if (d != 1) out_big.push_back(d);
        if (in_big != out_big) return fail("a reshape inside the chain that merges or splits axes");
        std::vector<int> out_to_in(out.size(), -1);
        std::vector<bool> matched(in.size(), false);
        for (size_t a = 0, j = 0; a < out.size(); ++a) {
          if (out[a] == 1) continue;
          out_to_in[a] = in_axes[j++];
          matched[size_t(out_to_in[a])] = true;
        }
        for (WorkAxis& w : work)
          if (w.cur >= 0) w.cur = out_to_in[size_t(w.cur)];
        for (size_t a = 0; a < in.size(); ++a) {
          if (!matched[a]) work.push_back(WorkAxis{int(a), {{{0, 0, 1.0}}}, -1});
        }
        break;
      }
      case Op::Transpose: {
        const auto& perm = s.attr_i64s("perm");
        for (WorkAxis& w : work)
          if (w.cur >= 0) w.cur = norm_axis(perm[size_t(w.cur)], in.size());
        break;
      }
      case Op::Slice: {
        const auto& starts = s.attr_i64s("starts");
        const auto& ends = s.attr_i64s("ends");
        for (size_t i = 0; i < starts.size(); ++i) {
          int a = s.has_attr("axes") ? norm_axis(s.attr_i64s("axes")[i], in.size()) : int(i);
          int64_t st = s.has_attr("steps") ? s.attr_i64s("steps")[i] : 1;
          SliceRange r = normalize_slice(in[size_t(a)], starts[i], ends[i], st);
          each_index_tap(a, [&](Tap& t) { t.index = r.start + t.index * st; });
        }
        break;
      }
      case Op::Flip:
        for (int64_t ax : s.attr_i64s("axes")) {
          int a = norm_axis(ax, in.size());
          each_index_tap(a, [&](Tap& t) { t.index = in[size_t(a)] - 1 - t.index; });
        }
        break;
      case Op::Pad: {
        const auto& pads = s.attr_i64s("pads");
        const std::string& mode = s.attr_str("mode");
        Array fill(body.type(s.inputs[0]).dtype, {1});
        fill.set_f64(0, s.attr_f64("value"));
        plan->const_value[size_t(k)] = fill.get_f64(0);
        const auto* bytes = static_cast<const uint8_t*>(fill.raw());
        plan->const_bytes[size_t(k)].assign(bytes, bytes + fill.nbytes());
        for (size_t a = 0; a < in.size(); ++a) {
          int64_t size = in[a], before = pads[a];
          each_index_tap(int(a), [&](Tap& t) {
            int64_t j = t.index - before;
            if (j >= 0 && j < size) {
              t.index = j;
            } else if (mode == "constant") {
              t = Tap{kConst, k, t.weight};
            } else {
              t.index = mode == "edge" ? std::clamp<int64_t>(j, 0, size - 1) : reflect_index(j, size);
            }
          });
        }
        break;
      }
      case Op::Resize: {
        std::vector<float> scales = resize_scales(s, in, out);
        for (float f : scales)
          if (!(f > 0) || !std::isfinite(f)) return fail("a resize scale that is not positive and finite");
        Coordinate coord = parse_coordinate(s.attr_str("coordinate"));
        if (s.attr_str("mode") == "nearest") {
          NearestMode mode = parse_nearest_mode(s.attr_str("nearest_mode"));
          for (size_t a = 0; a < in.size(); ++a) {
            each_index_tap(int(a), [&](Tap& t) {
              t.index = nearest_index(source_coordinate(coord, t.index, scales[a], in[a], out[a]), mode, in[a]);
            });
          }
          break;
        }
        if (plan->linear) return fail("two linear resizes in one chain");
        plan->linear = true;
        plan->resize_step = k;
        plan->resize_dtype = body.type(s.inputs[0]).dtype;
        for (WorkAxis& w : work) {
          if (w.cur < 0) continue;
          size_t a = size_t(w.cur);
          AxisTaps taps = linear_taps(coord, scales[a], in[a], out[a], 1);
          w.resize_pos = w.cur;
          for (auto& list : w.taps) {
            if (list.size() != 1 || list[0].index == kConst) continue;
            auto x = static_cast<size_t>(list[0].index);
            std::vector<Tap> split;
            for (int j = 0; j < taps.count[x]; ++j) split.push_back({taps.offset[2 * x + size_t(j)], 0, taps.weight[2 * x + size_t(j)]});
            list = std::move(split);
          }
        }
        break;
      }
      default:
        return fail(std::string(s.info().keyword) + " is not a transform step");
    }
  }

  std::vector<int64_t> strides = contiguous_strides(dims_of(body, src_view));
  for (const WorkAxis& w : work) {
    TransformPlan::Axis a;
    a.resize_pos = w.resize_pos;
    int64_t stride = w.cur >= 0 ? strides[size_t(w.cur)] : 0;
    a.contiguous = true;
    for (size_t i = 0; i < w.taps.size(); ++i) {
      const auto& list = w.taps[i];
      a.count.push_back(static_cast<uint8_t>(list.size()));
      for (size_t j = 0; j < 2; ++j) {
        const Tap t = j < list.size() ? list[j] : Tap{0, 0, 0.0};
        a.off.push_back(t.index == kConst ? kConst : t.index * stride);
        a.step.push_back(t.step);
        a.weight.push_back(t.weight);
      }
      a.contiguous = a.contiguous && list.size() == 1 && list[0].index != kConst &&
                     a.off[2 * i] == a.off[0] + static_cast<int64_t>(i);
    }
    plan->axes.push_back(std::move(a));
  }
  for (size_t d = 0; d < plan->axes.size(); ++d)
    if (plan->axes[d].resize_pos >= 0) plan->weight_order.push_back(int(d));
  std::sort(plan->weight_order.begin(), plan->weight_order.end(),
            [&](int a, int b) { return plan->axes[size_t(a)].resize_pos < plan->axes[size_t(b)].resize_pos; });
  return plan;
}

}  // namespace fusebox
