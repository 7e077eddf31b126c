// The pre-processing API (fusebox/preprocess.h) against a hand-written loop: random u8 images,
// crops touching the border, 1-pixel crops, letterbox, BGR, NHWC, every resize coordinate mode,
// on the reference backend and the fused CPU backend; and every argument check.
#include <gtest/gtest.h>

#include <cmath>

#include "fusebox/preprocess.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::kCpu;
using testing::kReference;

// The source coordinate of output index o on an axis in -> out (the resize op's formulas, in
// float as ONNX Runtime computes them), clamped to [0, in-1].
double source_coord(const std::string& mode, int64_t o, int64_t in, int64_t out) {
  float scale = float(out) / float(in);
  float x = float(o), c = 0;
  if (mode == "half_pixel") c = (x + 0.5f) / scale - 0.5f;
  if (mode == "pytorch_half_pixel") c = out > 1 ? (x + 0.5f) / scale - 0.5f : 0.0f;
  if (mode == "align_corners") c = out == 1 ? 0.0f : x * (float(in) - 1) / (float(out) - 1);
  if (mode == "asymmetric") c = x / scale;
  return c;
}

double clamp_to(double c, int64_t in) { return !(c > 0) ? 0.0 : std::min(c, double(in - 1)); }

// Nearest with round_prefer_floor (the resize op's default nearest_mode).
int64_t nearest(const std::string& mode, int64_t o, int64_t in, int64_t out) {
  double v = source_coord(mode, o, in, out);
  double f = std::floor(v);
  v = (v - f == 0.5) ? f : std::round(v);
  return int64_t(clamp_to(v, in));
}

// The straightforward loop the API must agree with: image u8[B,H,W,C] (B = 1 for rank 3).
std::vector<float> hand_preprocess(const Array& image, const std::vector<CropRect>& crops, const PreprocessSpec& s) {
  const auto& sh = image.shape();
  const int64_t H = sh[sh.size() - 3], W = sh[sh.size() - 2], C = sh.back();
  const uint8_t* px = image.data<uint8_t>();
  const int64_t OH = s.height, OW = s.width;
  std::vector<float> out;
  for (const CropRect& r : crops) {
    auto at = [&](int64_t y, int64_t x, int64_t c) {
      return double(px[((r.image * H + r.y + y) * W + r.x + x) * C + c]);
    };
    int64_t rh = OH, rw = OW;
    if (s.letterbox) {
      double scale = std::min(double(OH) / double(r.h), double(OW) / double(r.w));
      rh = std::clamp<int64_t>(std::llround(double(r.h) * scale), 1, OH);
      rw = std::clamp<int64_t>(std::llround(double(r.w) * scale), 1, OW);
    }
    const int64_t top = (OH - rh) / 2, left = (OW - rw) / 2;
    // pixel(oy, ox, c) before normalising, in the item's HWC.
    auto pixel = [&](int64_t oy, int64_t ox, int64_t c) -> double {
      int64_t y = oy - top, x = ox - left;
      if (y < 0 || y >= rh || x < 0 || x >= rw) return s.pad_value;
      if (rh == r.h && rw == r.w) return at(y, x, c);
      if (s.interp == Interpolation::Nearest) {
        return at(nearest(s.coordinate, y, r.h, rh), nearest(s.coordinate, x, r.w, rw), c);
      }
      double cy = clamp_to(source_coord(s.coordinate, y, r.h, rh), r.h);
      double cx = clamp_to(source_coord(s.coordinate, x, r.w, rw), r.w);
      int64_t y0 = int64_t(cy), x0 = int64_t(cx);
      int64_t y1 = std::min(y0 + 1, r.h - 1), x1 = std::min(x0 + 1, r.w - 1);
      double wy = cy - double(y0), wx = cx - double(x0);
      return (1 - wy) * ((1 - wx) * at(y0, x0, c) + wx * at(y0, x1, c)) +
             wy * ((1 - wx) * at(y1, x0, c) + wx * at(y1, x1, c));
    };
    auto norm = [&](double v, int64_t c) {
      double m = s.mean.empty() ? 0.0 : s.mean[s.mean.size() == 1 ? 0 : size_t(c)];
      double d = s.stddev.empty() ? 1.0 : s.stddev[s.stddev.size() == 1 ? 0 : size_t(c)];
      return float((v - m) / d);
    };
    auto src_c = [&](int64_t c) { return s.bgr ? C - 1 - c : c; };
    if (s.nhwc) {
      for (int64_t y = 0; y < OH; ++y)
        for (int64_t x = 0; x < OW; ++x)
          for (int64_t c = 0; c < C; ++c) out.push_back(norm(pixel(y, x, src_c(c)), c));
    } else {
      for (int64_t c = 0; c < C; ++c)
        for (int64_t y = 0; y < OH; ++y)
          for (int64_t x = 0; x < OW; ++x) out.push_back(norm(pixel(y, x, src_c(c)), c));
    }
  }
  return out;
}

Array random_image(std::vector<int64_t> shape, uint64_t seed) {
  return testing::random_array(DType::U8, std::move(shape), seed, 0.0, 256.0);
}

// Runs the API on both backends and compares each with the hand loop.
void expect_matches_hand_loop(const Array& image, const std::vector<CropRect>& crops, const PreprocessSpec& spec) {
  std::vector<float> want = hand_preprocess(image, crops, spec);
  for (testing::BackendChoice backend : {kReference, kCpu}) {
    SCOPED_TRACE(backend.backend);
    CompileOptions o;
    testing::use_backend(o, backend);
    Expected<Array> got = preprocess(image, crops, spec, o);
    ASSERT_TRUE(got) << got.status().to_string();
    const int64_t C = image.shape().back();
    std::vector<int64_t> shape = spec.nhwc ? std::vector<int64_t>{int64_t(crops.size()), spec.height, spec.width, C}
                                           : std::vector<int64_t>{int64_t(crops.size()), C, spec.height, spec.width};
    ASSERT_EQ(got->dtype(), DType::F32);
    ASSERT_EQ(got->shape(), shape);
    const float* g = got->data<float>();
    size_t bad = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::fabs(g[i] - want[i]) > 1e-4f * std::max(1.0f, std::fabs(want[i]))) {
        if (++bad <= 5) ADD_FAILURE() << "element " << i << ": got " << g[i] << ", want " << want[i];
      }
    }
    EXPECT_EQ(bad, 0u);
  }
}

PreprocessSpec imagenet(int64_t h, int64_t w, Interpolation interp) {
  PreprocessSpec s;
  s.height = h;
  s.width = w;
  s.interp = interp;
  s.mean = {123.675, 116.28, 103.53};
  s.stddev = {58.395, 57.12, 57.375};
  return s;
}

TEST(Preprocess, CropsTouchingTheBorderAndOnePixelCrops) {
  Array image = random_image({37, 53, 3}, 1);
  std::vector<CropRect> crops = {{0, 0, 53, 37}, {41, 25, 12, 12}, {0, 30, 20, 7}, {52, 36, 1, 1}, {10, 4, 1, 9}};
  for (Interpolation interp : {Interpolation::Bilinear, Interpolation::Nearest}) {
    expect_matches_hand_loop(image, crops, imagenet(16, 24, interp));
  }
}

TEST(Preprocess, EveryCoordinateModeUpAndDown) {
  Array image = random_image({29, 31, 3}, 2);
  std::vector<CropRect> crops = {{1, 2, 25, 20}, {3, 5, 6, 7}};
  for (const char* mode : {"half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"}) {
    SCOPED_TRACE(mode);
    for (Interpolation interp : {Interpolation::Bilinear, Interpolation::Nearest}) {
      PreprocessSpec s = imagenet(11, 13, interp);
      s.coordinate = mode;
      expect_matches_hand_loop(image, crops, s);
    }
  }
}

TEST(Preprocess, LetterboxBgrNhwcAndScalarNormalisation) {
  Array image = random_image({40, 60, 3}, 3);
  std::vector<CropRect> crops = {{0, 0, 60, 40}, {5, 5, 10, 30}, {59, 0, 1, 40}};
  PreprocessSpec s = imagenet(24, 24, Interpolation::Bilinear);
  s.letterbox = true;
  s.pad_value = 114;
  expect_matches_hand_loop(image, crops, s);
  s.bgr = true;
  s.nhwc = true;
  expect_matches_hand_loop(image, crops, s);
  s.mean = {127.5};
  s.stddev = {127.5};
  s.letterbox = false;
  expect_matches_hand_loop(image, crops, s);
}

TEST(Preprocess, BatchOfImagesAndOtherChannelCounts) {
  Array batch = random_image({3, 20, 18, 3}, 4);
  std::vector<CropRect> crops = {{0, 0, 18, 20, 2}, {4, 4, 8, 8, 0}, {17, 19, 1, 1, 1}, {2, 3, 10, 5, 2}};
  expect_matches_hand_loop(batch, crops, imagenet(9, 7, Interpolation::Bilinear));
  Array gray = random_image({15, 15, 1}, 5);
  PreprocessSpec s;
  s.height = 8;
  s.width = 8;
  s.bgr = true;  // one channel: nothing to reorder
  expect_matches_hand_loop(gray, {{0, 0, 15, 15}, {3, 3, 5, 9}}, s);
}

TEST(Preprocess, TheGraphIsPlainOpsAndRunsAgain) {
  PreprocessSpec s = imagenet(8, 8, Interpolation::Bilinear);
  Expected<Preprocessor> pre = Preprocessor::create(ImageType{{16, 16, 3}, DType::U8}, {{0, 0, 8, 16}, {8, 0, 8, 16}}, s);
  ASSERT_TRUE(pre) << pre.status().to_string();
  EXPECT_EQ(testing::count_op(pre->graph(), Op::Slice), 2u);
  EXPECT_EQ(testing::count_op(pre->graph(), Op::Resize), 2u);
  EXPECT_EQ(testing::count_op(pre->graph(), Op::Concat), 1u);
  // It fuses: fewer kernels run than ops were written (on the default cpu target).
  EXPECT_LT(pre->executable().report().kernels_after, pre->executable().report().kernels_before)
      << pre->executable().report().to_string();
  // The printed graph parses back (what `fusebox explain` reads).
  EXPECT_TRUE(parse_module(print_graph(pre->graph())));
  Array a = random_image({16, 16, 3}, 6), b = random_image({16, 16, 3}, 7);
  Expected<Array> ra = pre->run(a), rb = pre->run(b);
  ASSERT_TRUE(ra && rb);
  EXPECT_NE(testing::to_doubles(*ra), testing::to_doubles(*rb));
  Expected<Array> wrong = pre->run(random_image({16, 17, 3}, 8));
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.status().message().find("built for u8[16,16,3]"), std::string::npos) << wrong.status().message();
}

std::string error_of(const std::vector<int64_t>& shape, DType dtype, const std::vector<CropRect>& crops,
                     const PreprocessSpec& spec) {
  Expected<Graph> g = build_preprocess_graph(ImageType{shape, dtype}, crops, spec);
  if (g) return "no error";
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  return g.status().message();
}

TEST(Preprocess, EveryBadArgumentIsAClearError) {
  PreprocessSpec s = imagenet(8, 8, Interpolation::Bilinear);
  const std::vector<int64_t> img{10, 12, 3};
  auto has = [](const std::string& msg, const char* want) {
    EXPECT_NE(msg.find(want), std::string::npos) << msg;
  };
  has(error_of(img, DType::F32, {{0, 0, 4, 4}}, s), "the image must be u8, got f32");
  has(error_of({10, 12}, DType::U8, {{0, 0, 4, 4}}, s), "u8[H,W,C] or u8[B,H,W,C], got rank 2");
  has(error_of({10, 0, 3}, DType::U8, {{0, 0, 4, 4}}, s), "has an empty dimension");
  has(error_of(img, DType::U8, {}, s), "no crop rectangles");
  has(error_of(img, DType::U8, {{0, 0, 0, 4}}, s), "crop 0 (x=0, y=0, w=0, h=4) is empty");
  has(error_of(img, DType::U8, {{0, 0, 4, 4}, {9, 0, 4, 4}}, s), "crop 1 (x=9, y=0, w=4, h=4) lies outside the 12x10");
  has(error_of(img, DType::U8, {{-1, 0, 4, 4}}, s), "lies outside");
  has(error_of(img, DType::U8, {{0, 7, 4, 4}}, s), "lies outside");
  has(error_of(img, DType::U8, {{0, 0, 4, 4, 1}}, s), "names image 1 of a batch of 1");
  PreprocessSpec bad = s;
  bad.height = 0;
  has(error_of(img, DType::U8, {{0, 0, 4, 4}}, bad), "output size must be positive, got 0x8");
  bad = s;
  bad.stddev = {1, 0, 1};
  has(error_of(img, DType::U8, {{0, 0, 4, 4}}, bad), "std must not be 0");
  bad = s;
  bad.mean = {1, 2};
  has(error_of(img, DType::U8, {{0, 0, 4, 4}}, bad), "mean has 2 values for an image of 3 channels");
  bad = s;
  bad.coordinate = "tf_crop_and_resize";
  has(error_of(img, DType::U8, {{0, 0, 4, 4}}, bad), "unknown coordinate mode 'tf_crop_and_resize'");
}

}  // namespace
}  // namespace fusebox
