// MatmulKernel: numpy matmul through oneDNN's matmul primitive, the epilogue as its bias input
// and post-ops (residual: a sum over dst prefilled with it; activation: eltwise).
//
// Shapes are brought into the form oneDNN takes before anything is built:
//   1-D operands are promoted ([K] -> [1,K] for a, [K,1] for b; the result's element order is
//   the same without the dropped dim); batch dims of 1 in the result are dropped, and adjacent
//   batch dims broadcast alike (both operands full, or one operand 1) merge into one, so any rank
//   becomes a few dims with 1 where an operand broadcasts (oneDNN's batch broadcast). When b has
//   no batch at all (a rank-2 weight against a batched a), the batch folds into M: one
//   [B*M, K] x [K, N] product, oneDNN's fastest case. Those dims are also the cache key.
#include <cstring>
#include <unordered_map>

#include "backends/cpu/onednn/common.h"
#include "backends/cpu/onednn/onednn_kernels.h"

namespace fusebox::cpu::onednn {

#ifndef FUSEBOX_HAVE_DNNL

struct MatmulKernel::Impl {};
MatmulKernel::MatmulKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MatmulKernel::~MatmulKernel() = default;
Expected<std::unique_ptr<MatmulKernel>> MatmulKernel::create(const MatmulSpec&) {
  return Status::unimplemented("onednn matmul: fusebox was built without oneDNN (libdnnl-dev)");
}
Status MatmulKernel::run(const Array&, const Array&, const Array*, const Array*, Array&) const {
  return Status::unimplemented("onednn matmul: fusebox was built without oneDNN (libdnnl-dev)");
}

#else

namespace {

using dnnl::memory;

struct MatmulDims {
  memory::dims src, wei, dst, bias;  // bias empty when there is none
  int64_t k = 0;
};

memory::desc plain_desc(const memory::dims& dims) {
  memory::dims strides(dims.size());
  int64_t s = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = s;
    s *= dims[i];
  }
  return memory::desc(dims, memory::data_type::f32, strides);
}

Expected<MatmulDims> plan(const Array& a, const Array& b, const Array* bias, const Array& out) {
  std::vector<int64_t> as = a.shape(), bs = b.shape();
  if (as.empty() || bs.empty()) {
    return Status::invalid("onednn matmul: operands must be at least rank 1, got " + a.type_string() + " x " +
                           b.type_string());
  }
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  if (bs[bs.size() - 2] != k) {
    return Status::invalid("onednn matmul: contraction dims differ: " + a.type_string() + " x " + b.type_string());
  }
  size_t rank = std::max(as.size(), bs.size());
  as.insert(as.begin(), rank - as.size(), 1);
  bs.insert(bs.begin(), rank - bs.size(), 1);
  memory::dims ba, bb, bd;  // merged batch dims of a, b, result
  int prev = 0;
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < rank; ++i) {
    int64_t da = as[i], db = bs[i];
    if (da != db && da != 1 && db != 1) {
      return Status::invalid("onednn matmul: batch dims do not broadcast: " + a.type_string() + " x " +
                             b.type_string());
    }
    int64_t d = da == 1 ? db : da;
    batch *= d;
    if (d == 1) continue;
    int pattern = (da == d ? 1 : 0) | (db == d ? 2 : 0);
    if (pattern == prev) {
      ba.back() *= da;
      bb.back() *= db;
      bd.back() *= d;
    } else {
      ba.push_back(da);
      bb.push_back(db);
      bd.push_back(d);
      prev = pattern;
    }
  }
  if (out.numel() != batch * m * n) {
    return Status::invalid("onednn matmul: result " + out.type_string() + " does not fit " + a.type_string() +
                           " x " + b.type_string());
  }
  MatmulDims d;
  d.k = k;
  bool b_batched = false;
  for (int64_t v : bb) b_batched |= v != 1;
  if (!b_batched) {
    d.src = {batch * m, k};
    d.wei = {k, n};
    d.dst = {batch * m, n};
  } else {
    d.src = ba, d.wei = bb, d.dst = bd;
    d.src.insert(d.src.end(), {m, k});
    d.wei.insert(d.wei.end(), {k, n});
    d.dst.insert(d.dst.end(), {m, n});
  }
  if (bias) {
    const auto& s = bias->shape();
    int64_t last = s.empty() ? 1 : s.back();
    bool ok = (last == 1 || last == n) && bias->numel() == last;
    if (!ok) {
      return Status::invalid("onednn matmul: bias " + bias->type_string() + " is not [N], [1] or [1,..,1,N] for N = " +
                             std::to_string(n));
    }
    d.bias.assign(d.dst.size(), 1);
    d.bias.back() = last;
  }
  return d;
}

std::vector<int64_t> cache_key(const MatmulDims& d) {
  std::vector<int64_t> key;
  for (const memory::dims* v : {&d.src, &d.wei, &d.dst, &d.bias}) {
    key.insert(key.end(), v->begin(), v->end());
    key.push_back(-1);
  }
  return key;
}

struct MatmulEntry {
  memory::desc src, wei, dst, bias, scratchpad;
  dnnl::matmul prim;
};

}  // namespace

struct MatmulKernel::Impl {
  MatmulSpec spec;
  ShapeCache<MatmulEntry> cache;

  Expected<std::shared_ptr<const MatmulEntry>> build(const MatmulDims& d) const {
    auto e = std::make_shared<MatmulEntry>();
    e->src = plain_desc(d.src);
    e->wei = plain_desc(d.wei);
    e->dst = plain_desc(d.dst);
    if (!d.bias.empty()) e->bias = plain_desc(d.bias);
    dnnl::post_ops ops;
    // The residual is copied into dst and added by a `sum` post-op: gemm:jit runs binary_add
    // post-ops as a slow separate pass (see conv.cpp).
    if (spec.ep.residual) ops.append_sum(1.f);
    FUSEBOX_RETURN_IF_ERROR(append_activation(spec.ep, ops));
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::matmul::desc desc(e->src, e->wei, e->bias, e->dst);
    dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
    e->scratchpad = pd.scratchpad_desc();
    e->prim = dnnl::matmul(pd);
    return std::shared_ptr<const MatmulEntry>(std::move(e));
  }
};

MatmulKernel::MatmulKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MatmulKernel::~MatmulKernel() = default;

Expected<std::unique_ptr<MatmulKernel>> MatmulKernel::create(const MatmulSpec& spec) {
  FUSEBOX_RETURN_IF_ERROR(check_dtype(spec.dtype, "matmul"));
  // Validate the activation once here, so a bad epilogue fails at compile time, not per shape.
  try {
    dnnl::post_ops probe;
    FUSEBOX_RETURN_IF_ERROR(append_activation(spec.ep, probe));
  } catch (const dnnl::error& e) {
    return from_dnnl(e, "matmul epilogue");
  }
  auto impl = std::make_unique<Impl>();
  impl->spec = spec;
  return std::unique_ptr<MatmulKernel>(new MatmulKernel(std::move(impl)));
}

Status MatmulKernel::run(const Array& a, const Array& b, const Array* bias, const Array* residual, Array& out) const {
  const Epilogue& ep = impl_->spec.ep;
  for (const Array* x : {&a, &b, bias, residual, static_cast<const Array*>(&out)}) {
    if (x && x->dtype() != impl_->spec.dtype) {
      return Status::invalid("onednn matmul: operand " + x->type_string() + " is not of the kernel's dtype");
    }
  }
  if (ep.bias != (bias != nullptr) || ep.residual != (residual != nullptr)) {
    return Status::invalid("onednn matmul: bias/residual operands do not match the kernel's epilogue");
  }
  if (residual && residual->shape() != out.shape()) {
    return Status::invalid("onednn matmul: residual " + residual->type_string() + " is not of the result's shape " +
                           out.type_string());
  }
  FUSEBOX_ASSIGN_OR_RETURN(MatmulDims dims, plan(a, b, bias, out));
  if (out.numel() == 0) return Status::ok();
  if (dims.k == 0) return Status::unimplemented("onednn matmul: K = 0 is left to the reference kernel");
  try {
    FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const MatmulEntry> e,
                             impl_->cache.get(cache_key(dims), [&] { return impl_->build(dims); }));
    const dnnl::engine& eng = cpu_engine();
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, memory(e->src, eng, data_ptr(a))},
        {DNNL_ARG_WEIGHTS, memory(e->wei, eng, data_ptr(b))},
        {DNNL_ARG_DST, memory(e->dst, eng, out.raw())},
        {DNNL_ARG_SCRATCHPAD, primitive_scratchpad(e->scratchpad)},
    };
    if (bias) args.emplace(DNNL_ARG_BIAS, memory(e->bias, eng, data_ptr(*bias)));
    if (residual) std::memcpy(out.raw(), residual->raw(), residual->nbytes());
    dnnl::stream stream(eng);
    e->prim.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    return from_dnnl(e, "matmul " + a.type_string() + " x " + b.type_string());
  } catch (const std::exception& e) {
    return Status::internal(std::string("onednn matmul: ") + e.what());
  }
  return Status::ok();
}

#endif  // FUSEBOX_HAVE_DNNL

}  // namespace fusebox::cpu::onednn
