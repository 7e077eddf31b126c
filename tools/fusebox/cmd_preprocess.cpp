// `fusebox preprocess`: crops of a u8 HWC image (.npy) resized, normalised and batched into an
// f32 NCHW/NHWC .npy through the pre-processing API (fusebox/preprocess.h). The graph it builds
// can be written out (--emit-fbir) for `fusebox explain` / `fusebox opt`.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "cli_util.h"
#include "backends/registry/registry.h"
#include "fusebox/preprocess.h"
#include "runtime/file_io.h"
#include "runtime/npy.h"

namespace fusebox::cli {

namespace {

// "a,b,c" into numbers; nullopt when any part is not a finite number.
std::optional<std::vector<double>> parse_numbers(const std::string& text) {
  std::vector<double> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (part.empty()) return std::nullopt;
    char* end = nullptr;
    double v = std::strtod(part.c_str(), &end);
    if (end != part.c_str() + part.size() || !std::isfinite(v)) return std::nullopt;
    out.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// "x,y,w,h" or "x,y,w,h,image".
std::optional<CropRect> parse_crop(const std::string& text) {
  std::vector<int64_t> v;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::optional<int64_t> n = parse_int(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!n) return std::nullopt;
    v.push_back(*n);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (v.size() != 4 && v.size() != 5) return std::nullopt;
  return CropRect{v[0], v[1], v[2], v[3], v.size() == 5 ? v[4] : 0};
}

// "HxW" (both >= 1).
std::optional<std::pair<int64_t, int64_t>> parse_size(const std::string& text) {
  size_t x = text.find('x');
  if (x == std::string::npos) return std::nullopt;
  std::optional<int64_t> h = parse_int(text.substr(0, x)), w = parse_int(text.substr(x + 1));
  if (!h || !w || *h < 1 || *w < 1 || *h > (int64_t(1) << 20) || *w > (int64_t(1) << 20)) return std::nullopt;
  return std::pair{*h, *w};
}

}  // namespace

int cmd_preprocess(const Args& args) {
  CommandLine cl("preprocess", "IMAGE.npy --size HxW [options] -o OUT.npy",
                 "Crops a u8 image (H,W,C) or batch of images (B,H,W,C), resizes every crop to HxW,\n"
                 "normalises it ((x - mean) / std, per channel, in pixel units) and writes one f32 batch\n"
                 "(N,C,H,W; N,H,W,C with --nhwc). Without --crop the whole image (each image of a batch)\n"
                 "is one item. The work is a fusebox graph, fused and run like any other.",
                 {
                     {"--crop", "X,Y,W,H[,IMAGE]", "one item: the rectangle (of image IMAGE of a batch)", true},
                     {"--size", "HxW", "output size of every item (required)"},
                     {"--mean", "M[,M...]", "per-channel mean in pixel units (default 0)"},
                     {"--std", "S[,S...]", "per-channel standard deviation (default 1)"},
                     {"--interp", "I", "nearest or bilinear (default)"},
                     {"--coordinate", "C", "half_pixel (default), align_corners, asymmetric, pytorch_half_pixel"},
                     {"--bgr", "", "reverse the channel order (RGB <-> BGR)"},
                     {"--nhwc", "", "write N,H,W,C instead of N,C,H,W"},
                     {"--letterbox", "", "keep each crop's aspect ratio and pad the rest"},
                     {"--pad-value", "V", "letterbox fill in pixel units (default 0)"},
                     {"-o", "OUT.npy", "where to write the batch"},
                     {"--emit-fbir", "FILE", "write the pre-processing graph as .fbir text"},
                     {"--target", "T", "cpu (default) or cuda (fused for the GPU, run there)"},
                     {"--backend", "B", "cpu (default), reference (every op on its reference kernel), cuda"},
                     {"--repeat", "N", "run N more times; print the median and mean time per run to stderr"},
                 });
  if (std::optional<int> exit = cl.parse(args)) return *exit;
  if (cl.positionals().size() != 1) {
    return cl.usage_error(cl.positionals().empty() ? "missing the image (.npy) to preprocess"
                                                   : "expected one image file, got " +
                                                         std::to_string(cl.positionals().size()) + " arguments");
  }
  PreprocessSpec spec;
  std::optional<std::string> size = cl.value("--size");
  if (!size) return cl.usage_error("--size HxW is required");
  auto hw = parse_size(*size);
  if (!hw) return cl.usage_error("--size expects HxW with both from 1 to 2^20, got '" + *size + "'");
  spec.height = hw->first;
  spec.width = hw->second;
  for (const char* flag : {"--mean", "--std"}) {
    std::optional<std::string> v = cl.value(flag);
    if (!v) continue;
    auto nums = parse_numbers(*v);
    if (!nums) return cl.usage_error(std::string(flag) + " expects comma-separated numbers, got '" + *v + "'");
    (std::string(flag) == "--mean" ? spec.mean : spec.stddev) = *nums;
  }
  if (std::optional<std::string> interp = cl.value("--interp")) {
    if (*interp == "nearest") spec.interp = Interpolation::Nearest;
    else if (*interp == "bilinear" || *interp == "linear") spec.interp = Interpolation::Bilinear;
    else return cl.usage_error("unknown --interp '" + *interp + "' (choices: nearest, bilinear)");
  }
  if (std::optional<std::string> c = cl.value("--coordinate")) spec.coordinate = *c;
  if (std::optional<std::string> p = cl.value("--pad-value")) {
    auto nums = parse_numbers(*p);
    if (!nums || nums->size() != 1) return cl.usage_error("--pad-value expects one number, got '" + *p + "'");
    spec.pad_value = (*nums)[0];
  }
  spec.bgr = cl.has("--bgr");
  spec.nhwc = cl.has("--nhwc");
  spec.letterbox = cl.has("--letterbox");
  std::vector<CropRect> crops;
  for (const std::string& c : cl.values("--crop")) {
    std::optional<CropRect> r = parse_crop(c);
    if (!r) return cl.usage_error("--crop expects X,Y,W,H or X,Y,W,H,IMAGE (integers), got '" + c + "'");
    crops.push_back(*r);
  }
  std::optional<std::string> out_path = cl.value("-o");
  std::optional<std::string> emit = cl.value("--emit-fbir");
  if (!out_path && !emit) return cl.usage_error("nothing to do: give -o OUT.npy and/or --emit-fbir FILE");
  CompileOptions options;
  options.merge_env = true;
  Expected<std::optional<FusionTarget>> target = target_flag(cl);
  if (!target) return cl.usage_error(target.status().message());
  if (*target) options.target = **target;
  if (std::optional<std::string> backend = cl.value("--backend")) {
    std::vector<std::string> names = backend_names();
    if (std::find(names.begin(), names.end(), *backend) == names.end()) {
      return cl.usage_error("unknown backend '" + *backend + "' (backends: " + backend_choices() + ")");
    }
    options.backend = *backend;
  }
  int64_t repeat = 0;
  if (std::optional<std::string> r = cl.value("--repeat")) {
    std::optional<int64_t> n = parse_int(*r);
    if (!n || *n < 1 || *n > 100000) return cl.usage_error("--repeat expects a count from 1 to 100000, got '" + *r + "'");
    repeat = *n;
  }

  const std::string& image_path = cl.positionals()[0];
  Expected<Array> image = read_npy(image_path);
  if (!image) return cl.error(image.status());
  if (crops.empty() && image->rank() >= 3) {
    const auto& s = image->shape();
    const int64_t n = image->rank() == 4 ? s[0] : 1;
    for (int64_t b = 0; b < n; ++b) crops.push_back(CropRect{0, 0, s[s.size() - 2], s[s.size() - 3], b});
  }
  ImageType type{image->shape(), image->dtype()};
  Expected<Graph> graph = build_preprocess_graph(type, crops, spec);
  if (!graph) return cl.error(graph.status().with_context(image_path));
  if (emit) {
    Status s = write_file(*emit, print_graph(*graph));
    if (!s.is_ok()) return cl.error(s);
  }
  if (!out_path) return kExitOk;
  Expected<Preprocessor> pre = Preprocessor::create(type, crops, spec, options);
  if (!pre) return cl.error(pre.status());
  Expected<Array> batch = pre->run(*image);
  if (!batch) return cl.error(batch.status());
  if (repeat > 0) {
    // The median, as the peers in bench/peers report theirs: the first repeated run allocates the
    // second result buffer (the first is still held) and pays its page faults once.
    std::vector<double> ms;
    for (int64_t i = 0; i < repeat; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      Expected<Array> again = pre->run(*image);
      if (!again) return cl.error(again.status());
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    const double mean = std::accumulate(ms.begin(), ms.end(), 0.0) / double(repeat);
    std::nth_element(ms.begin(), ms.begin() + ptrdiff_t(ms.size() / 2), ms.end());
    std::fprintf(stderr, "fusebox preprocess: %.3f ms per run (median of %lld runs, mean %.3f; %zu kernels)\n",
                 ms[ms.size() / 2], static_cast<long long>(repeat), mean, pre->executable().graph().nodes().size());
  }
  Status s = write_npy(*out_path, *batch);
  if (!s.is_ok()) return cl.error(s);
  Checksum c;
  c.add(*batch);
  std::printf("%%batch  %s  %s\n", batch->type_string().c_str(), c.to_string().c_str());
  return kExitOk;
}

}  // namespace fusebox::cli
