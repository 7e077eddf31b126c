// fusebox on one GPU: each workload of cuda_workloads.h compiled for the CUDA target fused and
// unfused, run on device buffers, against the device's copy bandwidth (docs/benchmarks.md,
// "GPU"; bench/peers/torch_gpu.py times PyTorch eager and torch.compile on the same workloads,
// bench/run_cuda_bench.sh runs both).
//
//   build/bench/cuda_bench [--only NAME[,NAME]] [--min-seconds S] [--target cuda|cpu] [--print-graphs]
//                          [--onnx MODEL.onnx]... [--dim SYM=N]... [--cuda-tf32]
//   (ONNX models as more workloads, always run: --only naming one of them, by its file's stem,
//   leaves out every built-in workload; --dim sizes their symbolic input dims; --cuda-tf32 lets f32
//   products use TF32 tensor cores, CompileOptions::cuda.allow_tf32, as PyTorch's cuDNN
//   convolutions do by default)
//
// --target cpu runs the same on the CPU target (host buffers, a host copy as the ceiling): it
// checks the program where there is no GPU. --print-graphs prints the workloads as .fbir.
//
// Output, whitespace-separated; the placement (free text) is last:
//   device <copy GB/s> <name>            1 GiB device-to-device copy, bytes read + written
//   <name> fused_ms unfused_ms kernels_fused kernels_unfused bytes fused_GBps frac_of_copy
//          cold_compile_s warm_compile_s nvrtc_cold rel_diff placement
//   <name> error <message>              a workload that did not build, compile or run
//
// Method. Inputs are random host arrays copied once to device buffers; plans are compiled with
// CompileOptions{target = cuda, device_io = true}, so run_buffers reads and writes device
// memory (what the CUDA backend does not run goes to the CPU through copies, and the
// placement column says so). A timing is 3 warm-up runs (the first is the compile step's run;
// fewer when they take longer than --min-seconds), then N runs and one sync, N grown until that
// loop takes --min-seconds; the time is the wall clock of the loop / N.
//   bytes          each graph input read once + each output written once (the minimum traffic)
//   kernels        nodes of the compiled graph besides constants and aliasing reshapes
//   cold_compile_s first Session::compile + first run + sync of the fused plan; the cubin cache
//                  on disk starts empty (XDG_CACHE_HOME is a fresh folder), but kernels an
//                  earlier workload compiled are found in memory: nvrtc_cold counts the NVRTC
//                  compiles this step made
//   warm_compile_s the same with a new Session (its plan cache empty; the kernels are cached)
//   rel_diff       max |fused - unfused| / max |unfused| over the outputs of the first runs
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/context.h"
#include "backends/registry/registry.h"
#include "bench_util.h"
#include "cuda_workloads.h"
#include "fusebox/session.h"
#include "ir/printer.h"
#ifdef FUSEBOX_HAVE_ONNX
#include "onnx/importer.h"
#endif

namespace fusebox {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Device-to-device copy of 1 GiB, 20 times, timed with events: GB/s of bytes read + written.
Expected<double> copy_bandwidth(cuda::Context& ctx) {
  constexpr size_t kBytes = size_t(1) << 30;
  constexpr int kReps = 20;
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<void> src, ctx.allocate(kBytes));
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<void> dst, ctx.allocate(kBytes));
  FUSEBOX_RETURN_IF_ERROR(ctx.make_current());
  const cuda::Driver& d = ctx.driver();
  const CUdeviceptr s = reinterpret_cast<CUdeviceptr>(src.get()), t = reinterpret_cast<CUdeviceptr>(dst.get());
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cuMemsetD8Async(s, 0x5a, kBytes, ctx.stream()), "filling the copy source"));
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cuMemcpyDtoDAsync(t, s, kBytes, ctx.stream()), "copying (warm-up)"));
  CUevent start = nullptr, stop = nullptr;
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cuEventCreate(&start, CU_EVENT_DEFAULT), "creating an event"));
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cuEventCreate(&stop, CU_EVENT_DEFAULT), "creating an event"));
  // Both events are destroyed on every way out.
  std::unique_ptr<CUevent_st, decltype(d.cuEventDestroy)> start_owner(start, d.cuEventDestroy);
  std::unique_ptr<CUevent_st, decltype(d.cuEventDestroy)> stop_owner(stop, d.cuEventDestroy);
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cuEventRecord(start, ctx.stream()), "recording an event"));
  for (int i = 0; i < kReps; ++i) {
    FUSEBOX_RETURN_IF_ERROR(d.check(d.cuMemcpyDtoDAsync(t, s, kBytes, ctx.stream()), "copying"));
  }
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cuEventRecord(stop, ctx.stream()), "recording an event"));
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cuEventSynchronize(stop), "waiting for the copies"));
  float ms = 0;
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cuEventElapsedTime(&ms, start, stop), "reading the events"));
  return 2.0 * double(kBytes) * kReps / (double(ms) * 1e-3) / 1e9;
}

// Uniform values in [-1, 1) for floats and [0, 255] for integers, from a hash of the index and
// the seed (reproducible, fast for 2^26 elements).
Array random_host(DType dtype, const std::vector<int64_t>& shape, uint64_t seed) {
  Array a(dtype, shape);
  auto hash = [seed](uint64_t i) {
    uint64_t z = i + seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  const int64_t n = a.numel();
  if (dtype == DType::F32) {
    float* p = a.data<float>();
    for (int64_t i = 0; i < n; ++i) p[i] = float(double(hash(uint64_t(i)) >> 40) / double(1 << 23) - 1.0);
  } else if (dtype == DType::U8) {
    uint8_t* p = a.data<uint8_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = uint8_t(hash(uint64_t(i)) >> 56);
  } else if (is_float(dtype)) {
    for (int64_t i = 0; i < n; ++i) a.set_f64(i, double(hash(uint64_t(i)) >> 40) / double(1 << 23) - 1.0);
  } else {
    for (int64_t i = 0; i < n; ++i) a.set_i64(i, int64_t(hash(uint64_t(i)) >> 56));
  }
  return a;
}

Expected<Array> to_host(const Backend& backend, const Buffer& b) {
  if (b.view().device.is_host()) return b.to_array();
  Array a(b.view().dtype, b.view().shape);
  FUSEBOX_RETURN_IF_ERROR(backend.copy_to_host(backend.stream(), b.view(), host_view(a)));
  FUSEBOX_RETURN_IF_ERROR(backend.stream().sync());
  return a;
}

// Nodes that launch work: constants are bound once and reshapes that are not returned alias
// their operand.
int64_t kernels_of(const Executable& exe) {
  const Graph& g = exe.graph();
  int64_t k = 0;
  for (const Node& n : g.nodes()) {
    if (n.op == Op::Constant) continue;
    const bool returned = std::find(g.outputs().begin(), g.outputs().end(), n.outputs[0]) != g.outputs().end();
    if (n.op == Op::Reshape && !returned) continue;
    ++k;
  }
  return k;
}

struct Compiled {
  Executable exe;
  double seconds = 0;        // compile + first run + sync
  std::vector<Buffer> outs;  // of the first run
};

bool& allow_tf32() {
  static bool allow = false;
  return allow;
}

Expected<Compiled> compile_and_run(const Session& session, FusionTarget target, const Graph& g, bool fuse,
                                   const std::vector<Buffer>& in) {
  CompileOptions o;
  o.target = target;
  o.device_io = true;
  o.fuse = fuse;
  o.cuda.allow_tf32 = allow_tf32();
  const double start = now();
  FUSEBOX_ASSIGN_OR_RETURN(Executable exe, session.compile(g, o));
  FUSEBOX_ASSIGN_OR_RETURN(std::vector<Buffer> outs, exe.run_buffers(in));
  FUSEBOX_RETURN_IF_ERROR(exe.sync());
  return Compiled{std::move(exe), now() - start, std::move(outs)};
}

// Seconds per run (see the opening comment). The plan ran once already (compile_and_run, in
// `first_seconds`): that run is the first of the 3 warm-ups.
Expected<double> time_runs(const Executable& exe, const std::vector<Buffer>& in, double min_seconds, double first_seconds) {
  double warm_seconds = first_seconds;
  int warm = 1;
  const double warm_start = now();
  while (warm < 3 && warm_seconds < min_seconds) {
    FUSEBOX_RETURN_IF_ERROR(exe.run_buffers(in).status());
    FUSEBOX_RETURN_IF_ERROR(exe.sync());
    ++warm;
    warm_seconds = first_seconds + now() - warm_start;
  }
  // The first run also compiled: the later warm-ups (when there were any) estimate a run better.
  const double per_run = std::max(warm > 1 ? (now() - warm_start) / (warm - 1) : first_seconds, 1e-7);
  int64_t n = std::max<int64_t>(1, int64_t(std::ceil(min_seconds / per_run)));
  for (;;) {
    const double start = now();
    for (int64_t i = 0; i < n; ++i) FUSEBOX_RETURN_IF_ERROR(exe.run_buffers(in).status());
    FUSEBOX_RETURN_IF_ERROR(exe.sync());
    const double elapsed = now() - start;
    if (elapsed >= min_seconds) return elapsed / double(n);
    n = std::max(n + 1, int64_t(std::ceil(double(n) * min_seconds / std::max(elapsed, 1e-9) * 1.1)));
  }
}

// max |a - b| / max |b| over every output (0 when they agree exactly).
Expected<double> relative_difference(const Backend& backend, const std::vector<Buffer>& a, const std::vector<Buffer>& b) {
  double diff = 0, scale = 0;
  for (size_t k = 0; k < a.size() && k < b.size(); ++k) {
    if (!a[k] || !b[k]) continue;
    FUSEBOX_ASSIGN_OR_RETURN(Array x, to_host(backend, a[k]));
    FUSEBOX_ASSIGN_OR_RETURN(Array y, to_host(backend, b[k]));
    if (x.numel() != y.numel()) return Status::internal("fused and unfused output " + std::to_string(k) + " differ in size");
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double u = x.get_f64(i), v = y.get_f64(i);
      diff = std::max(diff, std::isnan(u) != std::isnan(v) ? INFINITY : std::fabs(u - v));
      scale = std::max(scale, std::fabs(v));
    }
  }
  return diff == 0 ? 0.0 : diff / std::max(scale, 1e-30);
}

// One output row (or the error that stopped the workload).
// `ctx`: the GPU's context (null on the CPU target).
// Sizes of symbolic input dims (--dim SYM=N), for models exported with a dynamic batch.
SymbolBindings& symbol_sizes() {
  static SymbolBindings sizes;
  return sizes;
}

Expected<std::string> run_workload(const bench::GpuWorkload& w, FusionTarget target, const Backend& backend,
                                   cuda::Context* ctx, double copy_gbps, double min_seconds) {
  FUSEBOX_ASSIGN_OR_RETURN(Graph g, w.build());
  std::vector<Array> host;
  std::vector<Buffer> in;
  double bytes = 0;
  for (size_t k = 0; k < g.inputs().size(); ++k) {
    const TensorType& t = g.type(g.inputs()[k]);
    const Shape shape = bind_shape(t.shape, symbol_sizes());
    if (!is_static(shape)) return Status::invalid("input " + std::to_string(k) + " has a symbolic shape (give --dim SYM=N)");
    host.push_back(random_host(t.dtype, static_dims(shape), 17 + k));
    FUSEBOX_ASSIGN_OR_RETURN(Buffer b, backend.allocate(t.dtype, host.back().shape()));
    FUSEBOX_RETURN_IF_ERROR(backend.copy_from_host(backend.stream(), host_view(host.back()), b.view()));
    in.push_back(std::move(b));
    bytes += double(host.back().nbytes());
  }
  FUSEBOX_RETURN_IF_ERROR(backend.stream().sync());
  host.clear();

  auto note = [&](const char* phase) { std::fprintf(stderr, "cuda_bench: %s: %s\n", w.name.c_str(), phase); };
  note("cold compile and first run (fused)");
  const uint64_t compiled_before = ctx ? ctx->compile_stats().compiled : 0;
  FUSEBOX_ASSIGN_OR_RETURN(Compiled fused, compile_and_run(Session(), target, g, true, in));
  const uint64_t nvrtc_cold = ctx ? ctx->compile_stats().compiled - compiled_before : 0;
  note("warm compile and first run (fused)");
  FUSEBOX_ASSIGN_OR_RETURN(Compiled warm, compile_and_run(Session(), target, g, true, in));
  warm.outs.clear();
  note("compile and first run (unfused)");
  FUSEBOX_ASSIGN_OR_RETURN(Compiled unfused, compile_and_run(Session(), target, g, false, in));
  for (const Buffer& b : fused.outs) bytes += b ? double(b.view().nbytes()) : 0.0;
  FUSEBOX_ASSIGN_OR_RETURN(double diff, relative_difference(backend, fused.outs, unfused.outs));
  fused.outs.clear();
  unfused.outs.clear();

  note("timing");
  FUSEBOX_ASSIGN_OR_RETURN(double t_fused, time_runs(fused.exe, in, min_seconds, warm.seconds));
  FUSEBOX_ASSIGN_OR_RETURN(double t_unfused, time_runs(unfused.exe, in, min_seconds, unfused.seconds));
  const double gbps = bytes / t_fused / 1e9;
  char row[512];
  std::snprintf(row, sizeof(row), "%-17s %10.4f %10.4f %4lld %4lld %12.0f %9.1f %6.3f %8.3f %8.3f %3llu %9.2e ",
                w.name.c_str(), t_fused * 1e3, t_unfused * 1e3, static_cast<long long>(kernels_of(fused.exe)),
                static_cast<long long>(kernels_of(unfused.exe)), bytes, gbps, copy_gbps > 0 ? gbps / copy_gbps : 0.0,
                fused.seconds, warm.seconds, static_cast<unsigned long long>(nvrtc_cold), diff);
  return std::string(row) + "fused[" + fused.exe.placement().summary() + "] unfused[" +
         unfused.exe.placement().summary() + "]";
}

// A fresh folder for the on-disk cubin cache, so that the first compile of each kernel is cold;
// removed at exit.
struct FreshCacheDir {
  std::string path;
  FreshCacheDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/fusebox-cuda-bench-XXXXXX";
    if (!mkdtemp(pattern.data())) return;
    path = pattern;
    setenv("XDG_CACHE_HOME", path.c_str(), 1);
  }
  ~FreshCacheDir() {
    std::error_code ignored;
    if (!path.empty()) std::filesystem::remove_all(path, ignored);
  }
};

// Host copy of 1 GiB on all threads, 5 times: GB/s of bytes read + written (the CPU target's ceiling).
double host_copy_bandwidth() {
  constexpr int64_t kFloats = int64_t(1) << 28;
  constexpr int kReps = 5;
  Array src = bench::filled(kFloats, 1.0f), dst = bench::filled(kFloats, 0.0f);
  bench::copy_plain(src.data<float>(), dst.data<float>(), kFloats);
  const double start = now();
  for (int i = 0; i < kReps; ++i) bench::copy_plain(src.data<float>(), dst.data<float>(), kFloats);
  return 2.0 * 4 * double(kFloats) * kReps / (now() - start) / 1e9;
}

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--only NAME[,NAME]] [--min-seconds S] [--target cuda|cpu] [--print-graphs] [--onnx MODEL.onnx]... [--dim SYM=N]... [--cuda-tf32]\nworkloads:",
               argv0);
  for (const bench::GpuWorkload& w : bench::gpu_workloads()) std::fprintf(stderr, " %s", w.name.c_str());
  std::fprintf(stderr, "\n");
  return 2;
}

}  // namespace
}  // namespace fusebox

int main(int argc, char** argv) {
  using namespace fusebox;
  const FreshCacheDir cache_dir;
  std::vector<std::string> only;
  double min_seconds = 0.2;
  bool print_graphs = false;
  bool on_cpu = false;
  std::vector<std::string> onnx_paths;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--only" && i + 1 < argc) {
      std::string list = argv[++i];
      for (size_t p = 0; p <= list.size();) {
        size_t q = std::min(list.find(',', p), list.size());
        if (q > p) only.push_back(list.substr(p, q - p));
        p = q + 1;
      }
    } else if (a == "--min-seconds" && i + 1 < argc) {
      min_seconds = std::atof(argv[++i]);
      if (!(min_seconds > 0)) return usage(argv[0]);
    } else if (a == "--target" && i + 1 < argc) {
      const std::string t = argv[++i];
      if (t != "cuda" && t != "cpu") return usage(argv[0]);
      on_cpu = t == "cpu";
    } else if (a == "--print-graphs") {
      print_graphs = true;
    } else if (a == "--cuda-tf32") {
      allow_tf32() = true;
    } else if (a == "--onnx" && i + 1 < argc) {
      onnx_paths.push_back(argv[++i]);
    } else if (a == "--dim" && i + 1 < argc) {
      const std::string kv = argv[++i];
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) return usage(argv[0]);
      symbol_sizes()[kv.substr(0, eq)] = std::atoll(kv.c_str() + eq + 1);
    } else {
      return usage(argv[0]);
    }
  }
  std::vector<bench::GpuWorkload> workloads;
  for (const bench::GpuWorkload& w : bench::gpu_workloads()) {
    if (only.empty() || std::find(only.begin(), only.end(), w.name) != only.end()) workloads.push_back(w);
  }
  // ONNX models with static input shapes, named by their file (needs the ONNX component).
  for (const std::string& path : onnx_paths) {
#ifdef FUSEBOX_HAVE_ONNX
    workloads.push_back({std::filesystem::path(path).stem().string(), [path] { return import_onnx_file(path); }});
#else
    std::fprintf(stderr, "cuda_bench: --onnx %s: this build has no ONNX import\n", path.c_str());
    return 1;
#endif
  }
  for (const std::string& name : only) {
    bool known = false;
    for (const bench::GpuWorkload& w : workloads) known = known || w.name == name;
    if (!known) {
      std::fprintf(stderr, "unknown workload '%s'\n", name.c_str());
      return usage(argv[0]);
    }
  }
  if (print_graphs) {  // needs no GPU: what the workloads are, as .fbir
    for (const bench::GpuWorkload& w : workloads) {
      Expected<Graph> g = w.build();
      std::printf("// %s\n%s\n", w.name.c_str(), g ? print_graph(*g).c_str() : g.status().to_string().c_str());
    }
    return 0;
  }

  const FusionTarget target = on_cpu ? FusionTarget::Cpu : FusionTarget::Cuda;
  Expected<std::shared_ptr<Backend>> backend = make_backend(on_cpu ? "cpu" : "cuda");
  if (!backend) {
    std::fprintf(stderr, "cuda_bench: %s\n", backend.status().to_string().c_str());
    return 1;
  }
  std::shared_ptr<cuda::Context> ctx;
  double copy_gbps = 0;
  if (on_cpu) {
    copy_gbps = host_copy_bandwidth();
    std::printf("device %.1f cpu (the host, all threads)\n", copy_gbps);
  } else {
    Expected<std::shared_ptr<cuda::Context>> got = cuda::Context::get(0);
    if (!got) {
      std::fprintf(stderr, "cuda_bench: no GPU: %s\n", got.status().to_string().c_str());
      return 1;
    }
    ctx = *got;
    Expected<double> copy = copy_bandwidth(*ctx);
    if (copy) copy_gbps = *copy;
    std::printf("device %.1f %s (sm_%d, %d SMs)%s\n", copy_gbps, ctx->name().c_str(), ctx->arch(), ctx->multiprocessors(),
                copy ? "" : (" copy failed: " + copy.status().to_string()).c_str());
  }
  std::printf("# name fused_ms unfused_ms kernels_fused kernels_unfused bytes fused_GBps frac_of_copy "
              "cold_compile_s warm_compile_s nvrtc_cold rel_diff placement\n");
  std::fflush(stdout);
  int failed = 0;
  for (const bench::GpuWorkload& w : workloads) {
    Expected<std::string> row = run_workload(w, target, **backend, ctx.get(), copy_gbps, min_seconds);
    if (row) {
      std::printf("%s\n", row->c_str());
    } else {
      ++failed;
      std::printf("%-17s error %s\n", w.name.c_str(), row.status().to_string().c_str());
    }
    std::fflush(stdout);
  }
  return failed ? 1 : 0;
}
