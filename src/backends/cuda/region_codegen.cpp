#include "backends/cuda/region_codegen.h"

#include <cinttypes>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "backends/cuda/prelude.h"
#include "backends/cuda/transform_codegen.h"
#include "ir/array.h"

namespace fusebox::cuda {

namespace {

// What memory holds for a dtype, and what steps compute in.
const char* storage_type(DType d) {
  switch (d) {
    case DType::F32: return "float";
    case DType::F64: return "double";
    case DType::F16:
    case DType::BF16: return "u16";
    case DType::Bool: return "u8";
    case DType::I8: return "i8";
    case DType::U8: return "u8";
    case DType::I16: return "i16";
    case DType::U16: return "u16";
    case DType::I32: return "i32";
    case DType::U32: return "u32";
    case DType::I64: return "i64";
    case DType::U64: return "u64";
  }
  return "?";
}

const char* compute_type(DType d) {
  switch (d) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: return "float";
    case DType::F64: return "double";
    case DType::Bool: return "bool";
    default: return storage_type(d);
  }
}

std::string load_expr(DType d, const std::string& s) {
  switch (d) {
    case DType::F16: return "fb_f16_load(" + s + ")";
    case DType::BF16: return "fb_bf16_load(" + s + ")";
    case DType::Bool: return "(" + s + " != 0)";
    default: return s;
  }
}

std::string store_expr(DType d, const std::string& c) {
  switch (d) {
    case DType::F16: return "fb_f16_store(" + c + ")";
    case DType::BF16: return "fb_bf16_store(" + c + ")";
    case DType::Bool: return "u8(" + c + " ? 1 : 0)";
    default: return c;
  }
}

// Exact literals: floats by their bits (NaN and infinities included).
std::string float_literal(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  char buf[40];
  std::snprintf(buf, sizeof(buf), "__uint_as_float(0x%08" PRIx32 "u)", bits);
  return buf;
}
// A double attribute converted to a compute type as the reference does (C(v)).
std::string literal_of(DType d, double v) {
  if (d == DType::F64) return double_literal(v);
  if (is_float(d)) return float_literal(float(v));
  return std::string(compute_type(d)) + "(" + std::to_string(int64_t(v)) + ")";
}

std::string constant_literal(const Array& a) {
  const void* p = a.raw();
  switch (a.dtype()) {
    case DType::F32: return float_literal(*static_cast<const float*>(p));
    case DType::F64: return double_literal(*static_cast<const double*>(p));
    case DType::F16: return float_literal(f16_to_f32(*static_cast<const uint16_t*>(p)));
    case DType::BF16: return float_literal(bf16_to_f32(*static_cast<const uint16_t*>(p)));
    case DType::Bool: return *static_cast<const uint8_t*>(p) ? "true" : "false";
    case DType::I8: return "i8(" + std::to_string(*static_cast<const int8_t*>(p)) + ")";
    case DType::U8: return "u8(" + std::to_string(*static_cast<const uint8_t*>(p)) + ")";
    case DType::I16: return "i16(" + std::to_string(*static_cast<const int16_t*>(p)) + ")";
    case DType::U16: return "u16(" + std::to_string(*static_cast<const uint16_t*>(p)) + ")";
    case DType::I32: return "i32(" + std::to_string(*static_cast<const int32_t*>(p)) + ")";
    case DType::U32: return "u32(" + std::to_string(*static_cast<const uint32_t*>(p)) + "u)";
    case DType::I64: {
      const int64_t v = *static_cast<const int64_t*>(p);
      return v == std::numeric_limits<int64_t>::min() ? "(-9223372036854775807ll - 1)" : "i64(" + std::to_string(v) + "ll)";
    }
    case DType::U64: return "u64(" + std::to_string(*static_cast<const uint64_t*>(p)) + "ull)";
  }
  return "0";
}

// Integer clip bounds as the reference computes them: rounded inward, saturated to the type.
template <typename T>
std::pair<std::string, std::string> int_bounds(double lo, double hi) {
  const double tmin = double(std::numeric_limits<T>::min()), tmax = double(std::numeric_limits<T>::max());
  auto bound = [&](double v) -> T {
    if (v <= tmin) return std::numeric_limits<T>::min();
    if (v >= tmax) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  };
  auto text = [](T v) {
    if constexpr (std::is_signed_v<T>) {
      if (int64_t(v) == std::numeric_limits<int64_t>::min()) return std::string("(-9223372036854775807ll - 1)");
      return "(" + std::to_string(int64_t(v)) + "ll)";
    } else {
      return "(" + std::to_string(uint64_t(v)) + "ull)";
    }
  };
  return {text(bound(std::ceil(lo))), text(bound(std::floor(hi)))};
}

class BodyWriter {
 public:
  explicit BodyWriter(const Graph& body) : body_(body) {}

  // The device function `name(inputs..., outputs&...)` computing every step.
  Status write(std::ostringstream& os, const std::string& function = "fb_body") {
    os << "__device__ __forceinline__ void " << function << "(";
    const auto& ins = body_.inputs();
    for (size_t k = 0; k < ins.size(); ++k) {
      os << (k ? ", " : "") << compute_type(dtype(ins[k])) << " " << name(ins[k]);
    }
    for (size_t j = 0; j < body_.outputs().size(); ++j) {
      os << (ins.empty() && j == 0 ? "" : ", ") << compute_type(dtype(body_.outputs()[j])) << "& y" << j;
    }
    os << ") {\n";
    for (const Node& n : body_.nodes()) FUSEBOX_RETURN_IF_ERROR(step(os, n));
    for (size_t j = 0; j < body_.outputs().size(); ++j) os << "  y" << j << " = " << name(body_.outputs()[j]) << ";\n";
    os << "}\n";
    return Status::ok();
  }

 private:
  DType dtype(ValueId v) const { return body_.type(v).dtype; }
  static std::string name(ValueId v) { return "v" + std::to_string(v); }

  Status unsupported(const Node& n, DType d) const {
    return Status::unimplemented("no CUDA code for region step " + std::string(n.info().keyword) + " on " +
                                 std::string(dtype_name(d)));
  }

  Status step(std::ostringstream& os, const Node& n) {
    const DType out = dtype(n.outputs[0]);
    const std::string y = name(n.outputs[0]);
    if (n.op == Op::Constant) {
      os << "  const " << compute_type(out) << " " << y << " = " << constant_literal(n.attr_array("value")) << ";\n";
      return Status::ok();
    }
    const DType dt = dtype(n.inputs[0]);
    std::vector<std::string> x;
    for (ValueId v : n.inputs) x.push_back(name(v));
    FUSEBOX_ASSIGN_OR_RETURN(std::string e, expression(n, dt, out, x));
    if (out == DType::F16) e = "fb_f16_round(" + e + ")";
    if (out == DType::BF16) e = "fb_bf16_round(" + e + ")";
    os << "  const " << compute_type(out) << " " << y << " = " << e << ";\n";
    return Status::ok();
  }

  Expected<std::string> expression(const Node& n, DType dt, DType out, const std::vector<std::string>& x) {
    const bool fl = is_float(dt), in = is_integer(dt);
    const std::string C = compute_type(dt);
    auto call = [&](const std::string& f) {
      std::string s = f + "(";
      for (size_t k = 0; k < x.size(); ++k) s += (k ? ", " : "") + x[k];
      return s + ")";
    };
    switch (n.op) {
      case Op::Neg: return fl ? "(-" + x[0] + ")" : in ? call("fb_neg_i") : Expected<std::string>(unsupported(n, dt));
      case Op::Abs: return fl ? call("fb_fabs") : in ? call("fb_abs_i") : Expected<std::string>(unsupported(n, dt));
      case Op::Relu: return fl ? call("fb_relu_f") : in ? call("fb_relu_i") : Expected<std::string>(unsupported(n, dt));
      case Op::Exp: case Op::Log: case Op::Sqrt: case Op::Tanh: case Op::Erf: case Op::Sin: case Op::Cos:
      case Op::Tan: case Op::Asin: case Op::Acos: case Op::Atan: case Op::Sinh: case Op::Cosh: case Op::Asinh:
      case Op::Acosh: case Op::Atanh: case Op::Floor: case Op::Ceil:
        if (!fl) return unsupported(n, dt);
        return call("fb_" + std::string(n.info().keyword));
      case Op::Rsqrt: case Op::Reciprocal: case Op::Sigmoid: case Op::Silu: case Op::HardSwish: case Op::Round:
        if (!fl) return unsupported(n, dt);
        return call("fb_" + std::string(n.info().keyword));
      case Op::Gelu:
        if (!fl) return unsupported(n, dt);
        return call(n.attr_str("approximate") == "tanh" ? "fb_gelu_tanh" : "fb_gelu");
      case Op::LeakyRelu: {
        if (!fl) return unsupported(n, dt);
        const std::string a = literal_of(dt, n.attr_f64("alpha"));
        return "(" + x[0] + " < " + C + "(0) ? " + a + " * " + x[0] + " : " + x[0] + ")";
      }
      case Op::HardSigmoid: {
        if (!fl) return unsupported(n, dt);
        const std::string v = "(" + literal_of(dt, n.attr_f64("alpha")) + " * " + x[0] + " + " + literal_of(dt, n.attr_f64("beta")) + ")";
        const std::string lo = "(" + v + " < " + C + "(0) ? " + C + "(0) : " + v + ")";
        return "(" + lo + " > " + C + "(1) ? " + C + "(1) : " + lo + ")";
      }
      case Op::Clip: {
        double lo = n.has_attr("min") ? n.attr_f64("min") : -INFINITY;
        double hi = n.has_attr("max") ? n.attr_f64("max") : INFINITY;
        if (lo != lo) lo = -INFINITY;
        if (hi != hi) hi = INFINITY;
        std::string clo, chi;
        if (fl) {
          clo = literal_of(dt, lo);
          chi = literal_of(dt, hi);
          if (dt == DType::F64) {
            clo = double_literal(lo);
            chi = double_literal(hi);
          }
        } else if (in) {
          std::pair<std::string, std::string> b;
          switch (dt) {
            case DType::I8: b = int_bounds<int8_t>(lo, hi); break;
            case DType::U8: b = int_bounds<uint8_t>(lo, hi); break;
            case DType::I16: b = int_bounds<int16_t>(lo, hi); break;
            case DType::U16: b = int_bounds<uint16_t>(lo, hi); break;
            case DType::I32: b = int_bounds<int32_t>(lo, hi); break;
            case DType::U32: b = int_bounds<uint32_t>(lo, hi); break;
            case DType::I64: b = int_bounds<int64_t>(lo, hi); break;
            default: b = int_bounds<uint64_t>(lo, hi); break;
          }
          clo = C + b.first;
          chi = C + b.second;
        } else {
          return unsupported(n, dt);
        }
        const std::string v = "(" + x[0] + " < " + clo + " ? " + clo + " : " + x[0] + ")";
        return "(" + v + " > " + chi + " ? " + chi + " : " + v + ")";
      }
      case Op::Not:
        if (dt != DType::Bool) return unsupported(n, dt);
        return "(!" + x[0] + ")";
      case Op::Identity: return x[0];
      case Op::Cast: return cast(x[0], dt, out);
      case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: {
        static const char* const ops[] = {"+", "-", "*", "/"};
        static const char* const ints[] = {"fb_add_i", "fb_sub_i", "fb_mul_i", "fb_div_i"};
        const int k = n.op == Op::Add ? 0 : n.op == Op::Sub ? 1 : n.op == Op::Mul ? 2 : 3;
        if (fl) return "(" + x[0] + " " + ops[k] + " " + x[1] + ")";
        if (in) return call(ints[k]);
        return unsupported(n, dt);
      }
      case Op::Pow: return fl ? call("fb_pow") : in ? call("fb_pow_i") : Expected<std::string>(unsupported(n, dt));
      case Op::Max: return fl ? call("fb_max_f") : in ? call("fb_max_i") : Expected<std::string>(unsupported(n, dt));
      case Op::Min: return fl ? call("fb_min_f") : in ? call("fb_min_i") : Expected<std::string>(unsupported(n, dt));
      case Op::Mod:
        if (n.attr_bool("fmod")) return fl ? call("fb_fmod") : in ? call("fb_fmod_i") : Expected<std::string>(unsupported(n, dt));
        return fl ? call("fb_mod_f") : in ? call("fb_mod_i") : Expected<std::string>(unsupported(n, dt));
      case Op::Equal: return "(" + x[0] + " == " + x[1] + ")";
      case Op::NotEqual: return "(" + x[0] + " != " + x[1] + ")";
      case Op::Less: return "(" + x[0] + " < " + x[1] + ")";
      case Op::LessEqual: return "(" + x[0] + " <= " + x[1] + ")";
      case Op::Greater: return "(" + x[0] + " > " + x[1] + ")";
      case Op::GreaterEqual: return "(" + x[0] + " >= " + x[1] + ")";
      case Op::And:
      case Op::Or:
        if (dt != DType::Bool) return unsupported(n, dt);
        return "(" + x[0] + (n.op == Op::And ? " && " : " || ") + x[1] + ")";
      case Op::BitShift:
        if (!in || is_signed(dt)) return unsupported(n, dt);
        return call(n.attr_str("direction") == "left" ? "fb_shl" : "fb_shr");
      case Op::Where: return "(" + x[0] + " ? " + x[1] + " : " + x[2] + ")";
      default: return unsupported(n, dt);
    }
  }

  // A cast as the reference's cast_element: one rounding into the target dtype.
  static std::string cast(const std::string& x, DType from, DType to) {
    const std::string T = compute_type(to);
    if (to == DType::Bool) return "(" + x + " != " + std::string(compute_type(from)) + "(0))";
    if (from == DType::Bool) return is_float(to) ? "(" + x + " ? " + T + "(1) : " + T + "(0))" : T + "(" + x + " ? 1 : 0)";
    if (is_float(from) && is_integer(to)) return T + "(fb_f64_to_i64(double(" + x + ")))";
    if (is_integer(from) && is_integer(to)) return T + "(" + x + ")";
    if (is_integer(from)) {
      if (to == DType::F16) return "fb_int_to_float_bits(i64(" + x + "), 11)";
      if (to == DType::BF16) return "fb_int_to_float_bits(i64(" + x + "), 8)";
      return T + "(" + x + ")";
    }
    // float to float through double: f16/bf16 targets round to odd first (one rounding in all).
    if (to == DType::F64) return "double(" + x + ")";
    if (to == DType::F32) return "float(double(" + x + "))";
    return "fb_f64_to_f32_odd(double(" + x + "))";
  }

  const Graph& body_;
};

}  // namespace

std::string storage_type_name(DType d) { return storage_type(d); }
std::string compute_type_name(DType d) { return compute_type(d); }
std::string load_expression(DType d, const std::string& stored) { return load_expr(d, stored); }
std::string store_expression(DType d, const std::string& value) { return store_expr(d, value); }

Expected<std::string> body_function(const Graph& body, const std::string& name) {
  std::ostringstream os;
  FUSEBOX_RETURN_IF_ERROR(BodyWriter(body).write(os, name));
  return os.str();
}

std::string double_literal(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  char buf[48];
  std::snprintf(buf, sizeof(buf), "__longlong_as_double(0x%016" PRIx64 "ll)", bits);
  return buf;
}

std::string RegionVariant::key() const {
  return rank == 0 ? "flat:v" + std::to_string(vector) + ":u" + std::to_string(unroll) + ":r" + std::to_string(repeated)
                   : "strided:" + std::to_string(rank) + (index64 ? ":i64" : ":u32") + ":v" + std::to_string(vector) + ":r" +
                         std::to_string(inner_repeated);
}

int region_vector_width(const Graph& body) {
  int widest = 1;
  for (ValueId v : body.inputs()) widest = std::max(widest, dtype_size(body.type(v).dtype));
  for (ValueId v : body.outputs()) widest = std::max(widest, dtype_size(body.type(v).dtype));
  return std::max(1, 16 / widest);
}

Graph single_step_body(const Node& n, const std::vector<DType>& operand_dtypes, DType result) {
  Graph body("step");
  std::vector<ValueId> ins;
  for (size_t k = 0; k < operand_dtypes.size(); ++k) {
    ins.push_back(body.add_input("x" + std::to_string(k), TensorType{operand_dtypes[k], Shape{}}));
  }
  std::vector<ValueId> outs = body.add_node(n.op, ins, {TensorType{result, Shape{}}}, n.attrs);
  body.add_output(outs[0]);
  return body;
}

Expected<std::string> region_source(const Graph& body, const RegionVariant& v, const RegionPrologue* prologue) {
  std::ostringstream os;
  os << prelude_source() << "\n";
  const size_t pk = prologue ? prologue->operand : size_t(-1);
  if (prologue) os << prologue->transform->source;
  FUSEBOX_RETURN_IF_ERROR(BodyWriter(body).write(os));
  const auto& ins = body.inputs();
  const auto& outs = body.outputs();
  auto in_dtype = [&](size_t k) { return body.type(ins[k]).dtype; };
  auto out_dtype = [&](size_t j) { return body.type(outs[j]).dtype; };
  const bool strided = v.rank > 0;
  const std::string idx = strided && !v.index64 ? "u32" : "i64";
  if (strided) {
    if (v.rank > kMaxStridedRank) return Status::internal("strided region of rank " + std::to_string(v.rank));
    os << "struct FbShape { " << idx << " dims[" << v.rank << "]; " << idx << " strides[" << std::max<size_t>(ins.size(), 1)
       << "][" << v.rank << "]; };\n";
  }
  os << "extern \"C\" __global__ void __launch_bounds__(" << kRegionThreads << ") " << kRegionEntry << "(i64 n";
  for (size_t k = 0; k < ins.size(); ++k) os << ", const void* __restrict__ in" << k << "_";
  for (size_t j = 0; j < outs.size(); ++j) os << ", void* __restrict__ out" << j << "_";
  if (prologue) os << ", const " << prologue->transform->name << "_axes pro_axes";
  if (strided) os << ", const FbShape shape";
  os << ") {\n";
  for (size_t k = 0; k < ins.size(); ++k) {
    const char* st = k == pk ? storage_type(prologue->transform->src_dtype) : storage_type(in_dtype(k));
    os << "  const " << st << "* __restrict__ in" << k << " = (const " << st << "*)in" << k << "_;\n";
  }
  // Operand k's element at index i: a load, or the prologue's transform computing it.
  auto element = [&](size_t k, const std::string& i) {
    if (k == pk) return load_expr(in_dtype(k), prologue->transform->name + "(" + i + ", in" + std::to_string(k) + ", pro_axes)");
    return load_expr(in_dtype(k), "in" + std::to_string(k) + "[" + i + "]");
  };
  for (size_t j = 0; j < outs.size(); ++j) {
    os << "  " << storage_type(out_dtype(j)) << "* __restrict__ out" << j << " = (" << storage_type(out_dtype(j)) << "*)out"
       << j << "_;\n";
  }
  // Calls fb_body with operand expressions `arg(k)` and stores outputs with `store(j, value)`.
  auto body_call = [&](const std::string& indent, auto arg, auto store) {
    for (size_t j = 0; j < outs.size(); ++j) os << indent << compute_type(out_dtype(j)) << " y" << j << ";\n";
    os << indent << "fb_body(";
    for (size_t k = 0; k < ins.size(); ++k) os << (k ? ", " : "") << arg(k);
    for (size_t j = 0; j < outs.size(); ++j) os << (ins.empty() && j == 0 ? "" : ", ") << "y" << j;
    os << ");\n";
    for (size_t j = 0; j < outs.size(); ++j) os << indent << store(j, store_expr(out_dtype(j), "y" + std::to_string(j))) << ";\n";
  };
  if (!strided) {
    const int V = v.vector;
    for (size_t k = 0; k < ins.size(); ++k) {
      if ((v.repeated >> k) & 1u) {
        os << "  const " << compute_type(in_dtype(k)) << " r" << k << " = " << element(k, "0") << ";\n";
      }
    }
    auto repeated = [&](size_t k) { return (v.repeated >> k) & 1u; };
    os << "  const i64 stride = i64(gridDim.x) * blockDim.x;\n";
    os << "  const i64 first = i64(blockIdx.x) * blockDim.x + threadIdx.x;\n";
    if (V > 1) {
      const int U = std::max(1, v.unroll);
      os << "  const i64 nv = n / " << V << ";\n";
      // U packs per thread in flight: every load of the U iterations is issued before any
      // result is computed (more bytes in flight per thread for memory-bound regions).
      os << "  for (i64 j0 = first; j0 < nv; j0 += stride * " << U << ") {\n";
      for (size_t k = 0; k < ins.size(); ++k) {
        if (repeated(k) || k == pk) continue;
        os << "    Pack<" << storage_type(in_dtype(k)) << ", " << V << "> p" << k << "[" << U << "];\n";
      }
      os << "#pragma unroll\n    for (int u = 0; u < " << U << "; ++u) {\n      const i64 j = j0 + u * stride;\n      if (j < nv) {\n";
      for (size_t k = 0; k < ins.size(); ++k) {
        if (repeated(k) || k == pk) continue;
        os << "        p" << k << "[u] = ((const Pack<" << storage_type(in_dtype(k)) << ", " << V << ">*)in" << k << ")[j];\n";
      }
      os << "      }\n    }\n";
      os << "#pragma unroll\n    for (int u = 0; u < " << U << "; ++u) {\n      const i64 j = j0 + u * stride;\n      if (j >= nv) break;\n";
      for (size_t j = 0; j < outs.size(); ++j) os << "      Pack<" << storage_type(out_dtype(j)) << ", " << V << "> q" << j << ";\n";
      os << "#pragma unroll\n      for (int e = 0; e < " << V << "; ++e) {\n";
      body_call(
          "        ",
          [&](size_t k) {
            if (repeated(k)) return "r" + std::to_string(k);
            if (k == pk) return element(k, "j * " + std::to_string(V) + " + e");
            return load_expr(in_dtype(k), "p" + std::to_string(k) + "[u].v[e]");
          },
          [&](size_t j, const std::string& e) { return "q" + std::to_string(j) + ".v[e] = " + e; });
      os << "      }\n";
      for (size_t j = 0; j < outs.size(); ++j) {
        os << "      ((Pack<" << storage_type(out_dtype(j)) << ", " << V << ">*)out" << j << ")[j] = q" << j << ";\n";
      }
      os << "    }\n  }\n";
      os << "  const i64 t = nv * " << V << " + first;\n";
      os << "  if (t < n) {\n";
    } else {
      os << "  for (i64 t = first; t < n; t += stride) {\n";
    }
    body_call(
        "    ",
        [&](size_t k) { return repeated(k) ? "r" + std::to_string(k) : element(k, "t"); },
        [&](size_t j, const std::string& e) { return "out" + std::to_string(j) + "[t] = " + e; });
    os << "  }\n}\n";
    return os.str();
  }
  const int V = v.vector;
  os << "  const " << idx << " count = " << idx << "(n) / " << V << ";\n";
  os << "  const " << idx << " stride = " << idx << "(gridDim.x) * blockDim.x;\n";
  os << "  for (" << idx << " g = " << idx << "(blockIdx.x) * blockDim.x + threadIdx.x; g < count; g += stride) {\n";
  os << "    const " << idx << " i = g * " << V << ";\n";
  os << "    " << idx << " rest = i;\n";
  for (size_t k = 0; k < ins.size(); ++k) os << "    " << idx << " o" << k << " = 0;\n";
  os << "#pragma unroll\n    for (int d = " << v.rank - 1 << "; d >= 0; --d) {\n";
  os << "      const " << idx << " c = rest % shape.dims[d];\n      rest /= shape.dims[d];\n";
  for (size_t k = 0; k < ins.size(); ++k) os << "      o" << k << " += c * shape.strides[" << k << "][d];\n";
  os << "    }\n";
  if (V == 1) {
    body_call(
        "    ", [&](size_t k) { return element(k, "o" + std::to_string(k)); },
        [&](size_t j, const std::string& e) { return "out" + std::to_string(j) + "[i] = " + e; });
  } else {
    // V consecutive elements of one row: operands that walk the row are read as one pack, those
    // repeated along it (inner stride 0) once; the outputs are written as packs.
    auto along_row = [&](size_t k) { return !((v.inner_repeated >> k) & 1u); };
    for (size_t k = 0; k < ins.size(); ++k) {
      if (k == pk) continue;
      if (along_row(k)) {
        os << "    const Pack<" << storage_type(in_dtype(k)) << ", " << V << "> p" << k << " = *(const Pack<" << storage_type(in_dtype(k))
           << ", " << V << ">*)(in" << k << " + o" << k << ");\n";
      } else {
        os << "    const " << compute_type(in_dtype(k)) << " r" << k << " = " << element(k, "o" + std::to_string(k)) << ";\n";
      }
    }
    for (size_t j = 0; j < outs.size(); ++j) os << "    Pack<" << storage_type(out_dtype(j)) << ", " << V << "> q" << j << ";\n";
    os << "#pragma unroll\n    for (int e = 0; e < " << V << "; ++e) {\n";
    body_call(
        "      ",
        [&](size_t k) {
          if (k == pk) return element(k, "o" + std::to_string(k) + (along_row(k) ? " + e" : ""));
          if (!along_row(k)) return "r" + std::to_string(k);
          return load_expr(in_dtype(k), "p" + std::to_string(k) + ".v[e]");
        },
        [&](size_t j, const std::string& e) { return "q" + std::to_string(j) + ".v[e] = " + e; });
    os << "    }\n";
    for (size_t j = 0; j < outs.size(); ++j) {
      os << "    *(Pack<" << storage_type(out_dtype(j)) << ", " << V << ">*)(out" << j << " + i) = q" << j << ";\n";
    }
  }
  os << "  }\n}\n";
  return os.str();
}

}  // namespace fusebox::cuda
