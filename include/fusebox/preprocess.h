// Image pre-processing as a fusebox graph: crops of u8 HWC images, resized to one size,
// channel-reordered, normalised and batched into an f32 NCHW (or NHWC) tensor.
//
//   fusebox::PreprocessSpec spec;
//   spec.height = 224; spec.width = 224;
//   spec.mean = {123.675, 116.28, 103.53}; spec.stddev = {58.395, 57.12, 57.375};
//   auto pre = fusebox::Preprocessor::create(image_type, {{0, 0, 448, 448}, {100, 50, 448, 448}}, spec);
//   fusebox::Expected<fusebox::Array> batch = pre->run(image);    // f32[2,3,224,224]
//   std::string text = fusebox::print_graph(pre->graph());        // what `fusebox explain` reads
//
// The graph is written with plain ops only (slice, cast, resize, pad, flip, transpose, reshape,
// sub, div, concat), one chain per crop, so the fusion pipeline turns it into as few kernels as
// the target allows, and it runs on every backend a Session knows.
//
// Per crop (x, y, w, h) of image b, in this order:
//   slice [b,] y:y+h, x:x+w       the source pixels of the crop
//   cast f32                      exact for u8
//   resize to (height, width)     nearest or bilinear, `coordinate` as in the resize op; with
//                                 letterbox to (round(h*s), round(w*s)), s = min(H/h, W/w)
//   pad (letterbox only)          centred, constant `pad_value` (pixel units)
//   flip channels (bgr)           reverses the channel order (RGB <-> BGR)
//   transpose to CHW (not nhwc)
//   (x - mean[c]) / stddev[c]
// and the crops are concatenated along a new leading batch axis in the order given.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fusebox/graph.h"
#include "fusebox/session.h"
#include "fusebox/status.h"

namespace fusebox {

// A crop rectangle in pixels of image `image` (0 for a single HWC image).
struct CropRect {
  int64_t x = 0, y = 0, w = 0, h = 0;
  int64_t image = 0;
};

enum class Interpolation { Nearest, Bilinear };

struct PreprocessSpec {
  int64_t height = 0, width = 0;           // output size of every item
  Interpolation interp = Interpolation::Bilinear;
  // The resize op's coordinate mode: half_pixel, align_corners, asymmetric, pytorch_half_pixel.
  std::string coordinate = "half_pixel";
  bool bgr = false;                        // reverse the channel order
  bool nhwc = false;                       // output [N,H,W,C] instead of [N,C,H,W]
  bool letterbox = false;                  // keep the aspect ratio, pad the rest
  double pad_value = 0.0;                  // letterbox fill, in pixel units (before normalising)
  std::vector<double> mean;                // per channel, pixel units; empty: 0
  std::vector<double> stddev;              // per channel; empty: 1; never 0
};

// The input type of an image (u8[H,W,C]) or a batch of images (u8[B,H,W,C]).
struct ImageType {
  std::vector<int64_t> shape;
  DType dtype = DType::U8;
};

// Builds the pre-processing graph for images of `image` type; every argument is checked (crops
// outside the image or empty, zero output size, a zero stddev, mean/std lengths, dtype and rank)
// and a mistake comes back as an invalid-argument Status naming it.
Expected<Graph> build_preprocess_graph(const ImageType& image, const std::vector<CropRect>& crops,
                                       const PreprocessSpec& spec);

// A compiled pre-processing graph.
class Preprocessor {
 public:
  static Expected<Preprocessor> create(const ImageType& image, const std::vector<CropRect>& crops,
                                       const PreprocessSpec& spec, const CompileOptions& options = {},
                                       const Session& session = Session());
  // The graph as built (before fusion), and the executable (its fused graph and report).
  const Graph& graph() const { return graph_; }
  const Executable& executable() const { return exe_; }
  // Runs on an image of the type given to create (a different type is an error).
  Expected<Array> run(const Array& image) const;

 private:
  Preprocessor(Graph g, Executable exe, ImageType type)
      : graph_(std::move(g)), exe_(std::move(exe)), type_(std::move(type)) {}
  Graph graph_;
  Executable exe_;
  ImageType type_;
};

// One-call form: build, compile (on `options`) and run.
Expected<Array> preprocess(const Array& image, const std::vector<CropRect>& crops, const PreprocessSpec& spec,
                           const CompileOptions& options = {});

}  // namespace fusebox
