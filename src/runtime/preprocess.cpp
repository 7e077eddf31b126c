// The pre-processing API (include/fusebox/preprocess.h): argument checks, the graph it builds
// from plain ops with GraphBuilder, and the compiled Preprocessor that runs it through a Session.
#include "fusebox/preprocess.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace fusebox {

namespace {

std::string rect_text(const CropRect& r) {
  return "(x=" + std::to_string(r.x) + ", y=" + std::to_string(r.y) + ", w=" + std::to_string(r.w) +
         ", h=" + std::to_string(r.h) + (r.image ? ", image=" + std::to_string(r.image) : "") + ")";
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "," : "") + std::to_string(s[i]);
  return t + "]";
}

// Every mistake a caller can make, as one message; ok when the request is usable.
Status check_request(const ImageType& image, const std::vector<CropRect>& crops, const PreprocessSpec& spec) {
  const auto& s = image.shape;
  if (image.dtype != DType::U8) {
    return Status::invalid("preprocess: the image must be u8, got " + std::string(dtype_name(image.dtype)));
  }
  if (s.size() != 3 && s.size() != 4) {
    return Status::invalid("preprocess: the image must be u8[H,W,C] or u8[B,H,W,C], got rank " +
                           std::to_string(s.size()) + " " + shape_text(s));
  }
  for (int64_t d : s) {
    if (d <= 0) return Status::invalid("preprocess: the image shape " + shape_text(s) + " has an empty dimension");
  }
  const int64_t batch = s.size() == 4 ? s[0] : 1;
  const int64_t H = s[s.size() - 3], W = s[s.size() - 2], C = s.back();
  if (spec.height <= 0 || spec.width <= 0) {
    return Status::invalid("preprocess: the output size must be positive, got " + std::to_string(spec.height) + "x" +
                           std::to_string(spec.width));
  }
  if (crops.empty()) return Status::invalid("preprocess: no crop rectangles given");
  for (size_t i = 0; i < crops.size(); ++i) {
    const CropRect& r = crops[i];
    std::string where = "preprocess: crop " + std::to_string(i) + " " + rect_text(r);
    if (r.w <= 0 || r.h <= 0) return Status::invalid(where + " is empty (width and height must be >= 1)");
    if (r.image < 0 || r.image >= batch) {
      return Status::invalid(where + " names image " + std::to_string(r.image) + " of a batch of " +
                             std::to_string(batch));
    }
    if (r.x < 0 || r.y < 0 || r.x > W - r.w || r.y > H - r.h) {
      return Status::invalid(where + " lies outside the " + std::to_string(W) + "x" + std::to_string(H) +
                             " image (W x H)");
    }
  }
  auto check_channels = [&](const std::vector<double>& v, const char* what) -> Status {
    if (!v.empty() && v.size() != 1 && int64_t(v.size()) != C) {
      return Status::invalid(std::string("preprocess: ") + what + " has " + std::to_string(v.size()) +
                             " values for an image of " + std::to_string(C) + " channels (give 1 or " +
                             std::to_string(C) + ")");
    }
    for (double x : v) {
      if (!std::isfinite(x)) return Status::invalid(std::string("preprocess: ") + what + " values must be finite");
    }
    return Status::ok();
  };
  FUSEBOX_RETURN_IF_ERROR(check_channels(spec.mean, "mean"));
  FUSEBOX_RETURN_IF_ERROR(check_channels(spec.stddev, "std"));
  for (double x : spec.stddev) {
    if (x == 0) return Status::invalid("preprocess: std must not be 0 (it divides every pixel)");
  }
  const std::string& c = spec.coordinate;
  if (c != "half_pixel" && c != "align_corners" && c != "asymmetric" && c != "pytorch_half_pixel") {
    return Status::invalid("preprocess: unknown coordinate mode '" + c +
                           "' (half_pixel, align_corners, asymmetric, pytorch_half_pixel)");
  }
  if (!std::isfinite(spec.pad_value)) return Status::invalid("preprocess: pad_value must be finite");
  return Status::ok();
}

// mean/std broadcast over the channel axis of one item ([1,C,1,1] or [1,1,1,C]).
ValueId channel_constant(GraphBuilder& b, const std::vector<double>& v, double fallback, int64_t C, bool nhwc) {
  std::vector<float> values(static_cast<size_t>(C), static_cast<float>(fallback));
  for (int64_t c = 0; c < C; ++c) {
    if (!v.empty()) values[size_t(c)] = float(v.size() == 1 ? v[0] : v[size_t(c)]);
  }
  std::vector<int64_t> shape = nhwc ? std::vector<int64_t>{1, 1, 1, C} : std::vector<int64_t>{1, C, 1, 1};
  return b.constant(Array::from_vector(DType::F32, shape, values));
}

}  // namespace

Expected<Graph> build_preprocess_graph(const ImageType& image, const std::vector<CropRect>& crops,
                                       const PreprocessSpec& spec) {
  FUSEBOX_RETURN_IF_ERROR(check_request(image, crops, spec));
  const auto& s = image.shape;
  const bool batched = s.size() == 4;
  const int64_t C = s.back();
  const int64_t OH = spec.height, OW = spec.width;
  const int64_t hw = batched ? 1 : 0;  // the axis of H in the image

  GraphBuilder b("preprocess");
  Shape in_shape;
  for (int64_t d : s) in_shape.push_back(Dim(d));
  ValueId img = b.input("image", DType::U8, in_shape);
  ValueId mean = channel_constant(b, spec.mean, 0.0, C, spec.nhwc);
  ValueId stddev = channel_constant(b, spec.stddev, 1.0, C, spec.nhwc);

  std::vector<ValueId> items;
  for (const CropRect& r : crops) {
    // The crop, as [h,w,C] or [1,h,w,C].
    std::vector<int64_t> starts{r.y, r.x}, ends{r.y + r.h, r.x + r.w}, axes{hw, hw + 1};
    if (batched) {
      starts.insert(starts.begin(), r.image);
      ends.insert(ends.begin(), r.image + 1);
      axes.insert(axes.begin(), 0);
    }
    ValueId v = b.op(Op::Slice, {img}, {{"starts", starts}, {"ends", ends}, {"axes", axes}});
    v = b.cast(v, DType::F32);

    // The resized size: the whole output, or the aspect-preserving fit of a letterbox.
    int64_t rh = OH, rw = OW;
    if (spec.letterbox) {
      double scale = std::min(double(OH) / double(r.h), double(OW) / double(r.w));
      rh = std::clamp<int64_t>(int64_t(std::llround(double(r.h) * scale)), 1, OH);
      rw = std::clamp<int64_t>(int64_t(std::llround(double(r.w) * scale)), 1, OW);
    }
    if (rh != r.h || rw != r.w) {
      Shape sizes{Dim(rh), Dim(rw), Dim(C)};
      if (batched) sizes.insert(sizes.begin(), Dim(1));
      v = b.op(Op::Resize, {v},
               {{"sizes", sizes},
                {"mode", std::string(spec.interp == Interpolation::Nearest ? "nearest" : "linear")},
                {"coordinate", spec.coordinate}});
    }
    if (rh != OH || rw != OW) {
      int64_t top = (OH - rh) / 2, left = (OW - rw) / 2;
      std::vector<int64_t> pads = batched ? std::vector<int64_t>{0, top, left, 0, 0, OH - rh - top, OW - rw - left, 0}
                                          : std::vector<int64_t>{top, left, 0, OH - rh - top, OW - rw - left, 0};
      v = b.op(Op::Pad, {v}, {{"pads", pads}, {"mode", std::string("constant")}, {"value", spec.pad_value}});
    }
    const int64_t c_axis = batched ? 3 : 2;
    if (spec.bgr && C > 1) v = b.op(Op::Flip, {v}, {{"axes", std::vector<int64_t>{c_axis}}});
    if (!spec.nhwc) {
      v = b.transpose(v, batched ? std::vector<int64_t>{0, 3, 1, 2} : std::vector<int64_t>{2, 0, 1});
    }
    if (!batched) {
      v = b.reshape(v, spec.nhwc ? Shape{Dim(1), Dim(OH), Dim(OW), Dim(C)} : Shape{Dim(1), Dim(C), Dim(OH), Dim(OW)});
    }
    v = b.div(b.sub(v, mean), stddev);
    items.push_back(v);
  }
  ValueId out = items.size() == 1 ? items[0] : b.op(Op::Concat, items, {{"axis", int64_t(0)}});
  b.name(out, "batch");
  b.output(out);
  return b.build();
}

Expected<Preprocessor> Preprocessor::create(const ImageType& image, const std::vector<CropRect>& crops,
                                            const PreprocessSpec& spec, const CompileOptions& options,
                                            const Session& session) {
  FUSEBOX_ASSIGN_OR_RETURN(Graph g, build_preprocess_graph(image, crops, spec));
  Expected<Executable> exe = session.compile(g, options);
  if (!exe) return exe.status().with_context("preprocess");
  return Preprocessor(std::move(g), std::move(*exe), image);
}

Expected<Array> Preprocessor::run(const Array& image) const {
  if (image.dtype() != type_.dtype || image.shape() != type_.shape) {
    return Status::invalid("preprocess: the image is " + std::string(dtype_name(image.dtype())) +
                           shape_text(image.shape()) + " but this preprocessor was built for " +
                           std::string(dtype_name(type_.dtype)) + shape_text(type_.shape));
  }
  std::vector<Array> in{image};
  FUSEBOX_ASSIGN_OR_RETURN(std::vector<Array> outs, exe_.run(std::span<const Array>(in)));
  return std::move(outs[0]);
}

Expected<Array> preprocess(const Array& image, const std::vector<CropRect>& crops, const PreprocessSpec& spec,
                           const CompileOptions& options) {
  FUSEBOX_ASSIGN_OR_RETURN(Preprocessor pre,
                           Preprocessor::create(ImageType{image.shape(), image.dtype()}, crops, spec, options));
  return pre.run(image);
}

}  // namespace fusebox
