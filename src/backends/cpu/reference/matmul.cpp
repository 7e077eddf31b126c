// Reference kernel of matmul with numpy semantics:
//   a [..., M, K] x b [..., K, N] -> [broadcast(...), M, N]
// A 1-D a is [1, K] and a 1-D b is [K, 1]; the added dim is dropped from the result (the
// preallocated output already has the final shape, so only the element order matters).
// Floats accumulate in double, in ascending k, and round once; integers accumulate in 64-bit
// unsigned arithmetic (wrapping, never undefined) and wrap to the element width.
//
// matmul_integer a, b, a_zp, b_zp: the same loops over (a - a_zp) and (b - b_zp) as 64-bit
// integers (exact: every 8-bit product is below 2^17), wrapped to i32.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "backends/cpu/reference/dtype_dispatch.h"
#include "backends/cpu/reference/reference.h"

namespace fusebox::cpu {

namespace {

template <DType D>
constexpr bool kIsFloat = D == DType::F32 || D == DType::F64 || D == DType::F16 || D == DType::BF16;

struct MatmulShape {
  int64_t m, k, n;
  std::vector<int64_t> batch;                    // broadcast batch dims of the result
  std::vector<int64_t> a_batch_stride, b_batch_stride;  // in matrices, 0 where broadcast
};

MatmulShape plan(std::vector<int64_t> as, std::vector<int64_t> bs) {
  FUSEBOX_CHECK(!as.empty() && !bs.empty()) << "matmul: operands must be at least rank 1";
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  MatmulShape s;
  s.m = as[as.size() - 2];
  s.k = as.back();
  s.n = bs.back();
  FUSEBOX_CHECK(bs[bs.size() - 2] == s.k) << "matmul: contraction dims differ";
  std::vector<int64_t> a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  size_t rank = std::max(a_batch.size(), b_batch.size());
  s.batch.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i + a_batch.size() >= rank ? a_batch[i + a_batch.size() - rank] : 1;
    int64_t db = i + b_batch.size() >= rank ? b_batch[i + b_batch.size() - rank] : 1;
    FUSEBOX_CHECK(da == db || da == 1 || db == 1) << "matmul: batch dims do not broadcast";
    s.batch[i] = da == 1 ? db : da;
  }
  s.a_batch_stride = broadcast_strides(a_batch, s.batch);
  s.b_batch_stride = broadcast_strides(b_batch, s.batch);
  return s;
}

template <DType D>
void matmul(const Array& a, const Array& b, Array& y, const MatmulShape& s) {
  using T = DTypeTraits<D>;
  using S = typename T::Storage;
  using Acc = std::conditional_t<kIsFloat<D>, double, uint64_t>;
  const S* pa = a.data<S>();
  const S* pb = b.data<S>();
  S* py = y.data<S>();
  std::vector<Acc> row(static_cast<size_t>(s.n));
  int64_t out = 0;
  // MultiIndex over an empty batch shape visits one (scalar) position.
  for (MultiIndex it(s.batch, {s.a_batch_stride, s.b_batch_stride}); !it.done(); it.next()) {
    const S* ma = pa + it.offset(0) * s.m * s.k;
    const S* mb = pb + it.offset(1) * s.k * s.n;
    for (int64_t i = 0; i < s.m; ++i) {
      std::fill(row.begin(), row.end(), Acc(0));
      for (int64_t kk = 0; kk < s.k; ++kk) {
        if constexpr (kIsFloat<D>) {
          double av = static_cast<double>(T::load(ma[i * s.k + kk]));
          for (int64_t j = 0; j < s.n; ++j) {
            row[static_cast<size_t>(j)] += av * static_cast<double>(T::load(mb[kk * s.n + j]));
          }
        } else {
          auto av = static_cast<uint64_t>(static_cast<int64_t>(ma[i * s.k + kk]));
          for (int64_t j = 0; j < s.n; ++j) {
            row[static_cast<size_t>(j)] += av * static_cast<uint64_t>(static_cast<int64_t>(mb[kk * s.n + j]));
          }
        }
      }
      for (int64_t j = 0; j < s.n; ++j) {
        if constexpr (kIsFloat<D>) {
          py[out++] = T::store(static_cast<typename T::Compute>(row[static_cast<size_t>(j)]));
        } else {
          // Unsigned-to-signed conversion is modular since C++20: the wrap is well defined.
          py[out++] = static_cast<S>(row[static_cast<size_t>(j)]);
        }
      }
    }
  }
}

}  // namespace

Status ref_MatMul(const KernelArgs& args) {
  const Array& a = args.in[0];
  const Array& b = args.in[1];
  Array& y = args.out[0];
  FUSEBOX_CHECK(a.dtype() == b.dtype() && y.dtype() == a.dtype()) << "matmul: dtypes differ";
  if (a.dtype() == DType::Bool) return Status::invalid("matmul: operands must be numeric, got bool");
  MatmulShape s = plan(a.shape(), b.shape());
  FUSEBOX_CHECK(y.numel() == product(s.batch) * s.m * s.n) << "matmul: result size";
  if (y.numel() == 0) return Status::ok();
  visit_dtype(a.dtype(), [&]<DType D>() {
    if constexpr (D != DType::Bool) matmul<D>(a, b, y, s);
  });
  return Status::ok();
}

Status ref_MatMulInteger(const KernelArgs& args) {
  const Array& a = args.in[0];
  const Array& b = args.in[1];
  Array& y = args.out[0];
  FUSEBOX_CHECK(y.dtype() == DType::I32) << "matmul_integer: result must be i32";
  MatmulShape s = plan(a.shape(), b.shape());
  FUSEBOX_CHECK(y.numel() == product(s.batch) * s.m * s.n) << "matmul_integer: result size";
  const std::vector<int64_t> va = int8_values(a), vb = int8_values(b), za = int8_values(args.in[2]),
                             zb = int8_values(args.in[3]);
  FUSEBOX_CHECK((za.size() == 1 || int64_t(za.size()) == s.m) &&
                (zb.size() == 1 || int64_t(zb.size()) == s.n))
      << "matmul_integer: zero point lengths";
  auto a_zp = [&](int64_t i) { return za[za.size() == 1 ? 0 : size_t(i)]; };
  auto b_zp = [&](int64_t j) { return zb[zb.size() == 1 ? 0 : size_t(j)]; };
  int32_t* py = y.data<int32_t>();
  std::vector<int64_t> row(static_cast<size_t>(s.n));
  int64_t out = 0;
  for (MultiIndex it(s.batch, {s.a_batch_stride, s.b_batch_stride}); !it.done(); it.next()) {
    const int64_t* ma = va.data() + it.offset(0) * s.m * s.k;
    const int64_t* mb = vb.data() + it.offset(1) * s.k * s.n;
    for (int64_t i = 0; i < s.m; ++i) {
      std::fill(row.begin(), row.end(), int64_t(0));
      for (int64_t kk = 0; kk < s.k; ++kk) {
        const int64_t av = ma[i * s.k + kk] - a_zp(i);
        for (int64_t j = 0; j < s.n; ++j) row[size_t(j)] += av * (mb[kk * s.n + j] - b_zp(j));
      }
      // Signed-to-narrower conversion is modular since C++20: the wrap is well defined.
      for (int64_t j = 0; j < s.n; ++j) py[out++] = static_cast<int32_t>(row[size_t(j)]);
    }
  }
  return Status::ok();
}

}  // namespace fusebox::cpu
