#include "backends/cuda/nvrtc.h"

#include <nvrtc.h>

#include "backends/cuda/loader.h"

namespace fusebox::cuda {

namespace {

#define FUSEBOX_NVRTC_FUNCTIONS(X) \
  X(nvrtcVersion)                  \
  X(nvrtcGetErrorString)           \
  X(nvrtcCreateProgram)            \
  X(nvrtcCompileProgram)           \
  X(nvrtcGetProgramLogSize)        \
  X(nvrtcGetProgramLog)            \
  X(nvrtcGetCUBINSize)             \
  X(nvrtcGetCUBIN)                 \
  X(nvrtcDestroyProgram)

struct Nvrtc {
#define FUSEBOX_NVRTC_MEMBER(f) decltype(&::f) f = nullptr;
  FUSEBOX_NVRTC_FUNCTIONS(FUSEBOX_NVRTC_MEMBER)
#undef FUSEBOX_NVRTC_MEMBER
  int major = 0, minor = 0;
};

Expected<Nvrtc> load() {
  FUSEBOX_ASSIGN_OR_RETURN(void* lib, open_library({"NVRTC", {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}}));
  Nvrtc n;
#define FUSEBOX_NVRTC_RESOLVE(f)                                      \
  {                                                                   \
    FUSEBOX_ASSIGN_OR_RETURN(void* p, find_symbol(lib, "NVRTC", #f)); \
    n.f = reinterpret_cast<decltype(n.f)>(p);                         \
  }
  FUSEBOX_NVRTC_FUNCTIONS(FUSEBOX_NVRTC_RESOLVE)
#undef FUSEBOX_NVRTC_RESOLVE
  if (n.nvrtcVersion(&n.major, &n.minor) != NVRTC_SUCCESS) return Status::unimplemented("NVRTC: nvrtcVersion failed");
  return n;
}

Expected<const Nvrtc*> nvrtc() {
  static const Expected<Nvrtc> loaded = load();
  if (!loaded) return loaded.status();
  return &*loaded;
}

}  // namespace

Expected<std::string> nvrtc_version() {
  FUSEBOX_ASSIGN_OR_RETURN(const Nvrtc* n, nvrtc());
  return std::to_string(n->major) + "." + std::to_string(n->minor);
}

Expected<std::string> compile_cubin(const std::string& source, const std::string& name, int arch,
                                    const std::vector<std::string>& extra_options) {
  FUSEBOX_ASSIGN_OR_RETURN(const Nvrtc* n, nvrtc());
  nvrtcProgram prog = nullptr;
  if (nvrtcResult r = n->nvrtcCreateProgram(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr); r != NVRTC_SUCCESS) {
    return Status::internal("NVRTC could not create a program for " + name + ": " + n->nvrtcGetErrorString(r));
  }
  std::vector<std::string> options = {"--gpu-architecture=sm_" + std::to_string(arch), "-std=c++17", "--fmad=false",
                                      "--prec-div=true", "--prec-sqrt=true", "-default-device"};
  options.insert(options.end(), extra_options.begin(), extra_options.end());
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  const nvrtcResult compiled = n->nvrtcCompileProgram(prog, int(argv.size()), argv.data());
  size_t log_size = 0;
  n->nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size) n->nvrtcGetProgramLog(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (compiled != NVRTC_SUCCESS) {
    n->nvrtcDestroyProgram(&prog);
    return Status::internal("NVRTC could not compile " + name + " for sm_" + std::to_string(arch) + ": " +
                            n->nvrtcGetErrorString(compiled) + "\n" + log);
  }
  size_t size = 0;
  n->nvrtcGetCUBINSize(prog, &size);
  std::string cubin(size, '\0');
  n->nvrtcGetCUBIN(prog, cubin.data());
  n->nvrtcDestroyProgram(&prog);
  return cubin;
}

}  // namespace fusebox::cuda
