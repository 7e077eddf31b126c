// The workloads of bench/cuda_bench.cpp as fusebox graphs. bench/peers/torch_gpu.py writes the
// same computations in PyTorch; a change here needs the same change there.
//
//   chain5            x, y f32[2^26]: relu(tanh(x * 0.5 + y) * x)
//   chain10           chain5, then exp((sigmoid(t + y) - x) * 2)
//   bias_gelu         gelu_tanh(x + b), x f32[8192,4096], b f32[4096]
//   residual_rms      rms_norm(x + r, g) on [8192,4096] f32 (eps 1e-6)
//   residual_ln       layer_norm(x + r, g, h) on [8192,4096] f32 (eps 1e-5)
//   softmax           softmax over the rows of x f32[8192,4096]
//   frame_half_chw    a u8 [1080,1920,3] frame -> 540x960 bilinear (half_pixel) -> (x - mean) / std
//                     -> CHW f32 [1,3,540,960] (the preprocess API)
//   crops64           64 crops of 448x448 -> 224x224 bilinear -> normalise -> f32 [64,3,224,224]
//   matmul_bias_gelu  gelu_tanh(a @ w + b), a, w f16[4096,4096], b f16[4096]
//   chain100_small    x, y f32[1024]: 25 times t = tanh(t * 0.9 + y) * x (100 ops)
//   attention_f16, attention_decode_f16, swiglu_f16: as written below
//   dwconv3s2_f16     silu(depthwise 3x3 stride 2 conv of f16[32,96,112,112] + bias)
//   dwconv5_f16       silu(depthwise 5x5 conv of f16[32,144,56,56] + bias)
//   conv1x1_f16       silu(1x1 conv of f16[32,144,56,56] to 24 channels + bias) (efficientnet_b0's)
//   conv1x1_7x7_f16   relu(1x1 conv of f16[32,512,7,7] to 2048 channels + bias) (resnet50's last stage)
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "fusebox/preprocess.h"
#include "ir/builder.h"
#include "ir/parser.h"

namespace fusebox::bench {

struct GpuWorkload {
  std::string name;
  std::function<Expected<Graph>()> build;
};

// Mean and std of the pre-processing workloads, in pixel units (ImageNet's).
inline const std::vector<double> kPixelMean = {123.675, 116.28, 103.53};
inline const std::vector<double> kPixelStd = {58.395, 57.12, 57.375};

// Crop rectangles of crops64 (x, y): spread over the frame, overlapping.
inline std::vector<CropRect> crops64_rects() {
  std::vector<CropRect> rects;
  for (int64_t i = 0; i < 64; ++i) rects.push_back({(i * 23) % (1920 - 448), (i * 37) % (1080 - 448), 448, 448});
  return rects;
}

inline Expected<Graph> chain_graph(const std::string& name, int64_t n, int ops) {
  GraphBuilder b(name);
  const Shape shape = make_shape({n});
  ValueId x = b.input("x", DType::F32, shape), y = b.input("y", DType::F32, shape);
  ValueId t;
  if (ops == 100) {
    t = x;
    for (int i = 0; i < 25; ++i) t = b.mul(b.tanh(b.add(b.mul(t, b.scalar(DType::F32, 0.9)), y)), x);
  } else {
    t = b.relu(b.mul(b.tanh(b.add(b.mul(x, b.scalar(DType::F32, 0.5)), y)), x));
    if (ops == 10) t = b.op(Op::Exp, {b.mul(b.sub(b.sigmoid(b.add(t, y)), x), b.scalar(DType::F32, 2.0))});
  }
  b.name(t, "out");
  b.output(t);
  return b.build();
}

inline std::string rows_text(const std::string& name, const std::string& params, const std::string& body) {
  return "func @" + name + "(" + params + ") -> f32[8192,4096] {\n" + body + "  return %y\n}\n";
}

// silu(conv2d(x, w, groups = c) + b): x f16[32,c,size,size], k x k taps, pad k / 2.
inline std::string depthwise_text(const std::string& name, int64_t c, int64_t size, int64_t k, int64_t stride) {
  const std::string ch = std::to_string(c), p = std::to_string(k / 2), s = std::to_string(stride);
  const std::string out = std::to_string((size + 2 * (k / 2) - k) / stride + 1);
  const std::string y = "f16[32," + ch + "," + out + "," + out + "]";
  const std::string x = "f16[32," + ch + "," + std::to_string(size) + "," + std::to_string(size) + "]";
  const std::string w = "f16[" + ch + ",1," + std::to_string(k) + "," + std::to_string(k) + "]";
  return "func @" + name + "(%x: " + x + ", %w: " + w + ", %b: f16[" + ch + "]) -> " + y + " {\n" +
         "  %c = conv2d %x, %w {stride = [" + s + ", " + s + "], pad = [" + p + ", " + p + ", " + p + ", " + p +
         "], groups = " + ch + "} : " + y + "\n" +
         "  %r = reshape %b {shape = [1, " + ch + ", 1, 1]} : f16[1," + ch + ",1,1]\n" +
         "  %s = add %c, %r : " + y + "\n" +
         "  %y = silu %s : " + y + "\n" +
         "  return %y\n}\n";
}

// act(1x1 conv of f16[32, c_in, size, size] to c_out channels + bias).
inline std::string pointwise_text(const std::string& name, int64_t c_in, int64_t c_out, int64_t size,
                                  const std::string& act) {
  const std::string hw = std::to_string(size), co = std::to_string(c_out);
  const std::string x = "f16[32," + std::to_string(c_in) + "," + hw + "," + hw + "]";
  const std::string y = "f16[32," + co + "," + hw + "," + hw + "]";
  const std::string w = "f16[" + co + "," + std::to_string(c_in) + ",1,1]";
  return "func @" + name + "(%x: " + x + ", %w: " + w + ", %b: f16[" + co + "]) -> " + y + " {\n" +
         "  %c = conv2d %x, %w : " + y + "\n" +
         "  %r = reshape %b {shape = [1, " + co + ", 1, 1]} : f16[1," + co + ",1,1]\n" +
         "  %s = add %c, %r : " + y + "\n" +
         "  %y = " + act + " %s : " + y + "\n" +
         "  return %y\n}\n";
}

inline std::vector<GpuWorkload> gpu_workloads() {
  const std::string x = "%x: f32[8192,4096]", r = "%r: f32[8192,4096]";
  const std::string g = "%g: f32[4096]", h = "%h: f32[4096]", bias = "%b: f32[4096]";
  auto parsed = [](std::string text) { return [text] { return parse_graph(text); }; };
  PreprocessSpec half;
  half.height = 540;
  half.width = 960;
  half.mean = kPixelMean;
  half.stddev = kPixelStd;
  PreprocessSpec crop = half;
  crop.height = crop.width = 224;
  const ImageType frame{{1080, 1920, 3}, DType::U8};
  return {
      {"chain5", [] { return chain_graph("chain5", int64_t(1) << 26, 5); }},
      {"chain10", [] { return chain_graph("chain10", int64_t(1) << 26, 10); }},
      {"bias_gelu", parsed(rows_text("bias_gelu", x + ", " + bias,
                                     "  %s = add %x, %b : f32[8192,4096]\n"
                                     "  %y = gelu %s {approximate = \"tanh\"} : f32[8192,4096]\n"))},
      {"residual_rms", parsed(rows_text("residual_rms", x + ", " + r + ", " + g,
                                        "  %s = add %x, %r : f32[8192,4096]\n"
                                        "  %y = rms_norm %s, %g : f32[8192,4096]\n"))},
      {"residual_ln", parsed(rows_text("residual_ln", x + ", " + r + ", " + g + ", " + h,
                                       "  %s = add %x, %r : f32[8192,4096]\n"
                                       "  %y = layer_norm %s, %g, %h : f32[8192,4096]\n"))},
      {"softmax", parsed(rows_text("softmax", x, "  %y = softmax %x : f32[8192,4096]\n"))},
      {"frame_half_chw", [=] { return build_preprocess_graph(frame, {CropRect{0, 0, 1920, 1080}}, half); }},
      {"crops64", [=] { return build_preprocess_graph(frame, crops64_rects(), crop); }},
      {"matmul_bias_gelu", parsed("func @matmul_bias_gelu(%a: f16[4096,4096], %w: f16[4096,4096], %b: f16[4096]) "
                                  "-> f16[4096,4096] {\n"
                                  "  %m = matmul %a, %w : f16[4096,4096]\n"
                                  "  %s = add %m, %b : f16[4096,4096]\n"
                                  "  %y = gelu %s {approximate = \"tanh\"} : f16[4096,4096]\n"
                                  "  return %y\n}\n")},
      // The bare product of matmul_bias_gelu: its epilogue's cost is the difference.
      {"matmul_f16", parsed("func @matmul_f16(%a: f16[4096,4096], %w: f16[4096,4096]) -> f16[4096,4096] {\n"
                            "  %y = matmul %a, %w : f16[4096,4096]\n  return %y\n}\n")},
      {"chain100_small", [] { return chain_graph("chain100_small", 1024, 100); }},
      // Attention as exporters write it (heads split by reshape/transpose, scale, softmax, the
      // product with v, heads merged): fuse-attention makes it one fused_attention.
      {"attention_f16", parsed("func @attention_f16(%q: f16[8,1024,1024], %k: f16[8,1024,1024], %v: f16[8,1024,1024]) "
                               "-> f16[8,1024,1024] {\n"
                               "  %0 = reshape %q {shape = [8, 1024, 16, 64]} : f16[8,1024,16,64]\n"
                               "  %1 = transpose %0 {perm = [0, 2, 1, 3]} : f16[8,16,1024,64]\n"
                               "  %2 = reshape %k {shape = [8, 1024, 16, 64]} : f16[8,1024,16,64]\n"
                               "  %3 = transpose %2 {perm = [0, 2, 3, 1]} : f16[8,16,64,1024]\n"
                               "  %4 = reshape %v {shape = [8, 1024, 16, 64]} : f16[8,1024,16,64]\n"
                               "  %5 = transpose %4 {perm = [0, 2, 1, 3]} : f16[8,16,1024,64]\n"
                               "  %6 = constant {value = dense<f16[]: [0.125]>} : f16[]\n"
                               "  %7 = matmul %1, %3 : f16[8,16,1024,1024]\n"
                               "  %8 = mul %7, %6 : f16[8,16,1024,1024]\n"
                               "  %9 = softmax %8 {axis = -1} : f16[8,16,1024,1024]\n"
                               "  %10 = matmul %9, %5 : f16[8,16,1024,64]\n"
                               "  %11 = transpose %10 {perm = [0, 2, 1, 3]} : f16[8,1024,16,64]\n"
                               "  %y = reshape %11 {shape = [8, 1024, 1024]} : f16[8,1024,1024]\n"
                               "  return %y\n}\n")},
      // Decoding: one query per sequence against 1024 keys (fused_attention stays one kernel).
      {"attention_decode_f16", parsed("func @attention_decode_f16(%q: f16[64,1,1024], %k: f16[64,1024,1024], %v: f16[64,1024,1024]) "
                                      "-> f16[64,1,1024] {\n"
                                      "  %0 = reshape %q {shape = [64, 1, 16, 64]} : f16[64,1,16,64]\n"
                                      "  %1 = transpose %0 {perm = [0, 2, 1, 3]} : f16[64,16,1,64]\n"
                                      "  %2 = reshape %k {shape = [64, 1024, 16, 64]} : f16[64,1024,16,64]\n"
                                      "  %3 = transpose %2 {perm = [0, 2, 3, 1]} : f16[64,16,64,1024]\n"
                                      "  %4 = reshape %v {shape = [64, 1024, 16, 64]} : f16[64,1024,16,64]\n"
                                      "  %5 = transpose %4 {perm = [0, 2, 1, 3]} : f16[64,16,1024,64]\n"
                                      "  %6 = constant {value = dense<f16[]: [0.125]>} : f16[]\n"
                                      "  %7 = matmul %1, %3 : f16[64,16,1,1024]\n"
                                      "  %8 = mul %7, %6 : f16[64,16,1,1024]\n"
                                      "  %9 = softmax %8 {axis = -1} : f16[64,16,1,1024]\n"
                                      "  %10 = matmul %9, %5 : f16[64,16,1,64]\n"
                                      "  %11 = transpose %10 {perm = [0, 2, 1, 3]} : f16[64,1,16,64]\n"
                                      "  %y = reshape %11 {shape = [64, 1, 1024]} : f16[64,1,1024]\n"
                                      "  return %y\n}\n")},
      // A SwiGLU MLP's gate: one product into [.., 2n], silu of one half times the other.
      {"swiglu_f16", parsed("func @swiglu_f16(%x: f16[8192,4096], %w: f16[4096,8192]) -> f16[8192,4096] {\n"
                            "  %h = matmul %x, %w : f16[8192,8192]\n"
                            "  %g = slice %h {starts = [0], ends = [4096], axes = [1]} : f16[8192,4096]\n"
                            "  %u = slice %h {starts = [4096], ends = [8192], axes = [1]} : f16[8192,4096]\n"
                            "  %s = silu %g : f16[8192,4096]\n"
                            "  %y = mul %s, %u : f16[8192,4096]\n"
                            "  return %y\n}\n")},
      // efficientnet_b0's widest depthwise convolutions at batch 32 with their bias and SiLU.
      {"dwconv3s2_f16", parsed(depthwise_text("dwconv3s2_f16", 96, 112, 3, 2))},
      {"dwconv5_f16", parsed(depthwise_text("dwconv5_f16", 144, 56, 5, 1))},
      {"conv1x1_f16", parsed(pointwise_text("conv1x1_f16", 144, 24, 56, "silu"))},
      {"conv1x1_7x7_f16", parsed(pointwise_text("conv1x1_7x7_f16", 512, 2048, 7, "relu"))},
  };
}

}  // namespace fusebox::bench
