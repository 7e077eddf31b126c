#include "backends/cpu/region_jit.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <string_view>
#include <vector>

#include "ir/op_info.h"
#include "ir/printer.h"

#if FUSEBOX_HAVE_LLVM
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>

#include "backends/cpu/region_jit_steps.h"
#endif

namespace fusebox::cpu {

namespace {

bool jit_dtype(DType d) {
  switch (d) {
    case DType::F32: case DType::F64: case DType::I32: case DType::I64:
    case DType::U8: case DType::I8: case DType::Bool:
      return true;
    default:
      return false;
  }
}

bool wide_dtype(DType d) { return d == DType::F32 || d == DType::F64 || d == DType::I32 || d == DType::I64; }

bool float_unary_op(Op op) {
  switch (op) {
    case Op::Neg: case Op::Abs: case Op::Exp: case Op::Sqrt: case Op::Rsqrt: case Op::Reciprocal:
    case Op::Tanh: case Op::Sigmoid: case Op::Silu: case Op::Relu: case Op::LeakyRelu:
    case Op::Floor: case Op::Ceil: case Op::Round: case Op::Identity: case Op::Clip:
    case Op::HardSigmoid: case Op::HardSwish: case Op::Gelu: case Op::Log: case Op::Erf: case Op::Sin:
    case Op::Cos:
      return true;
    default:
      return false;
  }
}

bool compare_op(Op op) {
  switch (op) {
    case Op::Equal: case Op::NotEqual: case Op::Less: case Op::LessEqual: case Op::Greater:
    case Op::GreaterEqual:
      return true;
    default:
      return false;
  }
}

// Approximated functions: generated for f32 only.
bool transcendental_op(Op op) {
  return op == Op::Exp || op == Op::Tanh || op == Op::Sigmoid || op == Op::Silu || op == Op::Gelu ||
         op == Op::Log || op == Op::Erf || op == Op::Sin || op == Op::Cos;
}

// The steps with generated code: region_loops.inc's vectorised loops, plus f64 for the exact
// unary ops and the bool ops.
bool step_supported(const Node& n, const Graph& body) {
  const DType out = body.type(n.outputs[0]).dtype;
  if (!jit_dtype(out)) return false;
  if (n.op == Op::Constant) return n.attr_array("value").numel() == 1;
  if (n.inputs.empty()) return false;
  const DType in = body.type(n.inputs[0]).dtype;
  if (!jit_dtype(in)) return false;
  if (n.op == Op::Cast) return in != DType::Bool;
  if (n.op == Op::Where) return wide_dtype(out);
  if (n.op == Op::Not || n.op == Op::And || n.op == Op::Or) return in == DType::Bool;
  if (op_info(n.op).min_inputs == 1 && n.inputs.size() == 1) {
    if (!float_unary_op(n.op)) return false;
    return in == DType::F32 || (in == DType::F64 && !transcendental_op(n.op));
  }
  if (n.inputs.size() != 2) return false;
  if (compare_op(n.op)) return wide_dtype(in);
  switch (n.op) {
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Max: case Op::Min:
      return wide_dtype(out);
    case Op::Div:
      return out == DType::F32 || out == DType::F64;
    default:
      return false;
  }
}

}  // namespace

int64_t jit_lanes(const Graph& body) {
  const auto& nodes = body.nodes();
  std::vector<size_t> last_use(body.num_values(), 0);
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ValueId v : nodes[i].inputs) last_use[size_t(v)] = i;
  for (ValueId v : body.outputs()) last_use[size_t(v)] = nodes.size();
  // An operand is loaded where a step first reads it (a repeated one is a broadcast operand of
  // that instruction), so it is live from its first reader on: a chain taking a scalar per step
  // keeps about two values live, not one per operand.
  std::vector<bool> counted(body.num_values(), false), loaded(body.num_values(), true);
  for (ValueId v : body.inputs()) loaded[size_t(v)] = false;
  size_t live = 0, peak = 0;
  for (ValueId v : body.outputs()) {
    if (!loaded[size_t(v)]) loaded[size_t(v)] = counted[size_t(v)] = true, ++live;
  }
  peak = live;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (ValueId v : nodes[i].inputs) {
      if (!loaded[size_t(v)]) loaded[size_t(v)] = counted[size_t(v)] = true, ++live;
    }
    if (nodes[i].op != Op::Constant) {  // constants fold into instructions
      for (ValueId v : nodes[i].outputs) counted[size_t(v)] = true, ++live;
    }
    peak = std::max(peak, live);
    for (ValueId v : nodes[i].inputs) {
      if (last_use[size_t(v)] == i && counted[size_t(v)]) counted[size_t(v)] = false, --live;
    }
  }
  return peak <= 8 ? 64 : peak <= 16 ? 32 : 16;
}

namespace {

// A body cut into stages: stage s computes nodes [starts[s], starts[s + 1]).
struct StagePlan {
  std::vector<size_t> starts;
  std::vector<int> stage_of;  // per value: the stage computing it; -1 for operands and constants
  std::vector<bool> crosses;  // per value: read by a later stage, so kept in a block buffer
  size_t count() const { return starts.size() - 1; }
};

// `starts` without the end.
StagePlan make_plan(const Graph& body, std::vector<size_t> starts) {
  const auto& nodes = body.nodes();
  StagePlan p{std::move(starts), std::vector<int>(body.num_values(), -1), std::vector<bool>(body.num_values(), false)};
  p.starts.push_back(nodes.size());
  for (size_t s = 0; s < p.count(); ++s) {
    for (size_t k = p.starts[s]; k < p.starts[s + 1]; ++k) {
      if (nodes[k].op == Op::Constant) continue;
      for (ValueId v : nodes[k].inputs) {
        if (p.stage_of[size_t(v)] >= 0 && p.stage_of[size_t(v)] != int(s)) p.crosses[size_t(v)] = true;
      }
      for (ValueId v : nodes[k].outputs) p.stage_of[size_t(v)] = int(s);
    }
  }
  return p;
}

// Cuts by weight, then gives up stages whose buffers would not stay in L1 (and would grow the
// threads' stacks): one stage.
StagePlan plan_stages(const Graph& body) {
  const auto& nodes = body.nodes();
  auto weight = [&](const Node& n) -> int {
    if (n.op == Op::Constant) return 0;
    if (transcendental_op(n.op)) return 12;
    if (n.op == Op::Div || n.op == Op::Sqrt || n.op == Op::Rsqrt || n.op == Op::Reciprocal) return 4;
    return 1;
  };
  int total = 0;
  for (const Node& n : nodes) total += weight(n);
  const int stages = (total + kJitStageWeight - 1) / kJitStageWeight;
  std::vector<size_t> starts = {0};
  int sum = 0;
  for (size_t i = 0; i < nodes.size() && stages > 1; ++i) {
    sum += weight(nodes[i]);
    if (sum * stages >= total * int(starts.size()) && int(starts.size()) < stages && i + 1 < nodes.size())
      starts.push_back(i + 1);
  }
  StagePlan plan = make_plan(body, starts);
  int64_t bytes = 0;
  for (size_t v = 0; v < plan.crosses.size(); ++v)
    if (plan.crosses[v]) bytes += kJitStageBlock * dtype_size(body.type(ValueId(v)).dtype);
  return bytes > kJitStageBufferBytes ? make_plan(body, {0}) : plan;
}

}  // namespace

std::vector<size_t> jit_stage_starts(const Graph& body) {
  std::vector<size_t> starts = plan_stages(body).starts;
  starts.pop_back();
  return starts;
}

std::string jit_unsupported_step(const Graph& body) {
  for (ValueId v : body.inputs()) {
    if (!jit_dtype(body.type(v).dtype)) return "operand of dtype " + std::string(dtype_name(body.type(v).dtype));
  }
  for (const Node& n : body.nodes()) {
    if (n.outputs.size() != 1) return std::string(n.info().keyword) + " (results: " + std::to_string(n.outputs.size()) + ")";
    if (!step_supported(n, body)) {
      return std::string(n.info().keyword) + " -> " + std::string(dtype_name(body.type(n.outputs[0]).dtype));
    }
  }
  return "";
}

#if !FUSEBOX_HAVE_LLVM

bool jit_built() { return false; }

JitStats jit_stats() { return {}; }

Expected<std::shared_ptr<const JitKernel>> jit_compile(const Graph&, JitVariant) {
  return Status::unimplemented("this build has no CPU code generation (LLVM 14 was not found at configure time)");
}

#else

namespace {

using codegen::StepEmitter;

// One process-wide LLJIT for the host; kernels are modules with their own resource tracker.
struct JitEngine {
  std::unique_ptr<llvm::orc::LLJIT> lljit;
  std::string error;  // why the engine could not start
  std::mutex mu;
  std::map<std::string, std::weak_ptr<const JitKernel>> cache;
  uint64_t next_id = 0;
  JitStats stats;
  bool x86 = false;
  bool avx512 = false;  // AVX-512F: vscalefps and table lookups in the approximated functions
};

JitEngine& engine() {
  static JitEngine* e = [] {
    auto* eng = new JitEngine();  // never destroyed: kernels may outlive static destructors
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!jtmb) {
      eng->error = llvm::toString(jtmb.takeError());
      return eng;
    }
    jtmb->setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
    eng->x86 = jtmb->getTargetTriple().getArch() == llvm::Triple::x86_64;
    for (const std::string& f : jtmb->getFeatures().getFeatures()) eng->avx512 = eng->avx512 || f == "+avx512f";
    auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*jtmb)).create();
    if (!jit) {
      eng->error = llvm::toString(jit.takeError());
      return eng;
    }
    eng->lljit = std::move(*jit);
    // Kernels call libm: sinf/cosf for large arguments, roundevenf where SSE4.1 is missing.
    auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        eng->lljit->getDataLayout().getGlobalPrefix());
    if (gen) eng->lljit->getMainJITDylib().addGenerator(std::move(*gen));
    else llvm::consumeError(gen.takeError());
    return eng;
  }();
  return *e;
}

class LlvmKernel final : public JitKernel {
 public:
  LlvmKernel(llvm::orc::ResourceTrackerSP tracker, JitKernelFn fn) : tracker_(std::move(tracker)), fn_(fn) {}
  ~LlvmKernel() override {
    std::lock_guard<std::mutex> lock(engine().mu);
    llvm::consumeError(tracker_->remove());
  }
  JitKernelFn function() const override { return fn_; }

 private:
  llvm::orc::ResourceTrackerSP tracker_;
  JitKernelFn fn_;
};

// Builds `void name(i8** operands, i8** outputs, i64 n)`.
void build_kernel(llvm::Module& m, const std::string& name, const Graph& body, const JitVariant& variant,
                  bool x86, bool avx512) {
  llvm::LLVMContext& ctx = m.getContext();
  llvm::IRBuilder<> b(ctx);
  llvm::Type* i8p = b.getInt8PtrTy();
  llvm::Type* i64 = b.getInt64Ty();
  auto* fty = llvm::FunctionType::get(b.getVoidTy(), {i8p->getPointerTo(), i8p->getPointerTo(), i64}, false);
  auto* fn = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, name, m);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  llvm::Value* operands = fn->getArg(0);
  llvm::Value* outputs = fn->getArg(1);
  llvm::Value* n = fn->getArg(2);

  auto* entry = llvm::BasicBlock::Create(ctx, "entry", fn);
  auto* vloop = llvm::BasicBlock::Create(ctx, "vector", fn);
  auto* tail_check = llvm::BasicBlock::Create(ctx, "tail_check", fn);
  auto* tail = llvm::BasicBlock::Create(ctx, "tail", fn);
  auto* done = llvm::BasicBlock::Create(ctx, "done", fn);

  b.SetInsertPoint(entry);
  const auto& ins = body.inputs();
  const int64_t lanes = jit_lanes(body);
  StepEmitter scalar(b, m, 1, avx512), vector(b, m, unsigned(lanes), avx512);
  std::vector<llvm::Value*> in_ptr, repeated_scalar;
  for (size_t k = 0; k < ins.size(); ++k) {
    DType d = body.type(ins[k]).dtype;
    llvm::Value* raw = b.CreateLoad(i8p, b.CreateConstGEP1_64(i8p, operands, k));
    llvm::Value* p = b.CreatePointerCast(raw, scalar.stored(d)->getPointerTo());
    in_ptr.push_back(p);
    llvm::Value* one = nullptr;
    if (variant.is_repeated(k)) one = scalar.from_storage(d, b.CreateLoad(scalar.stored(d), p));
    repeated_scalar.push_back(one);
  }
  std::vector<llvm::Value*> out_ptr;
  for (size_t j = 0; j < body.outputs().size(); ++j) {
    DType d = body.type(body.outputs()[j]).dtype;
    llvm::Value* raw = b.CreateLoad(i8p, b.CreateConstGEP1_64(i8p, outputs, j));
    out_ptr.push_back(b.CreatePointerCast(raw, scalar.stored(d)->getPointerTo()));
  }
  std::vector<llvm::Value*> repeated_vector;
  for (llvm::Value* s : repeated_scalar) repeated_vector.push_back(s ? vector.splat(s) : nullptr);
  llvm::Value* nvec = b.CreateAnd(n, llvm::ConstantInt::get(i64, ~uint64_t(lanes - 1)));
  b.CreateCondBr(b.CreateICmpSGT(nvec, llvm::ConstantInt::get(i64, 0)), vloop, tail_check);

  const auto& nodes = body.nodes();
  const StagePlan stages = plan_stages(body);
  const size_t nstages = stages.count();
  std::vector<int> operand_index(body.num_values(), -1);
  for (size_t k = 0; k < ins.size(); ++k) operand_index[size_t(ins[k])] = int(k);
  std::vector<llvm::Value*> buffer(body.num_values(), nullptr);  // a block of each crossing value
  for (size_t v = 0; v < buffer.size(); ++v) {
    if (!stages.crosses[v]) continue;
    llvm::Type* st = vector.stored(body.type(ValueId(v)).dtype);
    llvm::IRBuilder<> at_entry(entry, entry->begin());
    auto* buf = at_entry.CreateAlloca(llvm::ArrayType::get(st, uint64_t(kJitStageBlock)));
    buf->setAlignment(llvm::Align(64));
    buffer[v] = at_entry.CreatePointerCast(buf, st->getPointerTo());
  }
  // Buffers are 64-byte aligned and `local` is a multiple of the lanes.
  auto buffer_align = [](const StepEmitter& e, DType d) {
    return std::min<uint64_t>(64, uint64_t(e.lanes()) * uint64_t(dtype_size(d)));
  };
  // Outputs are stored by the stage that computes them (the last one for operands and constants).
  auto output_stage = [&](ValueId v) { return stages.stage_of[size_t(v)] < 0 ? int(nstages) - 1 : stages.stage_of[size_t(v)]; };

  // One iteration of stage `s` of the body at index i with the emitter's lane count; `local` is
  // i's offset in the block buffers (unused with one stage).
  auto emit_stage = [&](const StepEmitter& e, size_t s, llvm::Value* i, llvm::Value* local,
                        const std::vector<llvm::Value*>& repeated, bool vectorised) {
    std::vector<llvm::Value*> val(body.num_values(), nullptr);
    auto load = [&](DType d, llvm::Value* base, llvm::Value* at, uint64_t align) {
      llvm::Type* st = e.vec(e.stored(d));
      llvm::Value* addr = b.CreatePointerCast(b.CreateGEP(e.stored(d), base, at), st->getPointerTo());
      return e.from_storage(d, b.CreateAlignedLoad(st, addr, llvm::MaybeAlign(align)));
    };
    // Operands load from memory, values of earlier stages from their buffers, on first use.
    auto get = [&](ValueId v) {
      llvm::Value*& x = val[size_t(v)];
      if (x) return x;
      const DType d = body.type(v).dtype;
      if (const int k = operand_index[size_t(v)]; k >= 0) return x = repeated[k] ? repeated[k] : load(d, in_ptr[k], i, dtype_size(d));
      return x = load(d, buffer[size_t(v)], local, buffer_align(e, d));
    };
    for (const Node& node : nodes) {
      if (node.op == Op::Constant) val[size_t(node.outputs[0])] = e.constant(node.attr_array("value"));
    }
    for (size_t k = stages.starts[s]; k < stages.starts[s + 1]; ++k) {
      const Node& node = nodes[k];
      if (node.op == Op::Constant) continue;
      std::vector<llvm::Value*> args;
      for (ValueId v : node.inputs) args.push_back(get(v));
      val[size_t(node.outputs[0])] = e.step(node, body, args);
    }
    for (size_t v = 0; v < buffer.size(); ++v) {
      if (!buffer[v] || stages.stage_of[v] != int(s)) continue;
      const DType d = body.type(ValueId(v)).dtype;
      llvm::Type* st = e.vec(e.stored(d));
      b.CreateAlignedStore(e.to_storage(d, val[v]), b.CreatePointerCast(b.CreateGEP(e.stored(d), buffer[v], local), st->getPointerTo()),
                           llvm::MaybeAlign(buffer_align(e, d)));
    }
    for (size_t j = 0; j < body.outputs().size(); ++j) {
      const ValueId o = body.outputs()[j];
      if (output_stage(o) != int(s)) continue;
      const DType d = body.type(o).dtype;
      llvm::Type* st = e.vec(e.stored(d));
      llvm::Value* addr = b.CreatePointerCast(b.CreateGEP(e.stored(d), out_ptr[j], i), st->getPointerTo());
      const bool nt = vectorised && variant.streaming;
      const uint64_t align = nt ? std::min<uint64_t>(64, uint64_t(lanes) * uint64_t(dtype_size(d))) : uint64_t(dtype_size(d));
      auto* store = b.CreateAlignedStore(e.to_storage(d, get(o)), addr, llvm::MaybeAlign(align));
      if (nt) {
        store->setMetadata(llvm::LLVMContext::MD_nontemporal,
                           llvm::MDNode::get(ctx, llvm::ConstantAsMetadata::get(b.getInt32(1))));
      }
    }
  };

  // Vector part: blocks of kJitStageBlock elements (the last one shorter), each stage a loop over
  // the block. With one stage this is a plain loop over [0, nvec).
  b.SetInsertPoint(vloop);
  llvm::PHINode* block = b.CreatePHI(i64, 2, "block");
  block->addIncoming(llvm::ConstantInt::get(i64, 0), entry);
  llvm::Value* block_len = nstages == 1 ? b.CreateSub(nvec, block) : b.CreateBinaryIntrinsic(
      llvm::Intrinsic::smin, b.CreateSub(nvec, block), llvm::ConstantInt::get(i64, kJitStageBlock));
  for (size_t s = 0; s < nstages; ++s) {
    llvm::BasicBlock* pre = b.GetInsertBlock();
    auto* loop = llvm::BasicBlock::Create(ctx, "stage" + std::to_string(s), fn);
    b.CreateBr(loop);
    b.SetInsertPoint(loop);
    llvm::PHINode* local = b.CreatePHI(i64, 2, "local");
    local->addIncoming(llvm::ConstantInt::get(i64, 0), pre);
    emit_stage(vector, s, b.CreateAdd(block, local), local, repeated_vector, true);
    llvm::Value* next = b.CreateAdd(local, llvm::ConstantInt::get(i64, lanes));
    local->addIncoming(next, b.GetInsertBlock());
    auto* after = llvm::BasicBlock::Create(ctx, "stage" + std::to_string(s) + "_done", fn);
    b.CreateCondBr(b.CreateICmpSLT(next, block_len), loop, after);
    b.SetInsertPoint(after);
  }
  llvm::Value* next_block = b.CreateAdd(block, block_len);
  block->addIncoming(next_block, b.GetInsertBlock());
  b.CreateCondBr(b.CreateICmpSLT(next_block, nvec), vloop, tail_check);

  b.SetInsertPoint(tail_check);
  b.CreateCondBr(b.CreateICmpSLT(nvec, n), tail, done);

  b.SetInsertPoint(tail);
  llvm::PHINode* j = b.CreatePHI(i64, 2, "j");
  j->addIncoming(nvec, tail_check);
  for (size_t s = 0; s < nstages; ++s) emit_stage(scalar, s, j, llvm::ConstantInt::get(i64, 0), repeated_scalar, false);
  llvm::Value* jnext = b.CreateAdd(j, llvm::ConstantInt::get(i64, 1));
  j->addIncoming(jnext, b.GetInsertBlock());
  b.CreateCondBr(b.CreateICmpSLT(jnext, n), tail, done);

  b.SetInsertPoint(done);
  // Non-temporal stores are weakly ordered: fence them before other threads read the outputs.
  if (variant.streaming && x86) b.CreateCall(llvm::Intrinsic::getDeclaration(&m, llvm::Intrinsic::x86_sse_sfence));
  b.CreateRetVoid();
}

// The cache key: the body's text without its name, plus the variant.
std::string structure_key(const Graph& body, const JitVariant& v) {
  std::string text = print_graph(body);
  size_t open = text.find('(');
  std::string repeated;
  for (size_t k = 0; k < body.inputs().size(); ++k) repeated += v.is_repeated(k) ? '1' : '0';
  return text.substr(open == std::string::npos ? 0 : open) + "|repeated=" + repeated +
         "|streaming=" + (v.streaming ? "1" : "0") + "|avx512=" + (v.avx512 ? "1" : "0");
}

}  // namespace

bool jit_built() { return true; }

JitStats jit_stats() {
  JitEngine& eng = engine();
  std::lock_guard<std::mutex> lock(eng.mu);
  return eng.stats;
}

Expected<std::shared_ptr<const JitKernel>> jit_compile(const Graph& body, JitVariant variant) {
  std::string unsupported = jit_unsupported_step(body);
  if (!unsupported.empty()) return Status::unimplemented("no generated code for step " + unsupported);
  JitEngine& eng = engine();
  if (!eng.lljit) return Status::unimplemented("CPU code generation could not start: " + eng.error);
  const std::string key = structure_key(body, variant);
  std::lock_guard<std::mutex> lock(eng.mu);
  auto found = eng.cache.find(key);
  if (found != eng.cache.end()) {
    if (auto kernel = found->second.lock()) {
      ++eng.stats.cache_hits;
      return kernel;
    }
  }
  const std::string name = "fusebox_region_" + std::to_string(eng.next_id++);
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto mod = std::make_unique<llvm::Module>(name, *ctx);
  mod->setDataLayout(eng.lljit->getDataLayout());
  mod->setTargetTriple(eng.lljit->getTargetTriple().str());
  build_kernel(*mod, name, body, variant, eng.x86, eng.avx512 && variant.avx512);
  std::string verify_errors;
  llvm::raw_string_ostream os(verify_errors);
  if (llvm::verifyModule(*mod, &os)) return Status::internal("generated region code does not verify: " + os.str());
  // FUSEBOX_JIT_DUMP=1 prints each generated module (LLVM IR) to stderr, for `llc` and reading.
  if (const char* dump = std::getenv("FUSEBOX_JIT_DUMP"); dump && std::string_view(dump) == "1") mod->print(llvm::errs(), nullptr);
  llvm::orc::ResourceTrackerSP tracker = eng.lljit->getMainJITDylib().createResourceTracker();
  if (llvm::Error err = eng.lljit->addIRModule(tracker, llvm::orc::ThreadSafeModule(std::move(mod), std::move(ctx)))) {
    return Status::internal("adding generated region code failed: " + llvm::toString(std::move(err)));
  }
  auto symbol = eng.lljit->lookup(name);
  if (!symbol) {
    llvm::consumeError(tracker->remove());
    return Status::internal("compiling generated region code failed: " + llvm::toString(symbol.takeError()));
  }
  auto fn = reinterpret_cast<JitKernelFn>(static_cast<uintptr_t>(symbol->getAddress()));
  // The kernel's destructor takes the engine lock to remove its code; it never runs under it here.
  std::shared_ptr<const JitKernel> kernel = std::make_shared<LlvmKernel>(std::move(tracker), fn);
  // Entries of destroyed kernels are swept every 256 compiles, so the cache stays near the
  // number of live kernels.
  if (++eng.stats.compiled % 256 == 0) std::erase_if(eng.cache, [](const auto& e) { return e.second.expired(); });
  eng.cache[key] = kernel;
  return kernel;
}

#endif  // FUSEBOX_HAVE_LLVM

}  // namespace fusebox::cpu
