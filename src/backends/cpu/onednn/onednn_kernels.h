// oneDNN kernels for the CPU contractions: matmul (numpy semantics) and conv2d /
// conv_transpose2d (NCHW), each with a fused epilogue  y = act(contraction + bias + residual)
// carried by oneDNN post-ops, so the result is written once. Activations are NCHW or, when the
// spec says so, the blocked nChw<b>c layout of ir/layout.h.
//
// A kernel is created once per node (its attributes) and is const afterwards: primitives are
// built on the first run of each concrete shape set and cached inside it, and several threads
// may run one kernel at once.
//
// The library is optional: a build without oneDNN (libdnnl-dev) compiles this interface, and
// create() answers Status::unimplemented; callers then use the reference kernels. So does any
// dtype but f32.
#pragma once

#include <cstdint>
#include <memory>

#include "fusebox/status.h"
#include "ir/array.h"
#include "ir/epilogue.h"

namespace fusebox::cpu::onednn {

// True when this build links oneDNN.
bool available();

// The block b of the nChw<b>c layout (ir/layout.h) this host's convolutions run fastest on: 16
// with AVX-512, 8 otherwise; 0 without oneDNN.
int64_t preferred_nchwc_block();

// to_nchwc / to_nchw through oneDNN's reorder (`out` preallocated with the converted shape):
// threaded and vectorised, unlike the reference loop. Unimplemented without oneDNN, for a dtype
// but f32, i32, i8 and u8, or a block oneDNN has no format for (4, 8 and 16 have one).
Status reorder_layout(const Array& in, Array& out);

// The epilogue activations of the IR (ir/epilogue.h).
using Act = EpilogueAct;

struct Epilogue {
  bool bias = false;      // an operand added along the output channels: matmul: [N] / rank<=1 / [1,..,1,N]; conv: [C_out]
  bool residual = false;  // an operand of the output's full shape, added after the bias
  Act act = Act::None;    // applied last:  y = act(contraction + bias + residual)
  double alpha = 0, beta = 0;  // LeakyRelu: alpha = slope. Clip: alpha = min, beta = max (-inf/+inf when a
                               // bound is absent; NaN reads as absent). HardSigmoid: max(0, min(1, alpha*x + beta)).
};

struct MatmulSpec {
  DType dtype = DType::F32;
  Epilogue ep;
};

class MatmulKernel {
 public:
  static Expected<std::unique_ptr<MatmulKernel>> create(const MatmulSpec& spec);
  ~MatmulKernel();
  MatmulKernel(const MatmulKernel&) = delete;
  MatmulKernel& operator=(const MatmulKernel&) = delete;

  // numpy matmul exactly as fusebox's `matmul` op: a [...,M,K] or [K], b [...,K,N] or [K], batch
  // dims broadcast; out is preallocated with the result shape (contents undefined).
  // bias/residual are null unless the spec says so.
  Status run(const Array& a, const Array& b, const Array* bias, const Array* residual, Array& out) const;


 private:
  struct Impl;
  explicit MatmulKernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct ConvSpec {
  DType dtype = DType::F32;
  bool transposed = false;  // conv_transpose2d
  int64_t stride[2] = {1, 1}, pad[4] = {0, 0, 0, 0} /* top, left, bottom, right */, dilation[2] = {1, 1};
  int64_t groups = 1, output_padding[2] = {0, 0};
  // 0: x, the residual and out are NCHW. b: they are nChw<b>c ([N,C/b,H,W,b], ir/layout.h), read
  // and written as they are (conv2d only, not transposed); with `nhwc`, each is instead one block
  // of all its channels ([N,1,H,W,C], channels-last) and `block` is x's channel count.
  int64_t block = 0;
  bool nhwc = false;
  Epilogue ep;
  // Use oneDNN's Winograd algorithm when it has a kernel for the convolution (3x3, stride 1, no
  // dilation, groups 1, f32; AVX-512 in oneDNN 2.6), reordering x and out to and from its
  // blocked format; else the direct algorithm, as without it.
  bool winograd = false;
};

class ConvKernel {
 public:
  // constant_weights: non-null when the weights are a compile-time constant: they are reordered
  // into the primitive's preferred format once per shape binding and reused (never per run); run()
  // then reads them from here, not from its `w` (which must have their shape).
  static Expected<std::unique_ptr<ConvKernel>> create(const ConvSpec& spec, const Array* constant_weights = nullptr);
  ~ConvKernel();
  ConvKernel(const ConvKernel&) = delete;
  ConvKernel& operator=(const ConvKernel&) = delete;

  // NCHW x, weights [O, C/g, kh, kw] (conv) or [C, O/g, kh, kw] (transposed), the semantics of
  // reference/conv.cpp including asymmetric pads and output_padding (the output size comes from
  // `out`); out is preallocated (NCHW).
  Status run(const Array& x, const Array& w, const Array* bias, const Array* residual, Array& out) const;


 private:
  struct Impl;
  explicit ConvKernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Whether IntegerKernel::create can make kernels on this host at all (oneDNN with VNNI, and not
// turned off by FUSEBOX_ONEDNN_INT8=0).
bool int8_exact();

// matmul_integer / conv2d_integer (reference semantics: exact sums of 8-bit products, i32) through
// oneDNN's int8 primitives, made only where their result is exact (integer.cpp says when: VNNI,
// constant weights that fit s8 less their zero point, sums split into runs below 2^24); create()
// answers unimplemented otherwise, and run() for shapes it leaves to the reference (a per-row zero
// point, a batched b).

struct IntegerSpec {
  bool conv = false;          // conv2d_integer (NCHW); else matmul_integer with a [K, N] weight
  DType x_dtype = DType::U8;  // the activations' dtype, u8 or i8
  int64_t stride[2] = {1, 1}, pad[4] = {0, 0, 0, 0} /* top, left, bottom, right */, dilation[2] = {1, 1};
  int64_t groups = 1;
  bool nhwc = false;  // conv: x and the result are channels-last [N,1,H,W,C] (ConvSpec::nhwc)
};

class IntegerKernel {
 public:
  // weights: b [K, N] or w [O, C/g, kh, kw] (u8 or i8); weight_zp: a scalar or one per column / output
  // channel.
  static Expected<std::unique_ptr<IntegerKernel>> create(const IntegerSpec& spec, const Array& weights,
                                                         const Array& weight_zp);
  ~IntegerKernel();
  IntegerKernel(const IntegerKernel&) = delete;
  IntegerKernel& operator=(const IntegerKernel&) = delete;

  // x: a [..., M, K], or an NCHW (nhwc: [N,1,H,W,C]) x; x_zp its zero point; out preallocated (i32).
  Status run(const Array& x, const Array& x_zp, Array& out) const;
  // The runs of input channels (or of K) the sums are split into to stay exact (integer.cpp).
  int parts() const;

 private:
  struct Impl;
  explicit IntegerKernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// max_pool2d / avg_pool2d (reference/pool.cpp semantics) through oneDNN pooling. ceil_mode is in
// the result's size (`out`), as for the reference kernel. An avg pool with count_include_pad
// whose last window overhangs the end pad (ceil_mode) divides differently in oneDNN (by the
// whole window): run() answers Status::unimplemented there and the caller uses the reference.
struct PoolSpec {
  DType dtype = DType::F32;
  bool max = true;  // else average
  int64_t kernel[2] = {1, 1}, stride[2] = {1, 1}, pad[4] = {0, 0, 0, 0} /* top, left, bottom, right */;
  int64_t dilation[2] = {1, 1};  // max pool only
  bool count_include_pad = false;  // avg pool only
  int64_t block = 0;               // as ConvSpec::block: x and out are nChw<b>c when set
  bool nhwc = false;               // as ConvSpec::nhwc
};

class PoolKernel {
 public:
  static Expected<std::unique_ptr<PoolKernel>> create(const PoolSpec& spec);
  ~PoolKernel();
  PoolKernel(const PoolKernel&) = delete;
  PoolKernel& operator=(const PoolKernel&) = delete;

  // NCHW x; out preallocated (NCHW) with the pooled size.
  Status run(const Array& x, Array& out) const;

 private:
  struct Impl;
  explicit PoolKernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fusebox::cpu::onednn
