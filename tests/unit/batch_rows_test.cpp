// The row path of the CPU batch kernel (backends/cpu/batch_rows.h): batched crops of a random u8
// frame that must take the row path (the kernel is made, not declined), run directly on results
// poisoned before each run and compared with the reference kernel of the same batch node and with
// the program run unfused on the reference backend. Nearest (the lookup-table path) and bilinear
// with every coordinate mode, mixed crop sizes, crops on the border, pad steps before and after
// the cast, NCHW and NHWC results, a BGR -> RGB flip, an operand that varies along the columns
// (no lookup table); one form the row path declines, with its reason.
//
// Tolerance: 1e-6 relative and absolute, as the other pre-processing tests (the region program
// may contract the normalise's sub and mul when it generates code; the transform is bit-exact).
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "backends/cpu/batch_rows.h"
#include "backends/cpu/preprocess_rows.h"
#include "backends/cpu/reference/reference.h"
#include "backends/host_backend.h"
#include "fusebox/session.h"
#include "ir/printer.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

struct Crop {
  int64_t y0, x0, h, w;
};

using testing::dims_text;

struct Program {
  int64_t H = 40, W = 56, out = 12;
  std::vector<Crop> crops = {{0, 0, 20, 28}, {9, 17, 31, 39}, {39, 55, 1, 1}, {0, 30, 40, 26}, {4, 4, 12, 12}};
  std::string resize = R"(mode = "linear")";
  std::string pad;                 // a pad step after the crop ("" none)
  bool pad_after_cast = false;     // the pad reads f32 (else u8)
  bool flip_channels = false;      // BGR -> RGB
  bool chw = true;                 // transpose each item to [1,3,o,o] and concat on axis 0
  int64_t axis = 0;                // without chw: the concat axis of the [o,o,3] items
  std::string scale_shape = "1,1,3";  // the second operand's shape
};

// frame -> per crop: slice [-> pad] -> f32 [-> pad] [-> flip] -> resize -> (x - m) * s [-> CHW]
// -> concat; %m and %s are inputs, so the batch node's operands are all the program's inputs.
std::string program(const Program& p) {
  const int64_t o = p.out, n = int64_t(p.crops.size());
  const std::string result = p.chw ? dims_text({n, 3, o, o}) : p.axis == 0 ? dims_text({n * o, o, 3}) : dims_text({o, n * o, 3});
  std::string t = "func @batch(%frame: u8[" + dims_text({p.H, p.W, 3}) + "], %m: f32[1,1,3], %s: f32[" + p.scale_shape +
                  "]) -> f32[" + result + "] {\n";
  std::string list;
  for (size_t i = 0; i < p.crops.size(); ++i) {
    const Crop& c = p.crops[i];
    const std::string v = "%c" + std::to_string(i) + "_";
    int64_t h = c.h, w = c.w;
    std::string last = v + "crop";
    t += "  " + last + " = slice %frame {starts = [" + dims_text({c.y0, c.x0}) + "], ends = [" + dims_text({c.y0 + c.h, c.x0 + c.w}) +
         "], axes = [0, 1]} : u8[" + dims_text({h, w, 3}) + "]\n";
    auto pad = [&](const std::string& dtype) {
      if (p.pad.empty()) return;
      h += 3, w += 3;  // the pads below add 1 + 2 rows and 2 + 1 columns
      t += "  " + v + "pad = pad " + last + " {pads = [1, 2, 0, 2, 1, 0], " + p.pad + "} : " + dtype + "[" +
           dims_text({h, w, 3}) + "]\n";
      last = v + "pad";
    };
    if (!p.pad_after_cast) pad("u8");
    t += "  " + v + "f = cast " + last + " {to = f32} : f32[" + dims_text({h, w, 3}) + "]\n";
    last = v + "f";
    if (p.pad_after_cast) pad("f32");
    if (p.flip_channels) {
      t += "  " + v + "rgb = flip " + last + " {axes = [2]} : f32[" + dims_text({h, w, 3}) + "]\n";
      last = v + "rgb";
    }
    t += "  " + v + "r = resize " + last + " {sizes = [" + dims_text({o, o, 3}) + "], " + p.resize + "} : f32[" + dims_text({o, o, 3}) + "]\n";
    t += "  " + v + "d = sub " + v + "r, %m : f32[" + dims_text({o, o, 3}) + "]\n";
    t += "  " + v + "n = mul " + v + "d, %s : f32[" + dims_text({o, o, 3}) + "]\n";
    last = v + "n";
    if (p.chw) {
      t += "  " + v + "t = transpose " + last + " {perm = [2, 0, 1]} : f32[" + dims_text({3, o, o}) + "]\n";
      t += "  " + v + "b = reshape " + v + "t {shape = [" + dims_text({1, 3, o, o}) + "]} : f32[" + dims_text({1, 3, o, o}) + "]\n";
      last = v + "b";
    }
    list += (i ? ", " : "") + last;
  }
  t += "  %y = concat " + list + " {axis = " + std::to_string(p.chw ? 0 : p.axis) + "} : f32[" + result + "]\n";
  return t + "  return %y\n}\n";
}

std::vector<int64_t> static_dims(const TensorType& t) {
  std::vector<int64_t> d;
  for (const Dim& x : t.shape) d.push_back(x.value());
  return d;
}

NamedArrays inputs(const Program& p, const Graph& g, uint64_t seed) {
  return {{"frame", testing::random_array(DType::U8, {p.H, p.W, 3}, seed, 0, 256)},
          {"m", testing::random_array(DType::F32, {1, 1, 3}, seed + 1, 90, 140)},
          {"s", testing::random_array(DType::F32, static_dims(g.type(g.inputs()[2])), seed + 2, 0.01, 0.02)}};
}

// Compiles `p` fused and expects its batch node to take the row path (or, with `declined`, to be
// refused with that reason); then compares the row kernel, run directly on poisoned results, and
// the fused program with the batch node's reference kernel and the unfused program.
void expect_row_path(const Program& p, const std::string& declined = "") {
  const std::string text = program(p);
  SCOPED_TRACE(text);
  Graph g = testing::parse_or_fail(text);
  CompileOptions fused_opts;
  fused_opts.verify_each_pass = true;
  Expected<testing::OracleAndPlan> both = testing::compile_against_reference(g, fused_opts);
  ASSERT_TRUE(both) << both.status().to_string();
  const Graph& fused = both->plan.graph();
  const Node* batch = testing::find_node(fused, Op::BatchElementwiseRegion);
  ASSERT_NE(batch, nullptr) << print_graph(fused);
  std::string why;
  Expected<std::shared_ptr<const Kernel>> kernel = cpu::make_batch_rows_kernel(*batch, cpu::Codegen::Auto, &why);
  ASSERT_TRUE(kernel) << kernel.status().to_string();
  if (!declined.empty()) {
    EXPECT_EQ(*kernel, nullptr);
    EXPECT_EQ(why, declined);
  } else {
    ASSERT_NE(*kernel, nullptr) << "declined: " << why;
  }
  for (uint64_t seed : {5u, 6u}) {
    NamedArrays in = inputs(p, g, seed);
    Expected<std::vector<Array>> want = both->reference.run(in);
    Expected<std::vector<Array>> got = both->plan.run(in);
    ASSERT_TRUE(want && got) << (want ? got.status() : want.status()).to_string();
    EXPECT_TRUE(testing::arrays_close((*got)[0], (*want)[0], 1e-6, 1e-6)) << print_graph(fused);
    if (!*kernel) continue;
    std::vector<Array> ins;
    std::vector<BufferView> in_views;
    for (ValueId v : batch->inputs) ins.push_back(in.at(fused.value(v).name));
    for (const Array& a : ins) in_views.push_back(host_view(a));
    std::vector<Array> node_want{Array(DType::F32, static_dims(fused.type(batch->outputs[0])))};
    ASSERT_TRUE(cpu::run_reference(*batch, ins, node_want).is_ok());
    EXPECT_TRUE(testing::arrays_close(node_want[0], (*want)[0], 1e-6, 1e-6));
    for (uint8_t poison : testing::kPoisonBytes) {
      Array y(DType::F32, node_want[0].shape());
      y.fill_bytes(poison);
      std::vector<BufferView> out_views{host_view(y)};
      InlineStream stream(kHostDevice);
      ASSERT_TRUE((*kernel)->run(stream, in_views, out_views).is_ok());
      EXPECT_TRUE(testing::arrays_close(y, (*want)[0], 1e-6, 1e-6)) << "poison " << int(poison);
    }
  }
}

const char* const kCoordinates[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"};
const char* const kNearestModes[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};

std::string nearest(int i) {
  return std::string(R"(mode = "nearest", coordinate = ")") + kCoordinates[i % 4] + R"(", nearest_mode = ")" +
         kNearestModes[i % 4] + "\"";
}
std::string linear(int i) { return std::string(R"(mode = "linear", coordinate = ")") + kCoordinates[i % 4] + "\""; }

// Nearest from u8 with per-channel operands: the lookup-table path.
TEST(BatchRows, NearestEveryCoordinateMode) {
  for (int i = 0; i < 4; ++i) {
    Program p;
    p.resize = nearest(i);
    expect_row_path(p);
  }
}

TEST(BatchRows, BilinearEveryCoordinateMode) {
  for (int i = 0; i < 4; ++i) {
    Program p;
    p.resize = linear(i);
    expect_row_path(p);
  }
}

// Pad constants in u8 and in f32, edge and reflect pads, with both interpolations (bilinear
// with a constant pad fills its rows through the plan's own window loop).
TEST(BatchRows, PadStepsBeforeAndAfterTheCast) {
  const std::string pads[] = {R"(mode = "constant", value = 7.0)", R"(mode = "constant", value = 0.5)",
                              R"(mode = "edge")", R"(mode = "reflect")"};
  for (int i = 0; i < 4; ++i) {
    for (bool lin : {false, true}) {
      Program p;
      if (i == 3) p.crops[2] = {37, 53, 3, 3};  // reflect needs more than a 1-pixel crop
      p.pad = pads[i];
      p.pad_after_cast = i == 1;
      p.resize = lin ? linear(i) : nearest(i);
      expect_row_path(p);
    }
  }
}

// No per-item transform: items side by side along the rows or the columns of an HWC result.
TEST(BatchRows, NhwcResultsAlongEitherAxis) {
  for (int64_t axis : {0, 1}) {
    for (bool lin : {false, true}) {
      Program p;
      p.chw = false;
      p.axis = axis;
      p.resize = lin ? linear(0) : nearest(2);
      expect_row_path(p);
    }
  }
}

TEST(BatchRows, ChannelReorderBgrToRgb) {
  for (bool lin : {false, true}) {
    Program p;
    p.flip_channels = true;
    p.resize = lin ? linear(1) : nearest(3);
    expect_row_path(p);
  }
}

// Items of several row windows each (the region program generates code for a window).
TEST(BatchRows, LargeItemsCutIntoWindows) {
  for (bool lin : {false, true}) {
    Program p;
    p.H = 300, p.W = 400, p.out = 150;
    p.crops = {{0, 0, 300, 400}, {7, 13, 290, 380}, {299, 399, 1, 1}, {100, 0, 200, 150}};
    p.resize = lin ? linear(0) : nearest(3);
    expect_row_path(p);
  }
}

// An operand that varies along the columns: nearest rows go through the window and the region
// program instead of the lookup table.
TEST(BatchRows, AnOperandAlongTheColumnsSkipsTheLookupTable) {
  Program p;
  p.scale_shape = "1,12,3";
  p.resize = nearest(0);
  expect_row_path(p);
}

// An operand that varies along the rows is refused (the windows pass operands whole); the
// general batch kernel runs it.
TEST(BatchRows, AnOperandAlongTheRowsIsDeclined) {
  Program p;
  p.scale_shape = "12,1,3";
  p.resize = linear(0);
  expect_row_path(p, "an operand varies along the rows");
}

// The row loops of every instruction set this processor has agree bit for bit with the generic
// ones on random rows, gathering and loading one by one (GatherUse: both ways on any host, and
// the one Auto picks): vector bodies and scalar tails (n = 37), rows too close to the frame's
// start for the word gathers (before = 0). Bilinear rows also read
// through byte windows (AVX-512 VBMI where the processor has it): the first block's taps are
// those of a 2x downscale of 3 channels (a 94-byte window), the second's span more than 128
// bytes (gathered, or one by one when `before` is too small). The f32 bilinear loops, on weights
// that allow it, give the generic double loops' bits.
TEST(BatchRows, RowLoopsOfEveryIsaAgree) {
  const int64_t n = 37, frame = 4096;
  Array src = testing::random_array(DType::U8, {frame}, 11, 0, 256);
  Array src_f32 = testing::random_array(DType::F32, {frame}, 12, -50, 50);
  Array lut = testing::random_array(DType::I32, {3 * 256}, 13, -1e6, 1e6);
  Array w0 = testing::random_array(DType::F64, {n}, 14, 0, 1), w1 = testing::random_array(DType::F64, {n}, 15, 0, 1);
  // Weights on a grid of 1/256 whose pairs sum to at most 1: the f32 loops must give the bits of
  // the double ones (RowTables::f32_weights).
  std::vector<double> grid0, grid1;
  std::vector<float> grid0_f32, grid1_f32;
  for (int64_t i = 0; i < n; ++i) {
    const int k = int((i * 7717) % 257), j = int((i * 131) % (257 - k));
    grid0.push_back(k / 256.0), grid1.push_back(j / 256.0);
    grid0_f32.push_back(float(grid0.back())), grid1_f32.push_back(float(grid1.back()));
  }
  std::vector<int32_t> off0, off1, base, index, near0, near1;
  for (int64_t i = 0; i < n; ++i) {
    off0.push_back(int32_t((i * 7919) % 1000));
    off1.push_back(off0.back() + 3);
    base.push_back(int32_t((i % 3) * 256));
    index.push_back(off0.back() % (3 * 256));
    near0.push_back(int32_t(i < 16 ? 6 * i + 1 : 40 * i));
    near1.push_back(near0.back() + 3);
  }
  const std::vector<cpu::ByteWindow> windows = cpu::byte_windows(near0, near1);
  ASSERT_EQ(windows.size(), 2u);
  ASSERT_NE(windows[0].mask[0], 0u);
  ASSERT_EQ(windows[1].mask[0], 0u);
  struct Rows {
    std::vector<uint32_t> lut, gathered;
    std::vector<float> nearest, nearest_f32, bilinear, windowed, near;
    std::vector<float> grid, grid_windowed, grid_f32, grid_windowed_f32;  // on the grid, double and f32
  };
  auto run = [&](const cpu::PreprocessLoops& loops, int64_t before) {
    Rows r{std::vector<uint32_t>(n), std::vector<uint32_t>(n), std::vector<float>(n), std::vector<float>(n),
           std::vector<float>(n),    std::vector<float>(n),    std::vector<float>(n), std::vector<float>(n),
           std::vector<float>(n),    std::vector<float>(n),    std::vector<float>(n)};
    const auto* s8 = src.data<uint8_t>() + before;
    loops.lut_row(s8, before, off0.data(), base.data(), static_cast<const uint32_t*>(lut.raw()), r.lut.data(),
                  n);
    loops.nearest_u8(s8, before, off0.data(), r.nearest.data(), n, nullptr);
    loops.nearest_u8(s8, before, near0.data(), r.near.data(), n, windows.data());
    loops.nearest_f32(src_f32.data<float>(), off0.data(), r.nearest_f32.data(), n);
    loops.bilinear_u8(s8, s8 + 1000, before, 0.25, 0.75, off0.data(), off1.data(), w0.data<double>(),
                      w1.data<double>(), r.bilinear.data(), n, nullptr);
    loops.bilinear_u8(s8, s8 + 2000, before, 0.625, 0.375, near0.data(), near1.data(), w0.data<double>(),
                      w1.data<double>(), r.windowed.data(), n, windows.data());
    loops.bilinear_u8(s8, s8 + 1000, before, 0.25, 0.75, off0.data(), off1.data(), grid0.data(), grid1.data(),
                      r.grid.data(), n, nullptr);
    loops.bilinear_u8(s8, s8 + 2000, before, 0.625, 0.375, near0.data(), near1.data(), grid0.data(),
                      grid1.data(), r.grid_windowed.data(), n, windows.data());
    loops.bilinear_u8_f32(s8, s8 + 1000, before, 0.25f, 0.75f, off0.data(), off1.data(), grid0_f32.data(),
                          grid1_f32.data(), r.grid_f32.data(), n, nullptr);
    loops.bilinear_u8_f32(s8, s8 + 2000, before, 0.625f, 0.375f, near0.data(), near1.data(), grid0_f32.data(),
                          grid1_f32.data(), r.grid_windowed_f32.data(), n, windows.data());
    loops.gather32(static_cast<const uint32_t*>(lut.raw()), index.data(), r.gathered.data(), n);
    return r;
  };
  const cpu::GatherUse chosen = cpu::gather_use();
  for (cpu::GatherUse use : {cpu::GatherUse::Always, cpu::GatherUse::Never, cpu::GatherUse::Auto}) {
    cpu::set_gather_use(use);
    for (cpu::RowIsa isa : {cpu::RowIsa::Generic, cpu::RowIsa::Avx2, cpu::RowIsa::Avx512}) {
      if (!cpu::row_isa_available(isa)) continue;
      for (int64_t before : {0, 3, 64}) {
        SCOPED_TRACE(std::string(cpu::row_isa_name(isa)) + " before " + std::to_string(before) +
                     (use == cpu::GatherUse::Always  ? " gathering"
                      : use == cpu::GatherUse::Never ? " one by one"
                                                     : " auto"));
        Rows want = run(cpu::preprocess_loops(cpu::RowIsa::Generic), before);
        Rows got = run(cpu::preprocess_loops(isa), before);
        EXPECT_EQ(got.lut, want.lut);
        EXPECT_EQ(got.gathered, want.gathered);
        EXPECT_EQ(0, std::memcmp(got.nearest.data(), want.nearest.data(), size_t(n) * 4));
        EXPECT_EQ(0, std::memcmp(got.nearest_f32.data(), want.nearest_f32.data(), size_t(n) * 4));
        EXPECT_EQ(0, std::memcmp(got.bilinear.data(), want.bilinear.data(), size_t(n) * 4));
        EXPECT_EQ(0, std::memcmp(got.windowed.data(), want.windowed.data(), size_t(n) * 4));
        EXPECT_EQ(0, std::memcmp(got.near.data(), want.near.data(), size_t(n) * 4));
        EXPECT_EQ(0, std::memcmp(got.grid.data(), want.grid.data(), size_t(n) * 4));
        EXPECT_EQ(0, std::memcmp(got.grid_f32.data(), want.grid.data(), size_t(n) * 4));
        EXPECT_EQ(0, std::memcmp(got.grid_windowed_f32.data(), want.grid_windowed.data(), size_t(n) * 4));
      }
    }
  }
  cpu::set_gather_use(chosen);
}

// One channel of an interleaved row into a planar one: every stride-th element, with vector
// bodies (stride 3 by permutes) and tails; the source ends at the last element read, so a vector
// load past it shows under AddressSanitizer.
TEST(BatchRows, StridedCopiesOfEveryIsaTakeEveryStrideThElement) {
  for (int64_t stride : {1, 3, 4}) {
    for (int64_t n : {1, 7, 16, 37, 64}) {
      std::vector<uint32_t> src(size_t((n - 1) * stride + 1));
      for (size_t k = 0; k < src.size(); ++k) src[k] = uint32_t(k * 2654435761u);
      for (cpu::RowIsa isa : {cpu::RowIsa::Generic, cpu::RowIsa::Avx2, cpu::RowIsa::Avx512}) {
        if (!cpu::row_isa_available(isa)) continue;
        SCOPED_TRACE(std::string(cpu::row_isa_name(isa)) + " stride " + std::to_string(stride) + " n " +
                     std::to_string(n));
        std::vector<uint32_t> out(size_t(n) + 1, 0xDEADBEEFu);
        cpu::preprocess_loops(isa).strided32(src.data(), stride, out.data(), n);
        for (int64_t i = 0; i < n; ++i) EXPECT_EQ(out[size_t(i)], src[size_t(i * stride)]) << "element " << i;
        EXPECT_EQ(out[size_t(n)], 0xDEADBEEFu);  // nothing written past n
      }
    }
  }
}

}  // namespace
}  // namespace fusebox
