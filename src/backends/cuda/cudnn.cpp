#include "backends/cuda/cudnn.h"

#ifdef FUSEBOX_HAVE_CUDNN

#include <map>

#include "backends/cuda/loader.h"

namespace fusebox::cuda {

namespace {

constexpr const char* kWhat = "cuDNN";

Expected<Cudnn> load() {
  LibrarySpec spec{kWhat, {"libcudnn.so.9", "libcudnn.so"}};
  spec.python_wheels = true;
  spec.wheel = "cudnn";
  FUSEBOX_ASSIGN_OR_RETURN(void* lib, open_library(spec));
  Cudnn dnn;
#define FUSEBOX_CUDNN_RESOLVE(f)                                    \
  {                                                                 \
    FUSEBOX_ASSIGN_OR_RETURN(void* p, find_symbol(lib, kWhat, #f)); \
    dnn.f = reinterpret_cast<decltype(dnn.f)>(p);                   \
  }
  FUSEBOX_CUDNN_FUNCTIONS(FUSEBOX_CUDNN_RESOLVE)
#undef FUSEBOX_CUDNN_RESOLVE
  // libcudnn.so names no version of its own: an older cuDNN has other entry points and rules.
  if (const size_t v = dnn.cudnnGetVersion(); v < 90000) {
    return Status::unimplemented(std::string(kWhat) + " " + std::to_string(v / 10000) + "." +
                                 std::to_string(v / 100 % 100) +
                                 " was loaded; fusebox needs cuDNN 9 (libcudnn.so.9)");
  }
  return dnn;
}

}  // namespace

std::string Cudnn::status_text(cudnnStatus_t s) const {
  const char* text = cudnnGetErrorString ? cudnnGetErrorString(s) : nullptr;
  return text && *text ? std::string(text) : "cuDNN status " + std::to_string(int(s));
}

Status Cudnn::check(cudnnStatus_t s, const std::string& what) const {
  if (s == CUDNN_STATUS_SUCCESS) return Status::ok();
  return Status::execution(what + ": " + status_text(s));
}

std::string Cudnn::version() const {
  // cuDNN 9's encoding: major * 10000 + minor * 100 + patch.
  const size_t v = cudnnGetVersion();
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

Expected<const Cudnn*> cudnn() {
  static const Expected<Cudnn> loaded = load();
  if (!loaded) return loaded.status();
  return &*loaded;
}

Expected<DnnDevice*> dnn_device(Context& context, const Cudnn& dnn) {
  static std::mutex mu;
  // Never destroyed, as contexts are not: the handles live as long as the process.
  static auto* made = new std::map<int, DnnDevice>();
  std::lock_guard<std::mutex> lock(mu);
  const int index = context.device().index;
  if (auto it = made->find(index); it != made->end()) return &it->second;
  FUSEBOX_RETURN_IF_ERROR(context.make_current());
  cudnnHandle_t handle = nullptr;
  FUSEBOX_RETURN_IF_ERROR(
      dnn.check(dnn.cudnnCreate(&handle), "cudnnCreate on " + context.device().to_string()));
  // A CUstream is a cudaStream_t: the runtime and driver share the handle type.
  FUSEBOX_RETURN_IF_ERROR(dnn.check(
      dnn.cudnnSetStream(handle, reinterpret_cast<cudaStream_t>(context.stream())), "cudnnSetStream"));
  DnnDevice& d = (*made)[index];
  d.handle = handle;
  return &d;
}

Status make_conv_descriptors(const Cudnn& d, const std::array<int64_t, 12>& s, cudnnDataType_t type,
                             const ConvGeometry& g, cudnnMathType_t math, ConvDescriptors& p,
                             cudnnTensorFormat_t format) {
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cudnnCreateTensorDescriptor(&p.x), "cudnnCreateTensorDescriptor"));
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cudnnCreateTensorDescriptor(&p.y), "cudnnCreateTensorDescriptor"));
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cudnnCreateTensorDescriptor(&p.bias), "cudnnCreateTensorDescriptor"));
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cudnnCreateFilterDescriptor(&p.w), "cudnnCreateFilterDescriptor"));
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cudnnCreateConvolutionDescriptor(&p.conv), "cudnnCreateConvolutionDescriptor"));
  auto i = [&](size_t at) { return int(s[at]); };
  FUSEBOX_RETURN_IF_ERROR(
      d.check(d.cudnnSetTensor4dDescriptor(p.x, format, type, i(0), i(1), i(2), i(3)), "input descriptor"));
  FUSEBOX_RETURN_IF_ERROR(
      d.check(d.cudnnSetFilter4dDescriptor(p.w, type, format, i(4), i(5), i(6), i(7)), "filter descriptor"));
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cudnnSetTensor4dDescriptor(p.y, format, type, i(8), i(9), i(10), i(11)),
                                  "result descriptor"));
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cudnnSetTensor4dDescriptor(p.bias, CUDNN_TENSOR_NCHW, type, 1, i(9), 1, 1), "bias descriptor"));
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cudnnSetConvolution2dDescriptor(p.conv, int(g.pad_top), int(g.pad_left), int(g.stride_h), int(g.stride_w),
                                                                    int(g.dilation_h), int(g.dilation_w), CUDNN_CROSS_CORRELATION,
                                                                    CUDNN_DATA_FLOAT),
                                  "convolution descriptor"));
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cudnnSetConvolutionGroupCount(p.conv, int(g.groups)), "group count"));
  return d.check(d.cudnnSetConvolutionMathType(p.conv, math), "math type");
}

void destroy_conv_descriptors(const Cudnn& d, ConvDescriptors& p) {
  for (cudnnTensorDescriptor_t t : {p.x, p.y, p.bias})
    if (t) d.cudnnDestroyTensorDescriptor(t);
  if (p.w) d.cudnnDestroyFilterDescriptor(p.w);
  if (p.conv) d.cudnnDestroyConvolutionDescriptor(p.conv);
  p = ConvDescriptors{};
}

}  // namespace fusebox::cuda

#endif  // FUSEBOX_HAVE_CUDNN
