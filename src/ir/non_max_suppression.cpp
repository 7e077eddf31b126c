#include "ir/non_max_suppression.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace fusebox {

namespace {

// Whether box b suppresses box a: their IoU is above the threshold. ONNX's reference, in f32 and
// in its order of operations; no overlap, an empty intersection or a box of no area never
// suppresses.
bool suppresses(const float* a, const float* b, bool center, float iou_threshold) {
  struct Span {
    float lo, hi;
  };
  auto span = [&](const float* box, int axis) {  // axis 0: x, 1: y
    if (center) {
      float c = box[axis], half = box[axis + 2] / 2.0f;
      return Span{c - half, c + half};
    }
    float p = box[1 - axis], q = box[3 - axis];
    return q <= p ? Span{q, p} : Span{p, q};
  };
  Span ax = span(a, 0), bx = span(b, 0), ay = span(a, 1), by = span(b, 1);
  float ix_lo = std::max(ax.lo, bx.lo), ix_hi = std::min(ax.hi, bx.hi);
  if (ix_hi <= ix_lo) return false;
  float iy_lo = std::max(ay.lo, by.lo), iy_hi = std::min(ay.hi, by.hi);
  if (iy_hi <= iy_lo) return false;
  float inter = (ix_hi - ix_lo) * (iy_hi - iy_lo);
  if (inter <= 0) return false;
  float area_a = (ax.hi - ax.lo) * (ay.hi - ay.lo), area_b = (bx.hi - bx.lo) * (by.hi - by.lo);
  float uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > iou_threshold;
}

}  // namespace

Expected<NmsParams> nms_params(const Array* max_out, const Array* iou, const Array* score, bool center) {
  NmsParams p;
  p.center = center;
  const Array* given[] = {max_out, iou, score};
  const char* names[] = {"max_output_boxes_per_class", "iou_threshold", "score_threshold"};
  for (int k = 0; k < 3; ++k) {
    const Array* a = given[k];
    if (!a || a->numel() == 0) continue;
    if (a->numel() > 1)
      return Status::invalid(std::string(names[k]) + " must hold one value, got " + a->type_string());
    if (k == 0 && !is_integer(a->dtype()))
      return Status::invalid(std::string(names[k]) + " must be an integer, got " + a->type_string());
    if (k == 0) p.max_per_class = std::max<int64_t>(a->get_i64(0), 0);
    if (k == 1) p.iou_threshold = float(a->get_f64(0));
    if (k == 2) p.score_threshold = float(a->get_f64(0));
  }
  return p;
}

std::vector<std::vector<int64_t>> nms_keep(const float* boxes, const float* scores, int64_t batches,
                                           int64_t classes, int64_t count, const NmsParams& p) {
  std::vector<std::vector<int64_t>> kept(size_t(batches * classes));
  std::vector<int64_t> cand;
  for (int64_t b = 0; b < batches; ++b) {
    const float* bb = boxes + b * count * 4;
    for (int64_t c = 0; c < classes; ++c) {
      const float* sc = scores + (b * classes + c) * count;
      cand.clear();
      for (int64_t i = 0; i < count; ++i) {
        if (!std::isnan(sc[i]) && (!p.score_threshold || sc[i] > *p.score_threshold)) cand.push_back(i);
      }
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t i, int64_t j) { return sc[i] > sc[j]; });
      std::vector<int64_t>& keep = kept[size_t(b * classes + c)];
      for (int64_t i : cand) {
        if (int64_t(keep.size()) >= p.max_per_class) break;
        if (std::any_of(keep.begin(), keep.end(), [&](int64_t k) {
              return suppresses(bb + i * 4, bb + k * 4, p.center, p.iou_threshold);
            }))
          continue;
        keep.push_back(i);
      }
    }
  }
  return kept;
}

}  // namespace fusebox
