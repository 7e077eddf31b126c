#include "backends/cuda/transform_codegen.h"

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <limits>
#include <sstream>

#include "backends/cuda/prelude.h"
#include "backends/cuda/region_codegen.h"

namespace fusebox::cuda {

namespace {

// Storage of dtype d -> double.
std::string to_double(DType d, const std::string& s) {
  switch (d) {
    case DType::F16: return "double(fb_f16_load(" + s + "))";
    case DType::BF16: return "double(fb_bf16_load(" + s + "))";
    case DType::Bool: return "(" + s + " != 0 ? 1.0 : 0.0)";
    default: return "double(" + s + ")";
  }
}

template <typename T>
std::string limit_literal(bool max) {
  const T v = max ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min();
  if constexpr (std::is_signed_v<T>) {
    if (int64_t(v) == std::numeric_limits<int64_t>::min()) return "(-9223372036854775807ll - 1)";
    return "i64(" + std::to_string(int64_t(v)) + "ll)";
  } else {
    return "u64(" + std::to_string(uint64_t(v)) + "ull)";
  }
}

// A device function rounding a double into storage of dtype d as the CPU's store_double does.
std::string from_double_function(DType d, const std::string& fn) {
  const std::string S = storage_type_name(d);
  std::string body;
  switch (d) {
    case DType::F32: body = "return float(v);"; break;
    case DType::F64: body = "return v;"; break;
    case DType::F16: body = "return fb_f16_store(float(v));"; break;
    case DType::BF16: body = "return fb_bf16_store(float(v));"; break;
    case DType::Bool: body = "return u8(v != 0.0 ? 1 : 0);"; break;
    default: {
      std::string lo, hi;
      switch (d) {
        case DType::I8: lo = limit_literal<int8_t>(false), hi = limit_literal<int8_t>(true); break;
        case DType::U8: lo = limit_literal<uint8_t>(false), hi = limit_literal<uint8_t>(true); break;
        case DType::I16: lo = limit_literal<int16_t>(false), hi = limit_literal<int16_t>(true); break;
        case DType::U16: lo = limit_literal<uint16_t>(false), hi = limit_literal<uint16_t>(true); break;
        case DType::I32: lo = limit_literal<int32_t>(false), hi = limit_literal<int32_t>(true); break;
        case DType::U32: lo = limit_literal<uint32_t>(false), hi = limit_literal<uint32_t>(true); break;
        case DType::I64: lo = limit_literal<int64_t>(false), hi = limit_literal<int64_t>(true); break;
        default: lo = limit_literal<uint64_t>(false), hi = limit_literal<uint64_t>(true); break;
      }
      body = "v = round(v); if (!(v == v)) return " + S + "(0); if (v <= double(" + lo + ")) return " + S + "(" + lo +
             "); if (v >= double(" + hi + ")) return " + S + "(" + hi + "); return " + S + "(v);";
    }
  }
  return "__device__ __forceinline__ " + S + " " + fn + "(double v) { " + body + " }\n";
}

}  // namespace

std::string device_transform_unsupported(const TransformPlan& plan) {
  if (plan.axes.size() > kMaxTransformAxes) return "a transform over more than 16 axes";
  return "";
}

Expected<std::shared_ptr<const DeviceTransform>> make_device_transform(Context* context, const TransformPlan& p,
                                                                       const std::string& name, bool index_only, TapWalk walk) {
  if (std::string why = device_transform_unsupported(p); !why.empty()) return Status::unimplemented(why);
  if (index_only) {
    bool constant = false;
    for (const auto& ax : p.axes) constant = constant || std::find(ax.off.begin(), ax.off.end(), int64_t(-1)) != ax.off.end();
    if (p.linear || constant) return Status::unimplemented("a transform that interpolates or pads is not a permutation");
  }
  auto t = std::make_shared<DeviceTransform>();
  t->name = name;
  t->src_dtype = p.src_dtype;
  t->out_dtype = p.out_dtype;
  t->out_shape = p.out_shape;
  const size_t A = p.axes.size();
  // Tables: per axis count (u8), off (i64), step (i32), weight (double); 8-byte aligned pieces.
  std::vector<uint8_t> blob;
  std::vector<size_t> at(4 * A);
  auto put = [&](const void* data, size_t bytes) {
    blob.resize((blob.size() + 7) / 8 * 8);
    const size_t where = blob.size();
    blob.insert(blob.end(), static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + bytes);
    return where;
  };
  for (size_t a = 0; a < A; ++a) {
    const auto& ax = p.axes[a];
    at[4 * a + 0] = put(ax.count.data(), ax.count.size());
    at[4 * a + 1] = put(ax.off.data(), ax.off.size() * 8);
    at[4 * a + 2] = put(ax.step.data(), ax.step.size() * 4);
    at[4 * a + 3] = put(ax.weight.data(), ax.weight.size() * 8);
  }
  blob.resize(std::max<size_t>(8, (blob.size() + 7) / 8 * 8));
  CUdeviceptr base = 0;
  if (context) {
    FUSEBOX_ASSIGN_OR_RETURN(t->tables, context->allocate(blob.size()));
    FUSEBOX_RETURN_IF_ERROR(context->make_current());
    const Driver& d = context->driver();
    base = reinterpret_cast<CUdeviceptr>(t->tables.get());
    FUSEBOX_RETURN_IF_ERROR(d.check(d.cuMemcpyHtoDAsync(base, blob.data(), blob.size(), context->stream()), "uploading a transform plan"));
    FUSEBOX_RETURN_IF_ERROR(d.check(d.cuStreamSynchronize(context->stream()), "uploading a transform plan"));
  }
  // The argument struct: four arrays of A device pointers, in that order.
  for (int piece = 0; piece < 4; ++piece) {
    for (size_t a = 0; a < A; ++a) {
      const uint64_t ptr = base ? uint64_t(base + at[4 * a + size_t(piece)]) : 0;
      const uint8_t* b = reinterpret_cast<const uint8_t*>(&ptr);
      t->axes_arg.insert(t->axes_arg.end(), b, b + 8);
    }
  }
  if (A == 0) t->axes_arg.assign(32, 0);  // one (null) slot per array

  const std::string S = storage_type_name(p.src_dtype), O = storage_type_name(p.out_dtype);
  const size_t R = p.out_axes;
  const int post_after = p.linear ? p.resize_step : -1;
  std::ostringstream os;
  const size_t slots = std::max<size_t>(A, 1);
  os << "struct " << name << "_axes { const u8* count[" << slots << "]; const i64* off[" << slots << "]; const i32* step[" << slots
     << "]; const double* weight[" << slots << "]; };\n";
  os << from_double_function(p.out_dtype, name + "_store");
  const DType Rd = p.linear ? p.resize_dtype : p.out_dtype;
  os << from_double_function(Rd, name + "_round_store");
  os << "__device__ __forceinline__ double " << name << "_const(int s) {\n  switch (s) {\n";
  for (size_t s = 0; s < p.const_value.size(); ++s) {
    if (p.const_value[s] != 0.0) os << "    case " << s << ": return " << double_literal(p.const_value[s]) << ";\n";
  }
  os << "  }\n  return 0.0;\n}\n";
  if (index_only) {
    os << "__device__ __forceinline__ i64 " << name << "(i64 e, const " << name << "_axes& ax) {\n";
  } else {
    os << "__device__ __forceinline__ " << O << " " << name << "(i64 e, const " << S << "* __restrict__ src, const " << name
       << "_axes& ax) {\n";
  }
  os << "  i64 index[" << slots << "];\n  i64 rest = e;\n";
  for (size_t a = R; a-- > 0;) {
    os << "  index[" << a << "] = rest % " << p.out_shape[a] << "ll; rest /= " << p.out_shape[a] << "ll;\n";
  }
  for (size_t a = R; a < A; ++a) os << "  index[" << a << "] = 0;\n";
  os << "  int post = -1, pre = -1;\n  i64 base = 0;\n";
  os << "#pragma unroll\n  for (int d = 0; d < " << A << "; ++d) {\n";
  os << "    const i64 k = 2 * index[d];\n    if (ax.count[d][index[d]] == 2) continue;\n    const i64 o = ax.off[d][k];\n";
  os << "    if (o == -1) { const int st = ax.step[d][k]; if (st > " << post_after
     << ") post = max(post, st); else pre = max(pre, st); } else base += o;\n  }\n";
  os << "  if (post >= 0) return " << name << "_store(" << name << "_const(post));\n";
  if (index_only) {
    os << "  return base;\n";
  } else if (!p.linear) {
    if (p.src_dtype == p.out_dtype) {
      os << "  return src[base];\n";
    } else {
      os << "  return " << name << "_store(" << to_double(p.src_dtype, "src[base]") << ");\n";
    }
  } else if (walk == TapWalk::Combos) {
    // The axes that may hold two taps, in the interpolation's order; the combos run through
    // them lexicographically, the last fastest (the reference's summation order).
    os << "  int split[" << std::max<size_t>(p.weight_order.size(), 1) << "];\n  int splits = 0;\n";
    for (int a : p.weight_order) os << "  if (ax.count[" << a << "][index[" << a << "]] == 2) split[splits++] = " << a << ";\n";
    os << "  double acc = 0.0;\n";
    os << "  for (int combo = 0; combo < (1 << splits); ++combo) {\n";
    os << "    double w = 1.0;\n    i64 off = base;\n    int cpre = pre;\n";
    os << "    for (int s = 0; s < splits; ++s) {\n";
    os << "      const int a = split[s];\n      const i64 k = 2 * index[a] + ((combo >> (splits - 1 - s)) & 1);\n";
    os << "      w *= ax.weight[a][k];\n      const i64 o = ax.off[a][k];\n";
    os << "      if (o == -1) cpre = max(cpre, ax.step[a][k]); else off += o;\n    }\n";
    os << "    acc += w * (cpre >= 0 ? " << name << "_const(cpre) : " << to_double(p.src_dtype, "src[off]") << ");\n  }\n";
    os << "  return " << name << "_store(" << to_double(Rd, name + "_round_store(acc)") << ");\n";
  } else {
    // The axes that may hold two taps, in the interpolation's order, as nested loops (the last
    // fastest: the reference's summation order over the axes that do hold two); an axis holding
    // one tap runs once and adds nothing (its tap is in `base`). Every axis is known here, so
    // nothing is indexed at run time (no local memory).
    const std::vector<int>& wo = p.weight_order;
    for (size_t j = 0; j < wo.size(); ++j) {
      const std::string a = std::to_string(wo[j]), J = std::to_string(j);
      os << "  const bool two" << J << " = ax.count[" << a << "][index[" << a << "]] == 2;\n";
      os << "  const i64 k" << J << " = 2 * index[" << a << "];\n";
    }
    os << "  double acc = 0.0;\n";
    std::string indent = "  ";
    for (size_t j = 0; j < wo.size(); ++j) {
      const std::string a = std::to_string(wo[j]), J = std::to_string(j);
      os << indent << "for (int c" << J << " = 0; c" << J << " < (two" << J << " ? 2 : 1); ++c" << J << ") {\n";
      indent += "  ";
      os << indent << "const double w" << J << " = ax.weight[" << a << "][k" << J << " + c" << J << "];\n";
      os << indent << "const i64 o" << J << " = ax.off[" << a << "][k" << J << " + c" << J << "];\n";
      os << indent << "const int s" << J << " = ax.step[" << a << "][k" << J << " + c" << J << "];\n";
    }
    os << indent << "double w = 1.0;\n" << indent << "i64 off = base;\n" << indent << "int cpre = pre;\n";
    for (size_t j = 0; j < wo.size(); ++j) {
      const std::string J = std::to_string(j);
      os << indent << "if (two" << J << ") { w *= w" << J << "; if (o" << J << " == -1) cpre = max(cpre, s" << J << "); else off += o" << J
         << "; }\n";
    }
    os << indent << "acc += w * (cpre >= 0 ? " << name << "_const(cpre) : " << to_double(p.src_dtype, "src[off]") << ");\n";
    for (size_t j = wo.size(); j-- > 0;) {
      indent.resize(indent.size() - 2);
      os << indent << "}\n";
    }
    // Rounded once at the resize's dtype, then stored in the result's.
    os << "  return " << name << "_store(" << to_double(Rd, name + "_round_store(acc)") << ");\n";
  }
  os << "}\n";
  t->source = os.str();
  return std::shared_ptr<const DeviceTransform>(std::move(t));
}

std::string transform_kernel_source(const DeviceTransform& t) {
  std::ostringstream os;
  os << prelude_source() << "\n" << t.source;
  const std::string S = storage_type_name(t.src_dtype), O = storage_type_name(t.out_dtype);
  os << "extern \"C\" __global__ void __launch_bounds__(" << kRegionThreads << ") fb_transform(i64 n, const void* src_, void* out_, const "
     << t.name << "_axes axes) {\n";
  os << "  const " << S << "* __restrict__ src = (const " << S << "*)src_;\n  " << O << "* __restrict__ out = (" << O << "*)out_;\n";
  os << "  for (i64 e = i64(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += i64(gridDim.x) * blockDim.x) out[e] = "
     << t.name << "(e, src, axes);\n}\n";
  return os.str();
}

}  // namespace fusebox::cuda
