// The inner loops of the CPU attention kernel (attention_kernel.h), built once per instruction set
// (attention_tile_{generic,avx2,avx512}.cpp include attention_tile.inc with their vector width)
// and picked at run time. One call computes one block of query rows of one (batch, head):
//
//   for each key block j0 (kBlockK keys; causal: only up to the block's last visible key)
//     S  = Q[rows] · Kᵀ[:, j0..]          scores tile, registers -> S (rows x kBlockK, in L1)
//     S  = S·scale + mask; invisible = -inf
//     m' = max(m, rowmax S);  P = e^(S - m');  l = l·e^(m - m') + rowsum P;  O = O·e^(m - m')
//     O += P · V[j0..]                      (online softmax: the Tq x Tk matrix never exists)
//   y[rows] = O / l                         (l = 0, a row that sees no key: NaN, as softmax of -inf)
#pragma once

#include <cstddef>
#include <cstdint>

namespace fusebox::cpu::attention {

inline constexpr int64_t kBlockQ = 64;  // query rows per task
inline constexpr int64_t kBlockK = 64;  // keys per step
inline constexpr int64_t kPad = 16;     // packed rows are padded to this many floats

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Element strides; within a head row the D values are contiguous.
struct Problem {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const float* mask = nullptr;  // null: none
  float* out = nullptr;
  int64_t batch = 0, heads = 0, tq = 0, tk = 0, d = 0;
  int64_t q_s[3] = {}, k_s[3] = {}, v_s[3] = {}, o_s[3] = {};  // batch, head, row
  int64_t m_s[4] = {};                                          // over [B,H,Tq,Tk]; 0 broadcasts
  float scale = 1;
  bool causal = false;
  // Kᵀ packed per (b,h) and key block, so that one block's tile is contiguous (rows of a strided
  // tile would share L1 sets and evict each other): block jb of (b,h) at
  // kt + ((b*heads+h)*kt_blocks + jb)*d*kBlockK as [d][kBlockK], zero past tk.
  const float* kt = nullptr;
  int64_t kt_blocks = 0;
  // V rows packed contiguously per (b,h) at v_packed + (b*heads+h)*tk*dp as [tk][dp], zero past d.
  const float* v_packed = nullptr;
  int64_t dp = 0;  // round_up(d, kPad)
};

// Floats of scratch one call needs.
inline size_t scratch_floats(const Problem& p) {
  return size_t(kBlockQ * kBlockK + kBlockQ * p.dp + 2 * kBlockQ + kBlockQ * p.d);
}

using BlockFn = void (*)(const Problem& p, int64_t b, int64_t h, int64_t i0, int64_t rows, float* scratch);

namespace generic { void block(const Problem&, int64_t, int64_t, int64_t, int64_t, float*); }
namespace avx2 { void block(const Problem&, int64_t, int64_t, int64_t, int64_t, float*); }
namespace avx512 { void block(const Problem&, int64_t, int64_t, int64_t, int64_t, float*); }

}  // namespace fusebox::cpu::attention
