#include "demo_programs.h"

#include <cmath>

#include "cli_util.h"
#include "ir/builder.h"

namespace fusebox::cli {

namespace {

constexpr uint64_t kSeed = 2024;

// A GraphBuilder that also draws each input's value, so a program and its inputs are written
// together and cannot drift apart.
class ProgramWriter {
 public:
  explicit ProgramWriter(std::string name) : b(name), name_(std::move(name)) {}

  // An input whose graph shape may use symbols; `dims` are the sizes the demo runs with.
  ValueId input(const std::string& name, DType dtype, Shape shape, std::vector<int64_t> dims, double lo,
                double hi) {
    inputs_.emplace(name, random_array(dtype, std::move(dims), derive_seed(kSeed, name_ + "/" + name), lo, hi));
    return b.input(name, dtype, std::move(shape));
  }
  // A static f32 weight, uniform in [-scale, scale) (scale 1/sqrt(fan-in) keeps activations O(1)).
  ValueId weight(const std::string& name, std::vector<int64_t> dims, double scale) {
    return weight(name, std::move(dims), -scale, scale);
  }
  // A static f32 weight uniform in [lo, hi).
  ValueId weight(const std::string& name, std::vector<int64_t> dims, double lo, double hi) {
    weights_.push_back(name);
    return input(name, DType::F32, make_shape(dims), dims, lo, hi);
  }

  Expected<DemoProgram> finish(ValueId result, std::string description) {
    b.name(result, "y");
    b.output(result);
    FUSEBOX_ASSIGN_OR_RETURN(Graph g, b.build());
    return DemoProgram{name_, std::move(description), std::move(g), std::move(inputs_), std::move(weights_)};
  }

  GraphBuilder b;

 private:
  std::string name_;
  NamedArrays inputs_;
  std::vector<std::string> weights_;
};

Attrs ints(const char* name, std::vector<int64_t> v) { return {{name, std::move(v)}}; }

Expected<DemoProgram> transformer_block(DemoScale scale) {
  const bool full = scale == DemoScale::Full;
  const int64_t batch = 2, tokens = full ? 128 : 6, d = full ? 256 : 16, heads = 4;
  const int64_t hd = d / heads, ff = 4 * d;
  const Dim B = Dim::symbol("B"), T = Dim::symbol("T");
  ProgramWriter w("transformer_block");
  GraphBuilder& b = w.b;
  ValueId x = w.input("x", DType::F32, {B, T, d}, {batch, tokens, d}, -1, 1);
  const double s_in = 1 / std::sqrt(double(d)), s_ff = 1 / std::sqrt(double(ff));
  ValueId ln1_scale = w.weight("ln1_scale", {d}, 0.8, 1.2), ln1_bias = w.weight("ln1_bias", {d}, 0.1);
  ValueId wq = w.weight("wq", {d, d}, s_in), wk = w.weight("wk", {d, d}, s_in), wv = w.weight("wv", {d, d}, s_in);
  ValueId wo = w.weight("wo", {d, d}, s_in), bo = w.weight("bo", {d}, 0.1);
  ValueId ln2_scale = w.weight("ln2_scale", {d}, 0.8, 1.2), ln2_bias = w.weight("ln2_bias", {d}, 0.1);
  ValueId w1 = w.weight("w1", {d, ff}, s_in), b1 = w.weight("b1", {ff}, 0.1);
  ValueId w2 = w.weight("w2", {ff, d}, s_ff), b2 = w.weight("b2", {d}, 0.1);

  // Attention: [B,T,D] -> heads [B,H,T,hd]; softmax(q kᵀ / sqrt(hd)) v; heads merged back.
  ValueId h = b.op(Op::LayerNorm, {x, ln1_scale, ln1_bias});
  auto heads_of = [&](ValueId m, std::vector<int64_t> perm) {
    return b.transpose(b.reshape(b.matmul(h, m), {B, T, heads, hd}), std::move(perm));
  };
  ValueId q = heads_of(wq, {0, 2, 1, 3});
  ValueId kt = heads_of(wk, {0, 2, 3, 1});  // [B,H,hd,T]
  ValueId v = heads_of(wv, {0, 2, 1, 3});
  ValueId scores = b.mul(b.matmul(q, kt), b.scalar(DType::F32, 1 / std::sqrt(double(hd))));
  ValueId ctx = b.matmul(b.softmax(scores, -1), v);
  ValueId merged = b.reshape(b.transpose(ctx, {0, 2, 1, 3}), {B, T, d});
  ValueId r1 = b.add(x, b.add(b.matmul(merged, wo), bo));

  // MLP: [B,T,D] -> 4D -> GELU -> D, residual.
  ValueId h2 = b.op(Op::LayerNorm, {r1, ln2_scale, ln2_bias});
  ValueId up = b.gelu(b.add(b.matmul(h2, w1), b1), /*tanh_approx=*/true);
  ValueId y = b.add(r1, b.add(b.matmul(up, w2), b2));
  return w.finish(y, "pre-norm attention (" + std::to_string(heads) + " heads) + GELU MLP, x f32[" +
                         std::to_string(batch) + "," + std::to_string(tokens) + "," + std::to_string(d) + "]");
}

Expected<DemoProgram> cnn_block(DemoScale scale) {
  const bool full = scale == DemoScale::Full;
  const int64_t n = 2, c = full ? 32 : 8, hw = full ? 32 : 6, se = c / 4;
  const Dim N = Dim::symbol("N");
  ProgramWriter w("cnn_block");
  GraphBuilder& b = w.b;
  ValueId x = w.input("x", DType::F32, {N, c, hw, hw}, {n, c, hw, hw}, -1, 1);
  ValueId conv_w = w.weight("conv_w", {c, c, 3, 3}, 1 / std::sqrt(double(c * 9)));
  ValueId conv_b = w.weight("conv_b", {c}, 0.1);
  ValueId bn_scale = w.weight("bn_scale", {c}, 0.8, 1.2), bn_bias = w.weight("bn_bias", {c}, 0.1);
  ValueId bn_mean = w.weight("bn_mean", {c}, 0.1), bn_var = w.weight("bn_var", {c}, 0.5, 1.5);
  ValueId se1_w = w.weight("se1_w", {se, c, 1, 1}, 1 / std::sqrt(double(c))), se1_b = w.weight("se1_b", {se}, 0.1);
  ValueId se2_w = w.weight("se2_w", {c, se, 1, 1}, 1 / std::sqrt(double(se))), se2_b = w.weight("se2_b", {c}, 0.1);

  ValueId conv = b.op(Op::Conv2d, {x, conv_w, conv_b}, ints("pad", {1, 1, 1, 1}));
  ValueId act = b.op(Op::HardSwish, {b.op(Op::BatchNorm, {conv, bn_scale, bn_bias, bn_mean, bn_var})});
  // Squeeze-excite: a per-channel gate computed from the channel means.
  ValueId pooled = b.op(Op::GlobalAvgPool, {act});
  ValueId squeezed = b.relu(b.op(Op::Conv2d, {pooled, se1_w, se1_b}));
  ValueId gate = b.op(Op::HardSigmoid, {b.op(Op::Conv2d, {squeezed, se2_w, se2_b})});
  ValueId y = b.add(x, b.mul(act, gate));
  return w.finish(y, "conv3x3 + batch_norm + hardswish + squeeze-excite + residual, x f32[" + std::to_string(n) +
                         "," + std::to_string(c) + "," + std::to_string(hw) + "," + std::to_string(hw) + "]");
}

Expected<DemoProgram> image_pipeline(DemoScale scale) {
  const bool full = scale == DemoScale::Full;
  const int64_t height = full ? 480 : 48, width = full ? 640 : 64, out = full ? 112 : 8;
  ProgramWriter w("image_pipeline");
  GraphBuilder& b = w.b;
  ValueId frame = w.input("frame", DType::U8, make_shape({height, width, 3}), {height, width, 3}, 0, 255);
  // ImageNet statistics in pixel units, broadcast over [H,W,3].
  Array mean(DType::F32, {1, 1, 3}), inv_std(DType::F32, {1, 1, 3});
  const double m[3] = {0.485, 0.456, 0.406}, s[3] = {0.229, 0.224, 0.225};
  for (int i = 0; i < 3; ++i) {
    mean.set_f64(i, 255 * m[i]);
    inv_std.set_f64(i, 1 / (255 * s[i]));
  }
  ValueId mean_v = b.constant(mean), inv_std_v = b.constant(inv_std);
  // Crops as fractions of the frame (top, left, height, width): different sizes and aspects.
  const double crops[][4] = {{0, 0, 0.5, 0.5}, {0.2, 0.3, 0.6, 0.45}, {0.5, 0.5, 0.5, 0.5}, {0, 0.125, 1, 0.75}};
  std::vector<ValueId> batch;
  for (const auto& cr : crops) {
    int64_t y0 = int64_t(cr[0] * height), x0 = int64_t(cr[1] * width);
    int64_t y1 = y0 + int64_t(cr[2] * height), x1 = x0 + int64_t(cr[3] * width);
    ValueId crop = b.op(Op::Slice, {frame}, {{"starts", std::vector<int64_t>{y0, x0}},
                                             {"ends", std::vector<int64_t>{y1, x1}},
                                             {"axes", std::vector<int64_t>{0, 1}}});
    ValueId resized = b.op(Op::Resize, {b.cast(crop, DType::F32)},
                           {{"sizes", make_shape({out, out, 3})}, {"mode", std::string("linear")}});
    ValueId normalised = b.mul(b.sub(resized, mean_v), inv_std_v);
    batch.push_back(b.reshape(b.transpose(normalised, {2, 0, 1}), make_shape({1, 3, out, out})));
  }
  ValueId y = b.op(Op::Concat, batch, {{"axis", int64_t(0)}});
  return w.finish(y, "u8 frame [" + std::to_string(height) + "," + std::to_string(width) + ",3] -> " +
                         std::to_string(std::size(crops)) + " crops -> bilinear " + std::to_string(out) + "x" +
                         std::to_string(out) + " -> normalise -> CHW batch");
}

}  // namespace

Expected<std::vector<DemoProgram>> demo_programs(DemoScale scale) {
  std::vector<DemoProgram> programs;
  for (auto make : {transformer_block, cnn_block, image_pipeline}) {
    Expected<DemoProgram> p = make(scale);
    if (!p) return p.status().with_context("demo program");
    programs.push_back(std::move(*p));
  }
  return programs;
}

}  // namespace fusebox::cli
