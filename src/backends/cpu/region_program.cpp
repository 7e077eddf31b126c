#include "backends/cpu/region_program.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "backends/cpu/reference/dtype_dispatch.h"
#include "backends/cpu/reference/reference.h"
#include "backends/cpu/region_step.h"
#include "ir/outline.h"
#include "ir/shape_inference.h"

namespace fusebox::cpu {

struct RegionProgram::Step {
  StepArgs args;
  StepFn fast = nullptr;  // null: the reference kernel runs on the tile
  const Node* node = nullptr;
  int dst = -1;
  std::vector<int> src;
};

namespace {

bool have_avx2() {
#if defined(__x86_64__)
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
#else
  return false;
#endif
}

// Runs `body` (whose loop is an orphaned `omp for`) on a team of threads, or on the calling
// thread alone without entering a parallel region: even with if(false) a parallel region
// builds a team and its barriers end in futex wake-ups, two system calls per run that cost
// more than a small region's work (a 100-op chain on 1024 elements run op by op).
// Inside a parallel region (a batch kernel's items, a prologue's windows) an orphaned `omp for`
// would bind to the caller's team: each of its threads would run a share of this region's loop
// and wait at a barrier the others never reach. There the region gets a team of its own.
template <typename Body>
void run_on_threads(bool parallel, Body& body) {
  if (!parallel && omp_get_level() == 0) {
    body();
    return;
  }
#pragma omp parallel if (parallel)
  body();
}

// A thread's register storage, kept for its next run: a run of small regions would otherwise
// allocate and zero (num_regs + 1) tiles of 8 bytes, 16 KiB for a one-op region, every time.
// Taken out of the thread's slot while in use, so a nested run gets its own.
class RegisterStorage {
 public:
  explicit RegisterStorage(size_t words) : words_(std::move(slot())) {
    if (words_.size() < words) words_.resize(words);
  }
  ~RegisterStorage() {
    if (words_.size() <= kKeptWords) slot() = std::move(words_);
  }
  RegisterStorage(const RegisterStorage&) = delete;
  RegisterStorage& operator=(const RegisterStorage&) = delete;
  uint64_t* data() { return words_.data(); }

 private:
  static constexpr size_t kKeptWords = size_t(1) << 17;  // 1 MiB kept per thread at most
  static std::vector<uint64_t>& slot() {
    thread_local std::vector<uint64_t> kept;
    return kept;
  }
  std::vector<uint64_t> words_;
};

StepArgs step_args(const Node& n, const Graph& body) {
  StepArgs a{n.op, body.type(n.outputs[0]).dtype,
             n.inputs.empty() ? DType::F32 : body.type(n.inputs[0]).dtype};
  switch (n.op) {
    case Op::LeakyRelu: a.p0 = float(n.attr_f64("alpha")); break;
    case Op::HardSigmoid:
      a.p0 = float(n.attr_f64("alpha"));
      a.p1 = float(n.attr_f64("beta"));
      break;
    case Op::Clip:
      a.p0 = n.has_attr("min") ? float(n.attr_f64("min")) : -std::numeric_limits<float>::infinity();
      a.p1 = n.has_attr("max") ? float(n.attr_f64("max")) : std::numeric_limits<float>::infinity();
      break;
    case Op::Gelu: a.gelu_tanh = n.attr_str("approximate") == "tanh"; break;
    default: break;
  }
  return a;
}

// gather() for an operand whose innermost dim is contiguous and the one above it stretched (a
// per-channel vector over nChw<b>c activations, [1,C/b,1,1,b] against [N,C/b,H,W,b]): within
// each stretch the values repeat with period P = shape[-1], so a chunk is one period copied and
// then doubled by copying what is already written, not one short copy per period.
template <typename T>
void gather_periodic(const T* base, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                     int64_t start, int64_t n, T* dst) {
  const size_t rank = shape.size();
  const int64_t period = shape[rank - 1], tile = period * shape[rank - 2];
  int64_t outer = start / tile, pos = start % tile;
  for (int64_t i = 0; i < n; ++outer, pos = 0) {
    int64_t offset = 0;
    for (size_t d = rank - 2, rest = size_t(outer); d-- > 0;) {
      offset += int64_t(rest % size_t(shape[d])) * strides[d];
      rest /= size_t(shape[d]);
    }
    const T* row = base + offset;
    const int64_t len = std::min(tile - pos, n - i);
    const int64_t phase = pos % period;
    int64_t filled = std::min(len, period - phase);
    std::memcpy(dst + i, row + phase, size_t(filled) * sizeof(T));
    if (filled < len) {
      const int64_t head = std::min(phase, len - filled);
      std::memcpy(dst + i + filled, row, size_t(head) * sizeof(T));
      filled += head;
    }
    // dst[i + k] == dst[i + k - m * period]: double what is written, a whole number of periods.
    while (filled < len) {
      const int64_t q = filled / period * period;
      const int64_t c = std::min(q, len - filled);
      std::memcpy(dst + i + filled, dst + i + filled - q, size_t(c) * sizeof(T));
      filled += c;
    }
    i += len;
  }
}

// Copies n elements of a broadcast operand (strides in elements over the output dims, 0 where
// stretched) starting at flat output index `start`.
template <typename T>
void gather(const T* base, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
            int64_t start, int64_t n, T* dst) {
  const size_t rank = shape.size();
  int64_t small[16] = {0};
  std::vector<int64_t> large;  // ranks above 16 are rare: only they pay for an allocation
  if (rank > 16) large.assign(rank, 0);
  int64_t* idx = rank > 16 ? large.data() : small;
  int64_t offset = 0, rest = start;
  for (size_t d = rank; d-- > 0;) {
    idx[d] = rest % shape[d];
    rest /= shape[d];
    offset += idx[d] * strides[d];
  }
  const int64_t inner = shape[rank - 1], inner_stride = strides[rank - 1];
  if (rank >= 2 && inner_stride == 1 && strides[rank - 2] == 0) {
    gather_periodic(base, shape, strides, start, n, dst);
    return;
  }
  // Row segments at a time: a contiguous run (stride 1) is a copy, a stretched one (stride 0) a
  // fill; only other strides walk element by element.
  for (int64_t i = 0; i < n;) {
    const int64_t run = std::min(inner - idx[rank - 1], n - i);
    if (inner_stride == 1) {
      std::memcpy(dst + i, base + offset, size_t(run) * sizeof(T));
    } else if (inner_stride == 0) {
      std::fill(dst + i, dst + i + run, base[offset]);
    } else {
      for (int64_t k = 0; k < run; ++k) dst[i + k] = base[offset + k * inner_stride];
    }
    i += run;
    idx[rank - 1] += run;
    offset += run * inner_stride;
    if (idx[rank - 1] < inner) continue;
    offset -= inner_stride * inner;
    idx[rank - 1] = 0;
    for (size_t d = rank - 1; d-- > 0;) {
      if (++idx[d] < shape[d]) {
        offset += strides[d];
        break;
      }
      offset -= strides[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

void gather_bytes(size_t esize, const void* base, const std::vector<int64_t>& shape,
                  const std::vector<int64_t>& strides, int64_t start, int64_t n, void* dst) {
  switch (esize) {
    case 1: gather(static_cast<const uint8_t*>(base), shape, strides, start, n, static_cast<uint8_t*>(dst)); break;
    case 2: gather(static_cast<const uint16_t*>(base), shape, strides, start, n, static_cast<uint16_t*>(dst)); break;
    case 4: gather(static_cast<const uint32_t*>(base), shape, strides, start, n, static_cast<uint32_t*>(dst)); break;
    default: gather(static_cast<const uint64_t*>(base), shape, strides, start, n, static_cast<uint64_t*>(dst)); break;
  }
}

template <typename T>
void fill_typed(void* dst, const void* element, int64_t n) {
  T v;
  std::memcpy(&v, element, sizeof(T));
  std::fill_n(static_cast<T*>(dst), n, v);
}

void fill_repeated(void* dst, const void* element, size_t esize, int64_t n) {
  switch (esize) {
    case 1: return fill_typed<uint8_t>(dst, element, n);
    case 2: return fill_typed<uint16_t>(dst, element, n);
    case 4: return fill_typed<uint32_t>(dst, element, n);
    case 8: return fill_typed<uint64_t>(dst, element, n);
    default: break;
  }
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) std::memcpy(d + size_t(i) * esize, element, esize);
}

enum class Load { Direct, Repeat, Gather, Periodic };

struct OperandPlan {
  Load load;
  const uint8_t* base;
  size_t esize;
  // Gather: the output's dims with those the operand reads alike merged (coalesce_dims), and
  // the operand's strides over them.
  std::vector<int64_t> shape, strides;
  // Periodic: element i of the output reads operand element i % period (a [C] vector along the
  // last axis: a bias over rows, a mean over HWC pixels). `repeated` holds it written out over a
  // chunk plus one period, so a chunk starting at s reads it in place from s % period.
  int64_t period = 0;
  std::shared_ptr<uint8_t[]> repeated;
};

// Periods up to this many elements are written out once per run rather than gathered per chunk.
constexpr int64_t kMaxPeriod = 4096;

// Merges adjacent output dims that the operand steps through as one (stride[d] equals
// stride[d+1] * shape[d+1], stretched dims included) and drops dims of size 1, so gather walks
// [N,C,H*W] instead of [N,C,H,W] and fills H*W at once.
void coalesce_dims(const std::vector<int64_t>& loop_shape, OperandPlan& plan) {
  std::vector<int64_t> shape, strides;
  for (size_t d = 0; d < loop_shape.size(); ++d) {
    if (loop_shape[d] == 1) continue;
    if (!shape.empty() && strides.back() == plan.strides[d] * loop_shape[d]) {
      shape.back() *= loop_shape[d];
      strides.back() = plan.strides[d];
      continue;
    }
    shape.push_back(loop_shape[d]);
    strides.push_back(plan.strides[d]);
  }
  if (shape.empty()) {
    shape.push_back(1);
    strides.push_back(0);
  }
  plan.shape = std::move(shape);
  plan.strides = std::move(strides);
}

// What both executors loop over: the output's element count, its shape as a loop (rank >= 1),
// and how each operand is read.
struct RunLayout {
  int64_t total;
  std::vector<int64_t> loop_shape;
  std::vector<OperandPlan> plans;
  bool gathers = false;  // some operand is gathered
};

RunLayout run_layout(std::span<const Array> inputs, std::span<Array> outputs) {
  const std::vector<int64_t>& shape = outputs[0].shape();
  RunLayout l{outputs[0].numel(), shape.empty() ? std::vector<int64_t>{1} : shape, {}};
  for (const Array& a : inputs) {
    OperandPlan plan{Load::Gather, static_cast<const uint8_t*>(a.raw()), size_t(dtype_size(a.dtype())), {}};
    if (a.numel() == 1) {
      plan.load = Load::Repeat;
    } else if (a.shape() == shape) {
      plan.load = Load::Direct;
    } else {
      plan.strides = broadcast_strides(a.shape(), l.loop_shape);
      coalesce_dims(l.loop_shape, plan);
      const bool periodic = plan.shape.size() == 2 && plan.strides[0] == 0 && plan.strides[1] == 1 &&
                            plan.shape[1] <= kMaxPeriod && l.total > kJitChunk;
      if (periodic) {
        plan.load = Load::Periodic;
        plan.period = plan.shape[1];
        // Written once by the gather a chunk would do (one period, then doubled), over a chunk plus a
        // period or the whole output when smaller: a chunk reads from start % period <= start.
        const int64_t n = std::min(l.total, kJitChunk + plan.period);
        plan.repeated.reset(new uint8_t[size_t(n) * plan.esize]);
        gather_bytes(plan.esize, plan.base, plan.shape, plan.strides, 0, n, plan.repeated.get());
      } else {
        l.gathers = true;
      }
    }
    l.plans.push_back(std::move(plan));
  }
  return l;
}

}  // namespace

bool RegionProgram::supports(const Node& node, std::span<const TensorType> operand_types,
                             const TensorType& result_type) {
  if (node.op == Op::ElementwiseRegion) return node.body != nullptr;
  return is_region_step(node, operand_types, result_type);
}

Expected<std::shared_ptr<const RegionProgram>> RegionProgram::compile(
    const Node& node, std::span<const TensorType> operand_types, Codegen codegen) {
  auto program = std::shared_ptr<RegionProgram>(new RegionProgram());
  program->codegen_ = codegen;
  if (node.op == Op::ElementwiseRegion) {
    if (!node.body) return Status::internal("region without a body");
    program->body_ = node.body;
  } else {
    // A single op as a one-step region over rank-0 values.
    auto body = std::make_shared<Graph>(std::string(node.info().keyword));
    std::vector<ValueId> ins;
    for (size_t i = 0; i < operand_types.size(); ++i) {
      ins.push_back(body->add_input("in" + std::to_string(i), TensorType{operand_types[i].dtype, {}}));
    }
    Node probe{node.op, ins, {}, node.attrs, nullptr, {}};
    std::vector<TensorType> scalar_in;
    for (ValueId v : ins) scalar_in.push_back(body->type(v));
    FUSEBOX_ASSIGN_OR_RETURN(std::vector<TensorType> types, infer_result_types(probe, scalar_in));
    for (ValueId v : body->add_node(node.op, ins, types, node.attrs)) body->add_output(v);
    program->body_ = std::move(body);
  }
  const Graph& body = *program->body_;
  RegionProgram& p = *program;
  p.jit_unsupported_ = jit_built() ? jit_unsupported_step(body) : "this build has no CPU code generation";

  // Registers: operands and constants keep theirs; step results reuse freed ones.
  std::vector<int> reg_of(body.num_values(), -1);
  for (ValueId v : body.inputs()) {
    reg_of[static_cast<size_t>(v)] = p.num_regs_;
    p.operand_reg_.push_back(p.num_regs_++);
    p.operand_dtypes_.push_back(body.type(v).dtype);
  }
  std::vector<int> last_use(body.num_values(), -1);
  const auto& nodes = body.nodes();
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ValueId v : nodes[i].inputs) last_use[static_cast<size_t>(v)] = static_cast<int>(i);
  for (ValueId v : body.outputs()) last_use[static_cast<size_t>(v)] = std::numeric_limits<int>::max();
  std::vector<int> free_regs;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    ValueId out = n.outputs[0];
    if (n.op == Op::Constant) {
      reg_of[static_cast<size_t>(out)] = p.num_regs_;
      p.constant_regs_.push_back(p.num_regs_++);
      p.constant_arrays_.push_back(std::make_shared<const Array>(n.attr_array("value")));
      continue;
    }
    int dst;
    if (!free_regs.empty()) {
      dst = free_regs.back();
      free_regs.pop_back();
    } else {
      dst = p.num_regs_++;
    }
    reg_of[static_cast<size_t>(out)] = dst;
    Step s;
    s.args = step_args(n, body);
    // Clip bounds round to float here as in the reference (C(v)), so every bound is exact.
    s.fast = have_avx2() ? avx2::pick_fast_step(s.args) : generic::pick_fast_step(s.args);
    s.node = &n;
    s.dst = dst;
    for (ValueId v : n.inputs) s.src.push_back(reg_of[static_cast<size_t>(v)]);
    p.steps_.push_back(std::move(s));
    // Free operands after the destination is chosen, so a step never writes what it reads.
    for (ValueId v : n.inputs) {
      if (last_use[static_cast<size_t>(v)] != static_cast<int>(i)) continue;
      int r = reg_of[static_cast<size_t>(v)];
      bool pinned = std::find(p.operand_reg_.begin(), p.operand_reg_.end(), r) != p.operand_reg_.end() ||
                    std::find(p.constant_regs_.begin(), p.constant_regs_.end(), r) != p.constant_regs_.end();
      if (!pinned && std::find(free_regs.begin(), free_regs.end(), r) == free_regs.end()) free_regs.push_back(r);
    }
    if (last_use[static_cast<size_t>(out)] < 0) free_regs.push_back(dst);  // dead result
  }
  for (ValueId v : body.outputs()) p.output_reg_.push_back(reg_of[static_cast<size_t>(v)]);
  return std::shared_ptr<const RegionProgram>(std::move(program));
}

Status RegionProgram::run(std::span<const Array> inputs, std::span<Array> outputs) const {
  if (inputs.size() != operand_reg_.size() || outputs.size() != output_reg_.size()) {
    return Status::internal("region program called with the wrong number of arrays");
  }
  const int64_t total = outputs[0].numel();
  if (total == 0) return Status::ok();
  if (codegen_ != Codegen::Interpreter && jit_unsupported_.empty() &&
      (codegen_ == Codegen::Jit || total >= kJitMinElements ||
       total * std::max<int64_t>(1, int64_t(steps_.size())) >= kJitMinElementSteps)) {
    JitVariant variant;
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (inputs[k].numel() != 1) continue;
      if (variant.repeated.empty()) variant.repeated.resize(inputs.size());
      variant.repeated[k] = true;
    }
    int64_t out_bytes = 0;
    bool aligned = true;
    for (const Array& o : outputs) {
      out_bytes += int64_t(o.nbytes());
      aligned = aligned && reinterpret_cast<uintptr_t>(o.raw()) % kArrayAlignment == 0;
    }
    variant.streaming = aligned && out_bytes >= kStreamingBytes;
    FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const JitKernel> kernel, jit_kernel(variant));
    if (kernel) return run_generated(*kernel, inputs, outputs);
  }
  return run_interpreted(inputs, outputs);
}

Expected<std::shared_ptr<const JitKernel>> RegionProgram::jit_kernel(const JitVariant& variant) const {
  std::lock_guard<std::mutex> lock(jit_mu_);
  auto& kernels = jit_kernels_[variant.streaming ? 1 : 0];
  auto it = kernels.find(variant.repeated);
  if (it != kernels.end()) return it->second;
  if (jit_failed_) return std::shared_ptr<const JitKernel>();
  Expected<std::shared_ptr<const JitKernel>> kernel = jit_compile(*body_, variant);
  if (!kernel) {
    // Auto falls back to the interpreter for good; Jit (tests) reports the failure.
    if (codegen_ == Codegen::Jit) return kernel.status();
    jit_failed_ = true;
    return std::shared_ptr<const JitKernel>();
  }
  kernels[variant.repeated] = *kernel;
  return *kernel;
}

bool RegionProgram::worth_threads(int64_t total) const {
  constexpr int64_t kParallelElements = 8 * kTile;
  constexpr int64_t kParallelElementSteps = int64_t(1) << 15;
  return total >= kParallelElements && total * std::max<int64_t>(1, int64_t(steps_.size())) >= kParallelElementSteps;
}

Status RegionProgram::run_generated(const JitKernel& kernel, std::span<const Array> inputs,
                                    std::span<Array> outputs) const {
  const RunLayout l = run_layout(inputs, outputs);
  const std::vector<OperandPlan>& plans = l.plans;
  const JitKernelFn fn = kernel.function();
  const int64_t chunks = (l.total + kJitChunk - 1) / kJitChunk;
  auto run_chunks = [&] {
    // Gathered operands get a chunk buffer each (8-byte elements cover every dtype), left
    // uninitialised: zeroing them would cost as much as a small run.
    std::unique_ptr<uint64_t[]> gathered(l.gathers ? new uint64_t[plans.size() * size_t(kJitChunk)] : nullptr);
    std::vector<const void*> ops(plans.size());
    std::vector<void*> outs(outputs.size());
#pragma omp for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t start = c * kJitChunk;
      const int64_t n = std::min(kJitChunk, l.total - start);
      for (size_t k = 0; k < plans.size(); ++k) {
        const OperandPlan& plan = plans[k];
        if (plan.load == Load::Repeat) {
          ops[k] = plan.base;
        } else if (plan.load == Load::Direct) {
          ops[k] = plan.base + size_t(start) * plan.esize;
        } else if (plan.load == Load::Periodic) {
          ops[k] = plan.repeated.get() + size_t(start % plan.period) * plan.esize;
        } else {
          void* buf = gathered.get() + k * size_t(kJitChunk);
          gather_bytes(plan.esize, plan.base, plan.shape, plan.strides, start, n, buf);
          ops[k] = buf;
        }
      }
      for (size_t j = 0; j < outputs.size(); ++j) {
        outs[j] = static_cast<uint8_t*>(outputs[j].raw()) + size_t(start) * size_t(dtype_size(outputs[j].dtype()));
      }
      fn(ops.data(), outs.data(), n);
    }
  };
  run_on_threads(chunks > 1 && worth_threads(l.total), run_chunks);
  return Status::ok();
}

Status RegionProgram::run_interpreted(std::span<const Array> inputs, std::span<Array> outputs) const {
  const RunLayout l = run_layout(inputs, outputs);
  const std::vector<OperandPlan>& plans = l.plans;
  const int64_t tiles = (l.total + kTile - 1) / kTile;
  // A run of one tile sizes its registers to the elements it has (rounded up to 64): a small
  // tensor through a long chain would otherwise clear and fill kTile values per register and
  // per repeated operand on every run (a 100-op chain on 16 elements spent most of its run there).
  const int64_t width = tiles == 1 ? std::min(kTile, (l.total + 63) / 64 * 64) : kTile;
  Status error;
  bool failed = false;
  auto run_tiles = [&] {
    // Registers hold up to 8-byte elements; +1 register of slack keeps vector tails in bounds.
    // Every register is written before it is read, so the thread's storage is reused as it is.
    RegisterStorage storage(size_t(num_regs_ + 1) * size_t(width));
    std::vector<void*> reg(static_cast<size_t>(num_regs_));
    for (int r = 0; r < num_regs_; ++r) reg[size_t(r)] = storage.data() + size_t(r) * size_t(width);
    std::vector<const void*> cur(static_cast<size_t>(num_regs_));
    for (int r = 0; r < num_regs_; ++r) cur[size_t(r)] = reg[size_t(r)];
    for (size_t c = 0; c < constant_regs_.size(); ++c) {
      const Array& v = *constant_arrays_[c];
      fill_repeated(reg[size_t(constant_regs_[c])], v.raw(), size_t(dtype_size(v.dtype())), width);
    }
    for (size_t k = 0; k < plans.size(); ++k) {
      if (plans[k].load == Load::Repeat) fill_repeated(reg[size_t(operand_reg_[k])], plans[k].base, plans[k].esize, width);
    }
    std::vector<Array> in_views, out_view;
    const void* srcs[3] = {nullptr, nullptr, nullptr};
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t start = t * kTile;
      const int64_t n = std::min(kTile, l.total - start);
      for (size_t k = 0; k < plans.size(); ++k) {
        const OperandPlan& plan = plans[k];
        int r = operand_reg_[k];
        if (plan.load == Load::Direct) {
          cur[size_t(r)] = plan.base + size_t(start) * plan.esize;
        } else if (plan.load == Load::Periodic) {
          cur[size_t(r)] = plan.repeated.get() + size_t(start % plan.period) * plan.esize;
        } else if (plan.load == Load::Gather) {
          gather_bytes(plan.esize, plan.base, plan.shape, plan.strides, start, n, reg[size_t(r)]);
        }
      }
      for (const Step& s : steps_) {
        if (s.fast) {
          for (size_t j = 0; j < s.src.size(); ++j) srcs[j] = cur[size_t(s.src[j])];
          s.fast(s.args, srcs, reg[size_t(s.dst)], n);
          continue;
        }
        in_views.clear();
        out_view.clear();
        for (size_t j = 0; j < s.src.size(); ++j) {
          DType dt = body_->type(s.node->inputs[j]).dtype;
          in_views.push_back(Array::view(dt, {n}, const_cast<void*>(cur[size_t(s.src[j])])));
        }
        out_view.push_back(Array::view(s.args.dtype, {n}, reg[size_t(s.dst)]));
        Status st = run_reference(*s.node, in_views, out_view);
        if (!st.is_ok()) {
#pragma omp critical(fusebox_region_error)
          if (!failed) {
            failed = true;
            error = st;
          }
        }
      }
      for (size_t k = 0; k < output_reg_.size(); ++k) {
        size_t esize = size_t(dtype_size(outputs[k].dtype()));
        std::memcpy(static_cast<uint8_t*>(outputs[k].raw()) + size_t(start) * esize, cur[size_t(output_reg_[k])],
                    size_t(n) * esize);
      }
    }
  };
  run_on_threads(tiles > 1 && worth_threads(l.total), run_tiles);
  return error;
}

}  // namespace fusebox::cpu
