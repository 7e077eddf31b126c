// Image pre-processing on the CPU, fused against unfused in one process (docs/benchmarks.md):
//
//   crops64_nearest   64 crops of 448x448 from a u8 [1080,1920,3] frame -> 224x224 nearest ->
//                     (x - mean) * inv_std -> CHW -> concat: f32 [64,3,224,224]
//   crops64_linear    the same with bilinear resizes
//   crops16_mixed     16 crops of different sizes -> 224x224 bilinear -> normalise -> CHW batch
//   frame_1080p       the whole frame -> 540x960 bilinear -> normalise -> CHW: f32 [3,540,960]
//
// Fused is the default CPU pipeline (transform regions, region prologues, batch regions); unfused runs every op
// alone on the same backend (CompileOptions::fuse = false). Each case reports the bytes of the
// frame read once plus the result written once, as bytes processed.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "fusebox/session.h"
#include "ir/builder.h"

namespace fusebox {
namespace {

constexpr int64_t kH = 1080, kW = 1920, kOut = 224;

struct Rect {
  int64_t y0, x0, h, w;
};

// frame -> per rect: crop, f32, resize to out_h x out_w, normalise, CHW (with a batch axis
// when batched) -> concat on axis 0 (or the one item).
Graph pipeline(const std::vector<Rect>& rects, int64_t out_h, int64_t out_w, const std::string& mode) {
  GraphBuilder b("preprocess");
  ValueId frame = b.input("frame", DType::U8, make_shape({kH, kW, 3}));
  Array mean(DType::F32, {1, 1, 3}), inv_std(DType::F32, {1, 1, 3});
  const double m[3] = {0.485, 0.456, 0.406}, s[3] = {0.229, 0.224, 0.225};
  for (int i = 0; i < 3; ++i) {
    mean.set_f64(i, 255 * m[i]);
    inv_std.set_f64(i, 1 / (255 * s[i]));
  }
  ValueId mean_v = b.constant(mean), inv_std_v = b.constant(inv_std);
  std::vector<ValueId> items;
  for (const Rect& r : rects) {
    ValueId crop = b.op(Op::Slice, {frame}, {{"starts", std::vector<int64_t>{r.y0, r.x0}},
                                             {"ends", std::vector<int64_t>{r.y0 + r.h, r.x0 + r.w}},
                                             {"axes", std::vector<int64_t>{0, 1}}});
    Attrs resize{{"sizes", make_shape({out_h, out_w, 3})}, {"mode", mode}};
    if (mode == "nearest") resize.set("coordinate", std::string("asymmetric"));
    ValueId resized = b.op(Op::Resize, {b.cast(crop, DType::F32)}, resize);
    ValueId chw = b.transpose(b.mul(b.sub(resized, mean_v), inv_std_v), {2, 0, 1});
    items.push_back(rects.size() == 1 ? chw : b.reshape(chw, make_shape({1, 3, out_h, out_w})));
  }
  b.output(items.size() == 1 ? items[0] : b.op(Op::Concat, items, {{"axis", int64_t(0)}}));
  Expected<Graph> g = b.build();
  if (!g) {
    std::fprintf(stderr, "graph: %s\n", g.status().to_string().c_str());
    std::abort();
  }
  return *g;
}

std::vector<Rect> grid_crops(int n, int64_t size) {
  std::vector<Rect> out;
  for (int i = 0; i < n; ++i) {
    int64_t y = (i / 8) * ((kH - size) / 7), x = (i % 8) * ((kW - size) / 7);
    out.push_back({y, x, size, size});
  }
  return out;
}

std::vector<Rect> mixed_crops() {
  std::vector<Rect> out;
  for (int i = 0; i < 16; ++i) {
    int64_t h = 96 + 37 * i, w = 128 + 53 * i;
    out.push_back({(i * 41) % (kH - h + 1), (i * 97) % (kW - w + 1), h, w});
  }
  return out;
}

Graph case_graph(int which) {
  switch (which) {
    case 0: return pipeline(grid_crops(64, 448), kOut, kOut, "nearest");
    case 1: return pipeline(grid_crops(64, 448), kOut, kOut, "linear");
    case 2: return pipeline(mixed_crops(), kOut, kOut, "linear");
    default: return pipeline({{0, 0, kH, kW}}, 540, 960, "linear");
  }
}

void BM_Preprocess(benchmark::State& state, int which, bool fused) {
  Graph g = case_graph(which);
  CompileOptions o;
  o.fuse = fused;
  Expected<Executable> exe = Session().compile(g, o);
  if (!exe) {
    state.SkipWithError(exe.status().to_string().c_str());
    return;
  }
  Array frame(DType::U8, {kH, kW, 3});
  auto* p = frame.data<uint8_t>();
  for (int64_t i = 0; i < frame.numel(); ++i) p[i] = uint8_t((i * 2654435761u) >> 13);
  NamedArrays in{{"frame", frame}};
  int64_t out_bytes = 0;
  for (auto _ : state) {
    Expected<std::vector<Array>> out = exe->run(in);
    if (!out) {
      state.SkipWithError(out.status().to_string().c_str());
      return;
    }
    out_bytes = int64_t((*out)[0].nbytes());
    benchmark::DoNotOptimize((*out)[0].raw());
  }
  int64_t kernels = 0;  // nodes that launch work (constants are bound once)
  for (const Node& n : exe->graph().nodes()) kernels += n.op != Op::Constant;
  state.counters["kernels"] = double(kernels);
  state.SetBytesProcessed(state.iterations() * (frame.nbytes() + out_bytes));
}

BENCHMARK_CAPTURE(BM_Preprocess, crops64_nearest_fused, 0, true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Preprocess, crops64_nearest_unfused, 0, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Preprocess, crops64_linear_fused, 1, true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Preprocess, crops64_linear_unfused, 1, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Preprocess, crops16_mixed_fused, 2, true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Preprocess, crops16_mixed_unfused, 2, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Preprocess, frame_1080p_fused, 3, true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Preprocess, frame_1080p_unfused, 3, false)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fusebox

BENCHMARK_MAIN();
