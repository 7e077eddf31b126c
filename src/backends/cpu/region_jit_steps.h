// The LLVM IR of each step of a region body, for region_jit.cpp (which alone includes this file,
// inside its LLVM-only part). What each step computes is the reference kernel's definition: the
// same operation order, NaN rules and saturating casts; exp/tanh/sigmoid/log/erf/sin/cos are
// range reductions and polynomials (accuracy checked against <cmath> in
// tests/unit/region_codegen_test.cpp).
#pragma once

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Module.h>

#include "backends/cpu/simd_math.h"
#include "ir/graph.h"

namespace fusebox::cpu::codegen {

using llvm::Value;

// 2^(j/32), twice that, and 2^(j/32) - 1 for j = 0..31, each rounded to float from long double.
struct Exp2Table {
  float pow[32], twice_pow[32], pow_minus_1[32];
};
inline const Exp2Table& exp2_table() {
  static const Exp2Table t = [] {
    Exp2Table e;
    for (int j = 0; j < 32; ++j) {
      e.pow[j] = float(std::exp2l(j / 32.0L));
      e.twice_pow[j] = 2.0f * e.pow[j];
      e.pow_minus_1[j] = float(std::expm1l(j / 32.0L * 0.693147180559945309417232121458176568L));
    }
    return e;
  }();
  return t;
}

// Emits a region body's steps as LLVM IR for a given lane count (the vector loop's, or 1 in the
// scalar tail).
class StepEmitter {
 public:
  // `avx512`: the target has AVX-512F; vector code then scales by 2^n with vscalefps.
  StepEmitter(llvm::IRBuilder<>& b, llvm::Module& m, unsigned lanes, bool avx512)
      : b_(b), m_(m), lanes_(lanes), scalef_(avx512 && lanes % 16 == 0) {}

  llvm::Type* element(DType d) const {
    switch (d) {
      case DType::F32: return b_.getFloatTy();
      case DType::F64: return b_.getDoubleTy();
      case DType::I32: return b_.getInt32Ty();
      case DType::I64: return b_.getInt64Ty();
      case DType::Bool: return b_.getInt1Ty();
      default: return b_.getInt8Ty();  // u8, i8
    }
  }
  // What memory holds: bool as one byte.
  llvm::Type* stored(DType d) const { return d == DType::Bool ? b_.getInt8Ty() : element(d); }
  llvm::Type* vec(llvm::Type* e) const {
    return lanes_ == 1 ? e : static_cast<llvm::Type*>(llvm::FixedVectorType::get(e, lanes_));
  }
  llvm::Type* type(DType d) const { return vec(element(d)); }
  unsigned lanes() const { return lanes_; }

  Value* f(DType d, double v) const { return llvm::ConstantFP::get(type(d), v); }
  Value* f32(float v) const { return llvm::ConstantFP::get(type(DType::F32), double(v)); }
  Value* splat(Value* scalar) const { return lanes_ == 1 ? scalar : b_.CreateVectorSplat(lanes_, scalar); }

  // Converts a loaded storage value to the computing type (bool: byte != 0).
  Value* from_storage(DType d, Value* v) const {
    return d == DType::Bool ? b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType())) : v;
  }
  Value* to_storage(DType d, Value* v) const { return d == DType::Bool ? b_.CreateZExt(v, vec(b_.getInt8Ty())) : v; }

  Value* constant(const Array& a) const {
    const DType d = a.dtype();
    switch (d) {
      case DType::F32: return f32(*static_cast<const float*>(a.raw()));
      case DType::F64: return f(d, *static_cast<const double*>(a.raw()));
      case DType::I32: return llvm::ConstantInt::get(type(d), uint64_t(int64_t(*static_cast<const int32_t*>(a.raw()))), true);
      case DType::I64: return llvm::ConstantInt::get(type(d), uint64_t(*static_cast<const int64_t*>(a.raw())), true);
      case DType::I8: return llvm::ConstantInt::get(type(d), uint64_t(int64_t(*static_cast<const int8_t*>(a.raw()))), true);
      case DType::U8: return llvm::ConstantInt::get(type(d), uint64_t(*static_cast<const uint8_t*>(a.raw())), false);
      default: return llvm::ConstantInt::get(type(DType::Bool), *static_cast<const uint8_t*>(a.raw()) != 0 ? 1 : 0);
    }
  }

  Value* step(const Node& n, const Graph& body, const std::vector<Value*>& in) const {
    const DType out = body.type(n.outputs[0]).dtype;
    const DType dt = body.type(n.inputs[0]).dtype;
    if (n.op == Op::Cast) return cast(in[0], dt, out);
    if (n.op == Op::Where) return b_.CreateSelect(in[0], in[1], in[2]);
    if (n.op == Op::Not) return b_.CreateNot(in[0]);
    if (n.op == Op::And) return b_.CreateAnd(in[0], in[1]);
    if (n.op == Op::Or) return b_.CreateOr(in[0], in[1]);
    if (in.size() == 1) return float_unary(n, dt, in[0]);
    // A binary step with a bool result on non-bool operands is a comparison.
    if (out == DType::Bool) return compare(n.op, dt, in[0], in[1]);
    return is_float(out) ? float_binary(n.op, in[0], in[1]) : int_binary(n.op, in[0], in[1]);
  }

 private:
  Value* intrinsic(llvm::Intrinsic::ID id, Value* x) const { return b_.CreateUnaryIntrinsic(id, x); }
  Value* fmuladd(Value* a, Value* b, Value* c) const {
    return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {a->getType()}, {a, b, c});
  }
  Value* is_nan(Value* x) const { return b_.CreateFCmpUNO(x, x); }
  Value* lt(Value* a, Value* b) const { return b_.CreateFCmpOLT(a, b); }
  Value* gt(Value* a, Value* b) const { return b_.CreateFCmpOGT(a, b); }

  // 2^n for an integral i32 n in the normal exponent range, built in the exponent bits.
  Value* pow2(Value* n) const {
    Value* e = b_.CreateAdd(n, llvm::ConstantInt::get(type(DType::I32), 127));
    return b_.CreateBitCast(b_.CreateShl(e, llvm::ConstantInt::get(type(DType::I32), 23)), type(DType::F32));
  }
  // n = round(y / ln2) as i32 and r = y - n*ln2 (|r| <= ln2/2; the split ln2 keeps n*hi exact).
  // A NaN y gives an unspecified n (frozen, not poison) and a NaN r, so results stay NaN.
  std::pair<Value*, Value*> reduce(Value* y) const {
    Value* n = intrinsic(llvm::Intrinsic::roundeven, b_.CreateFMul(y, f32(1.44269504f)));
    Value* r = fmuladd(b_.CreateFNeg(n), f32(0.693145752f), y);
    r = fmuladd(b_.CreateFNeg(n), f32(1.42860677e-06f), r);
    return {b_.CreateFreeze(b_.CreateFPToSI(n, type(DType::I32))), r};
  }
  // e^r - 1 as r + r^2 * P(r), P as in simd_math.h's expm1_reduced.
  Value* expm1_reduced(Value* r) const {
    Value* p = f32(simd::kExpm1P[4]);
    for (int k = 3; k >= 0; --k) p = fmuladd(p, r, f32(simd::kExpm1P[k]));
    return fmuladd(b_.CreateFMul(r, r), p, r);
  }

  // e^r for |r| <= ln2/2: degree-6 polynomial interpolating e^r at the 7 Chebyshev nodes (fitted
  // in long double): 7.5e-8 relative with fused multiply-adds, one operation less than
  // 1 + expm1_reduced(r), which exp and sigmoid do not need (no cancellation there).
  Value* exp_reduced(Value* r) const {
    return poly(r, {1.0f, 1.0f, 0.5f, 1.666641533e-01f, 4.166635126e-02f, 8.375125937e-03f, 1.394110848e-03f});
  }
  // x * 2^floor(n) with vscalefps (one rounding, so results in the subnormal range come out right
  // and 2^n itself need not be a float).
  Value* scalef(Value* x, Value* n) const {
    llvm::Function* f = llvm::Intrinsic::getDeclaration(&m_, llvm::Intrinsic::x86_avx512_mask_scalef_ps_512);
    std::vector<Value*> xs = parts16(x), ns = parts16(n), out;
    for (size_t k = 0; k < xs.size(); ++k)
      out.push_back(b_.CreateCall(f, {xs[k], ns[k], llvm::UndefValue::get(xs[k]->getType()), b_.getInt16(0xFFFF), b_.getInt32(4)}));
    return join(std::move(out));
  }
  // table[j] per lane for j = the low 5 bits of the i32 lanes of `idx`, with vpermi2ps over the
  // table's two halves (the other bits are ignored).
  Value* lookup32(const float (&table)[32], Value* idx) const {
    auto half = [&](int base) {
      std::vector<llvm::Constant*> v;
      for (int k = 0; k < 16; ++k) v.push_back(llvm::ConstantFP::get(b_.getFloatTy(), double(table[base + k])));
      return llvm::ConstantVector::get(v);
    };
    llvm::Function* f = llvm::Intrinsic::getDeclaration(&m_, llvm::Intrinsic::x86_avx512_vpermi2var_ps_512);
    std::vector<Value*> out;
    for (Value* part : parts16(idx)) out.push_back(b_.CreateCall(f, {half(0), part, half(16)}));
    return join(std::move(out));
  }
  // The 16-lane parts of a full-width value (AVX-512 instructions take 16 floats), and back.
  std::vector<Value*> parts16(Value* v) const {
    std::vector<Value*> parts;
    for (unsigned base = 0; base < lanes_; base += 16) {
      llvm::SmallVector<int, 16> idx;
      for (int k = 0; k < 16; ++k) idx.push_back(int(base) + k);
      parts.push_back(b_.CreateShuffleVector(v, idx));
    }
    return parts;
  }
  Value* join(std::vector<Value*> parts) const {
    while (parts.size() > 1) {  // concatenate pairwise
      std::vector<Value*> joined;
      for (size_t k = 0; k + 1 < parts.size(); k += 2) {
        const unsigned width = llvm::cast<llvm::FixedVectorType>(parts[k]->getType())->getNumElements();
        llvm::SmallVector<int, 32> idx;
        for (unsigned i = 0; i < 2 * width; ++i) idx.push_back(int(i));
        joined.push_back(b_.CreateShuffleVector(parts[k], parts[k + 1], idx));
      }
      parts = std::move(joined);
    }
    return parts[0];
  }

  // The AVX-512 reduction of exp, tanh and sigmoid: y * scale = k + j/32 + (rest), rounded to a
  // multiple of 1/32 by adding 1.5 * 2^18 (below 2^17 in magnitude, the float sum's last bit is
  // 2^-5). Returns k + j/32 as a float and the sum's bits, whose low 5 bits are j (mod 32, also
  // for negative k). Then e^y = 2^k * 2^(j/32) * e^r with |r| <= ln2/64, and a cubic suffices
  // for e^r - 1 where a degree-6 polynomial was needed over |r| <= ln2/2.
  std::pair<Value*, Value*> round32(Value* y, float scale) const {
    Value* t = fmuladd(y, f32(scale), f32(393216.0f));
    return {b_.CreateFSub(t, f32(393216.0f)), b_.CreateBitCast(t, type(DType::I32))};
  }
  // e^r - 1 = r + r^2 (c0 + c1 r) for |r| <= 0.011, c0 and c1 fitted for the least maximum
  // relative error (1.4e-8); `scale` s evaluates (e^(s r) - 1) / s for s = 1 or 2 (exactly, as
  // the coefficients scale by powers of 2).
  Value* expm1_small(Value* r, float s) const {
    Value* p = fmuladd(f32(1.666671485e-01f * s * s), r, f32(5.000037551e-01f * s));
    return fmuladd(b_.CreateFMul(r, r), p, r);
  }
  // e^y for y in [-104, 89] (exp clamps to it, where the result is 0 or inf already; sigmoid
  // takes e^-|x|): y = (k + j/32) ln2 + r with ln2 in two parts (the high one has 9 bits, so its
  // product with k + j/32, at most 13 bits, is exact), e^y = 2^k (T_j + T_j (e^r - 1)).
  Value* exp_table(Value* y) const {
    auto [kj, bits] = round32(y, 1.44269504f);
    Value* r = fmuladd(b_.CreateFNeg(kj), f32(0.693359375f), y);
    r = fmuladd(b_.CreateFNeg(kj), f32(-2.12194440e-04f), r);
    Value* t = lookup32(exp2_table().pow, bits);
    return scalef(fmuladd(t, expm1_small(r, 1.0f), t), kj);
  }

  // exp: saturates like <cmath>. With vscalefps, results in the subnormal range are kept (the
  // argument clamped to [-104, 89] still reaches 0 and inf); otherwise they flush to 0 as in
  // simd_math.h. NaN propagates.
  Value* exp(Value* x) const {
    if (scalef_) {
      Value* xc = b_.CreateSelect(lt(x, f32(-104.0f)), f32(-104.0f), x);
      return exp_table(b_.CreateSelect(gt(xc, f32(89.0f)), f32(89.0f), xc));
    }
    Value* xc = b_.CreateSelect(lt(x, f32(-87.3365f)), f32(-87.3365f), x);
    xc = b_.CreateSelect(gt(xc, f32(88.7228f)), f32(88.7228f), xc);
    auto [n, r] = reduce(xc);
    // 2^n in two halves: n reaches 128 just below the overflow threshold.
    Value* half = b_.CreateAShr(n, llvm::ConstantInt::get(type(DType::I32), 1));
    Value* y = b_.CreateFMul(exp_reduced(r), pow2(half));
    y = b_.CreateFMul(y, pow2(b_.CreateSub(n, half)));
    y = b_.CreateSelect(gt(x, f32(88.7228f)), f32(std::numeric_limits<float>::infinity()), y);
    return b_.CreateSelect(lt(x, f32(-87.3365f)), f32(0.0f), y);
  }
  // tanh|x| = m / (m + 2) with m = e^(2|x|) - 1, exact near 0 (no cancellation); 1 beyond 10.
  // NaN propagates through m.
  Value* tanh(Value* x) const {
    Value* ax = intrinsic(llvm::Intrinsic::fabs, x);
    Value* a = b_.CreateSelect(gt(ax, f32(10.0f)), f32(10.0f), ax);
    Value* m;
    if (scalef_) {
      // 2a = (k + j/32) ln2 + 2u, and m = 2^k (U_j + 2 T_j (e^(2u) - 1)/2) + 2^k - 1, every term
      // accurate relative to m (U_j = T_j - 1 is tabulated, not computed). One multiply-add with
      // ln2 rounded to float leaves u within 3e-8 (k + j/32 <= 29).
      auto [kj, bits] = round32(a, 2.88539008f);
      Value* u = fmuladd(b_.CreateFNeg(kj), f32(0.346573591f), a);
      Value* inner = fmuladd(lookup32(exp2_table().twice_pow, bits), expm1_small(u, 2.0f),
                             lookup32(exp2_table().pow_minus_1, bits));
      Value* s = scalef(f32(1.0f), kj);
      m = fmuladd(s, inner, b_.CreateFSub(s, f32(1.0f)));
    } else {
      Value* y = b_.CreateFMul(f32(2.0f), a);
      // y <= 20, so n <= 29 and one multiply-add with ln2 rounded to float leaves r within 6e-8.
      Value* n = intrinsic(llvm::Intrinsic::roundeven, b_.CreateFMul(y, f32(1.44269504f)));
      Value* q = expm1_reduced(fmuladd(b_.CreateFNeg(n), f32(0.693147182f), y));
      Value* s = pow2(b_.CreateFreeze(b_.CreateFPToSI(n, type(DType::I32))));
      m = fmuladd(s, q, b_.CreateFSub(s, f32(1.0f)));
    }
    Value* t = b_.CreateFDiv(m, b_.CreateFAdd(m, f32(2.0f)));
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, t, x);
  }
  // 1 / (1 + e^-|x|), or e^-|x| / (1 + e^-|x|) for negative x: one division for both sides;
  // e^-|x| needs no overflow handling. NaN propagates.
  Value* sigmoid(Value* x) const {
    Value* z = b_.CreateFNeg(intrinsic(llvm::Intrinsic::fabs, x));
    Value* e;
    if (scalef_) {
      e = exp_table(b_.CreateSelect(lt(z, f32(-104.0f)), f32(-104.0f), z));
    } else {
      Value* under = lt(z, f32(-87.3365f));
      auto [n, r] = reduce(b_.CreateSelect(under, f32(-87.3365f), z));
      e = b_.CreateSelect(under, f32(0.0f), b_.CreateFMul(exp_reduced(r), pow2(n)));
    }
    Value* num = b_.CreateSelect(lt(x, f32(0.0f)), e, f32(1.0f));
    return b_.CreateFDiv(num, b_.CreateFAdd(f32(1.0f), e));
  }
  Value* i32(int64_t v) const { return llvm::ConstantInt::get(type(DType::I32), uint64_t(v), true); }
  // c[0] + c[1] x + c[2] x^2 + ... by Horner's rule.
  Value* poly(Value* x, std::initializer_list<float> c) const {
    const float* k = std::data(c);
    Value* p = f32(k[c.size() - 1]);
    for (size_t i = c.size() - 1; i-- > 0;) p = fmuladd(p, x, f32(k[i]));
    return p;
  }
  // sin x (cos: quadrant + 1): x = n pi/2 + r with pi/2 in three floats (exact products with
  // fused multiply-adds, enough bits for |x| <= 8192 even next to multiples of pi), sin r and
  // cos r for |r| <= pi/4 by their Taylor series to r^9 and r^10 (error below 2e-9), picked
  // and signed by n mod 4. Lanes with |x| > 8192 (and inf) take libm's sinf/cosf, which is what
  // the reference calls: the slow block runs only for vectors holding such a lane.
  Value* sin_cos(Value* x, bool cosine) const {
    Value* n = b_.CreateFSub(fmuladd(x, f32(0.636619747f), f32(12582912.0f)), f32(12582912.0f));
    Value* r = fmuladd(b_.CreateFNeg(n), f32(1.57079625f), x);
    r = fmuladd(b_.CreateFNeg(n), f32(7.54978942e-08f), r);
    r = fmuladd(b_.CreateFNeg(n), f32(5.39030253e-15f), r);
    Value* z = b_.CreateFMul(r, r);
    Value* sin_r = fmuladd(b_.CreateFMul(r, z), poly(z, {-1.0f / 6, 1.0f / 120, -1.0f / 5040, 1.0f / 362880}), r);
    Value* cos_r = fmuladd(z, poly(z, {-0.5f, 1.0f / 24, -1.0f / 720, 1.0f / 40320, -1.0f / 3628800}), f32(1.0f));
    Value* q = b_.CreateFreeze(b_.CreateFPToSI(n, type(DType::I32)));  // |n| <= 5216 on the fast lanes
    if (cosine) q = b_.CreateAdd(q, i32(1));
    Value* odd = b_.CreateICmpNE(b_.CreateAnd(q, i32(1)), i32(0));
    Value* neg = b_.CreateICmpNE(b_.CreateAnd(q, i32(2)), i32(0));
    Value* v = b_.CreateSelect(odd, cos_r, sin_r);
    v = b_.CreateSelect(neg, b_.CreateFNeg(v), v);
    // The slow lanes: |x| > 8192, inf and NaN (NaN compares unordered: sinf(NaN) is NaN).
    Value* slow = b_.CreateFCmpUGT(intrinsic(llvm::Intrinsic::fabs, x), f32(8192.0f));
    Value* any = lanes_ == 1 ? slow : b_.CreateOrReduce(slow);
    llvm::BasicBlock* here = b_.GetInsertBlock();
    llvm::Function* fn = here->getParent();
    auto* slow_block = llvm::BasicBlock::Create(b_.getContext(), cosine ? "cos_libm" : "sin_libm", fn);
    auto* join = llvm::BasicBlock::Create(b_.getContext(), cosine ? "cos_join" : "sin_join", fn);
    b_.CreateCondBr(any, slow_block, join);
    b_.SetInsertPoint(slow_block);
    llvm::FunctionCallee libm = m_.getOrInsertFunction(cosine ? "cosf" : "sinf", b_.getFloatTy(), b_.getFloatTy());
    Value* exact = v;
    for (unsigned k = 0; k < lanes_; ++k) {
      Value* lane = lanes_ == 1 ? x : b_.CreateExtractElement(x, k);
      Value* y = b_.CreateCall(libm, {lane});
      exact = lanes_ == 1 ? y : b_.CreateInsertElement(exact, y, k);
    }
    exact = b_.CreateSelect(slow, exact, v);
    llvm::BasicBlock* slow_end = b_.GetInsertBlock();
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
    llvm::PHINode* result = b_.CreatePHI(v->getType(), 2);
    result->addIncoming(v, here);
    result->addIncoming(exact, slow_end);
    return result;
  }
  // log x = e ln2 + log m with x = m 2^e, m in [sqrt(1/2), sqrt(2)) read off the bits (subnormal
  // x scaled by 2^23 first); log m = 2 atanh(s), s = (m - 1)/(m + 1), |s| <= 0.1716, by its
  // series to s^9 (truncation 2e-9 relative). log 0 = -inf, log of a negative = NaN.
  Value* log(Value* x) const {
    Value* tiny = lt(x, f32(std::numeric_limits<float>::min()));
    Value* xs = b_.CreateSelect(tiny, b_.CreateFMul(x, f32(8388608.0f)), x);
    Value* ix = b_.CreateAdd(b_.CreateBitCast(xs, type(DType::I32)), i32(0x3f800000 - 0x3f3504f3));
    Value* e = b_.CreateSub(b_.CreateAShr(ix, i32(23)), i32(127));
    e = b_.CreateSelect(tiny, b_.CreateSub(e, i32(23)), e);
    Value* m = b_.CreateBitCast(b_.CreateAdd(b_.CreateAnd(ix, i32(0x007fffff)), i32(0x3f3504f3)), type(DType::F32));
    Value* f = b_.CreateFSub(m, f32(1.0f));  // exact
    Value* s = b_.CreateFDiv(f, b_.CreateFAdd(f, f32(2.0f)));
    Value* t = b_.CreateFAdd(s, s), *z = b_.CreateFMul(s, s);
    Value* log_m = fmuladd(b_.CreateFMul(t, z), poly(z, {1.0f / 3, 1.0f / 5, 1.0f / 7, 1.0f / 9}), t);
    Value* ef = b_.CreateSIToFP(e, type(DType::F32));
    Value* y = fmuladd(ef, f32(0.693145752f), fmuladd(ef, f32(1.42860677e-06f), log_m));
    const float inf = std::numeric_limits<float>::infinity();
    y = b_.CreateSelect(b_.CreateFCmpOEQ(x, f32(0.0f)), f32(-inf), y);
    y = b_.CreateSelect(lt(x, f32(0.0f)), f32(std::numeric_limits<float>::quiet_NaN()), y);
    y = b_.CreateSelect(b_.CreateFCmpOEQ(x, f32(inf)), f32(inf), y);
    return b_.CreateSelect(is_nan(x), x, y);
  }
  // erf |x| = |x| A(x^2) up to 1; above, 1 - e^(-x^2) B(|x|) with |x| clamped to 4 (erf rounds
  // to 1 from 3.92). A (degree 6 in x^2 on [0, 1]) and B (degree 10 on [1, 4], approximating
  // erfc(x) e^(x^2)) interpolate at Chebyshev nodes, fitted in long double: 1.7e-7 relative.
  Value* erf(Value* x) const {
    Value* ax = intrinsic(llvm::Intrinsic::fabs, x);
    Value* small = b_.CreateFMul(ax, poly(b_.CreateFMul(ax, ax), {1.128379107e+00f, -3.761262596e-01f,
                                                                  1.128359437e-01f, -2.685421146e-02f,
                                                                  5.189087242e-03f, -8.016864303e-04f,
                                                                  7.875874871e-05f}));
    Value* xc = b_.CreateSelect(gt(ax, f32(4.0f)), f32(4.0f), ax);
    Value* sq = b_.CreateFMul(xc, xc);
    Value* sq_lo = fmuladd(xc, xc, b_.CreateFNeg(sq));  // the rounding error of x^2 (0 without FMA)
    Value* g = exp(b_.CreateFNeg(sq));
    g = fmuladd(b_.CreateFNeg(g), sq_lo, g);
    Value* b = poly(xc, {9.927197099e-01f, -1.084357500e+00f, 8.785005808e-01f, -5.477019548e-01f,
                         2.622201741e-01f, -9.487424046e-02f, 2.531494945e-02f, -4.804732744e-03f,
                         6.115357392e-04f, -4.667512985e-05f, 1.611890752e-06f});
    Value* big = b_.CreateFSub(f32(1.0f), b_.CreateFMul(g, b));
    Value* r = b_.CreateSelect(b_.CreateFCmpOLE(ax, f32(1.0f)), small, big);  // NaN: big, NaN
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, r, x);
  }

  // Constants and attribute values in the step's float type, rounded as the reference's C(v).
  Value* float_unary(const Node& n, DType dt, Value* x) const {
    auto c = [&](double v) { return f(dt, v); };
    auto attr = [&](const char* name) { return c(n.attr_f64(name)); };
    auto is_lt = [&](Value* a, Value* v) { return lt(a, v); };
    switch (n.op) {
      case Op::Neg: return b_.CreateFNeg(x);
      case Op::Abs: return intrinsic(llvm::Intrinsic::fabs, x);
      case Op::Exp: return exp(x);
      case Op::Sqrt: return intrinsic(llvm::Intrinsic::sqrt, x);
      case Op::Rsqrt: return b_.CreateFDiv(c(1.0), intrinsic(llvm::Intrinsic::sqrt, x));
      case Op::Reciprocal: return b_.CreateFDiv(c(1.0), x);
      case Op::Tanh: return tanh(x);
      case Op::Sigmoid: return sigmoid(x);
      case Op::Silu: return b_.CreateFMul(x, sigmoid(x));
      case Op::Relu:  // NaN stays NaN (compares false), -0 gives +0
        return b_.CreateSelect(b_.CreateFCmpOLE(x, c(0.0)), c(0.0), x);
      case Op::LeakyRelu: return b_.CreateSelect(is_lt(x, c(0.0)), b_.CreateFMul(attr("alpha"), x), x);
      case Op::Floor: return intrinsic(llvm::Intrinsic::floor, x);
      case Op::Ceil: return intrinsic(llvm::Intrinsic::ceil, x);
      case Op::Round: return intrinsic(llvm::Intrinsic::roundeven, x);
      case Op::Clip: {  // a NaN bound compares false: unbounded, as in the reference
        Value* v = x;
        if (n.has_attr("min")) v = b_.CreateSelect(is_lt(v, attr("min")), attr("min"), v);
        if (n.has_attr("max")) v = b_.CreateSelect(gt(v, attr("max")), attr("max"), v);
        return b_.CreateSelect(is_nan(x), x, v);
      }
      case Op::HardSigmoid: {
        Value* v = b_.CreateFAdd(b_.CreateFMul(attr("alpha"), x), attr("beta"));
        v = b_.CreateSelect(is_lt(v, c(0.0)), c(0.0), v);
        return b_.CreateSelect(gt(v, c(1.0)), c(1.0), v);
      }
      case Op::HardSwish: {
        Value* v = b_.CreateFAdd(x, c(3.0));
        v = b_.CreateSelect(is_lt(v, c(0.0)), c(0.0), v);
        v = b_.CreateSelect(gt(v, c(6.0)), c(6.0), v);
        return b_.CreateFDiv(b_.CreateFMul(x, v), c(6.0));
      }
      case Op::Log: return log(x);
      case Op::Sin: return sin_cos(x, false);
      case Op::Cos: return sin_cos(x, true);
      case Op::Erf: return erf(x);
      case Op::Gelu: {  // f32 only
        if (n.attr_str("approximate") != "tanh") {  // 0.5 x (1 + erf(x / sqrt 2)), as the reference
          Value* e = erf(b_.CreateFDiv(x, f32(float(1.41421356237309504880))));
          return b_.CreateFMul(b_.CreateFMul(f32(0.5f), x), b_.CreateFAdd(f32(1.0f), e));
        }
        Value* cube = b_.CreateFMul(b_.CreateFMul(b_.CreateFMul(f32(0.044715f), x), x), x);
        Value* u = b_.CreateFMul(f32(float(0.7978845608028654)), b_.CreateFAdd(x, cube));
        return b_.CreateFMul(b_.CreateFMul(f32(0.5f), x), b_.CreateFAdd(f32(1.0f), tanh(u)));
      }
      default: return x;  // Identity
    }
  }

  // Max/min keep a NaN operand (the first if both are NaN), as the reference does.
  Value* float_binary(Op op, Value* a, Value* c) const {
    switch (op) {
      case Op::Add: return b_.CreateFAdd(a, c);
      case Op::Sub: return b_.CreateFSub(a, c);
      case Op::Mul: return b_.CreateFMul(a, c);
      case Op::Div: return b_.CreateFDiv(a, c);
      default: {  // ties (0 and -0) keep the first operand, as the reference does
        Value* pick = b_.CreateSelect(op == Op::Max ? lt(a, c) : gt(a, c), c, a);
        pick = b_.CreateSelect(is_nan(c), c, pick);
        return b_.CreateSelect(is_nan(a), a, pick);
      }
    }
  }
  // Wrapping add/sub/mul (no nsw), signed max/min.
  Value* int_binary(Op op, Value* a, Value* c) const {
    switch (op) {
      case Op::Add: return b_.CreateAdd(a, c);
      case Op::Sub: return b_.CreateSub(a, c);
      case Op::Mul: return b_.CreateMul(a, c);
      case Op::Max: return b_.CreateSelect(b_.CreateICmpSGT(a, c), a, c);
      default: return b_.CreateSelect(b_.CreateICmpSLT(a, c), a, c);
    }
  }
  Value* compare(Op op, DType d, Value* a, Value* c) const {
    using P = llvm::CmpInst::Predicate;
    const bool fp = is_float(d);
    P p;
    switch (op) {
      case Op::Equal: p = fp ? P::FCMP_OEQ : P::ICMP_EQ; break;
      case Op::NotEqual: p = fp ? P::FCMP_UNE : P::ICMP_NE; break;
      case Op::Less: p = fp ? P::FCMP_OLT : P::ICMP_SLT; break;
      case Op::LessEqual: p = fp ? P::FCMP_OLE : P::ICMP_SLE; break;
      case Op::Greater: p = fp ? P::FCMP_OGT : P::ICMP_SGT; break;
      default: p = fp ? P::FCMP_OGE : P::ICMP_SGE; break;
    }
    return fp ? b_.CreateFCmp(p, a, c) : b_.CreateICmp(p, a, c);
  }
  // Casts as region_loops.inc: float -> integer through double, truncating, NaN -> 0 and
  // saturating at the int64 range, then wrapping to the width; u8 extends with zeros.
  Value* cast(Value* x, DType from, DType to) const {
    if (from == to) return x;
    llvm::Type* t = type(to);
    if (to == DType::Bool) {
      return is_float(from) ? b_.CreateFCmpUNE(x, llvm::Constant::getNullValue(x->getType()))
                            : b_.CreateICmpNE(x, llvm::Constant::getNullValue(x->getType()));
    }
    if (is_float(from) && is_float(to)) return b_.CreateFPCast(x, t);
    if (!is_float(from) && is_float(to)) return from == DType::U8 ? b_.CreateUIToFP(x, t) : b_.CreateSIToFP(x, t);
    if (!is_float(from)) return b_.CreateIntCast(x, t, /*isSigned=*/from != DType::U8);
    Value* d = b_.CreateFPExt(x, type(DType::F64));
    Value* nan = is_nan(d);
    Value* hi = b_.CreateFCmpOGE(d, f(DType::F64, 9.2233720368547758e18));
    Value* lo = b_.CreateFCmpOLE(d, f(DType::F64, -9.2233720368547758e18));
    Value* out_of_range = b_.CreateOr(b_.CreateOr(nan, hi), lo);
    Value* safe = b_.CreateSelect(out_of_range, f(DType::F64, 0.0), d);  // fptosi is poison outside
    Value* i = b_.CreateFPToSI(safe, type(DType::I64));
    i = b_.CreateSelect(hi, llvm::ConstantInt::get(type(DType::I64), uint64_t(INT64_MAX)), i);
    i = b_.CreateSelect(lo, llvm::ConstantInt::get(type(DType::I64), uint64_t(INT64_MIN)), i);
    return b_.CreateTrunc(i, t);  // no-op for i64
  }

  llvm::IRBuilder<>& b_;
  llvm::Module& m_;
  unsigned lanes_;
  bool scalef_;
};

}  // namespace fusebox::cpu::codegen
