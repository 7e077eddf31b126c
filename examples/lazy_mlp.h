// The two-layer MLP of examples/lazy_mlp.cpp (also timed by bench/lazy_bench.cpp's BM_MlpStep):
// forward, backward written by hand, and an SGD update, all recorded through the lazy Tensor API.
#pragma once

#include "fusebox/tensor.h"

struct Mlp {
  fusebox::Tensor w1, b1, w2, b2;

  static Mlp init(int64_t in, int64_t hidden, int64_t out, fusebox::lazy::Device d = fusebox::lazy::Device::cpu()) {
    using fusebox::DType;
    using fusebox::Tensor;
    return {Tensor::randn({in, hidden}, 1, DType::F32, d) * (1.0 / 8), Tensor::zeros({hidden}, DType::F32, d),
            Tensor::randn({hidden, out}, 2, DType::F32, d) * (1.0 / 8), Tensor::zeros({out}, DType::F32, d)};
  }
  fusebox::Tensor forward(const fusebox::Tensor& x, fusebox::Tensor* hidden = nullptr) const {
    fusebox::Tensor h = (matmul(x, w1) + b1).relu();
    if (hidden) *hidden = h;
    return matmul(h, w2) + b2;
  }
  // One SGD step on the mean squared error; returns the loss (still lazy).
  fusebox::Tensor sgd_step(const fusebox::Tensor& x, const fusebox::Tensor& target, double lr) {
    using fusebox::Tensor;
    const Tensor zero = Tensor::scalar(0, fusebox::DType::F32, x.device());
    Tensor h;
    Tensor y = forward(x, &h);
    Tensor diff = y - target;
    Tensor loss = (diff * diff).mean();
    const double n = double(diff.numel());
    Tensor dy = diff * (2.0 / n);
    Tensor dw2 = matmul(h.transpose({1, 0}), dy);
    Tensor db2 = dy.sum({0});
    Tensor dh = where(h > zero, matmul(dy, w2.transpose({1, 0})), zero);
    Tensor dw1 = matmul(x.transpose({1, 0}), dh);
    Tensor db1 = dh.sum({0});
    w1 = w1 - dw1 * lr;
    b1 = b1 - db1 * lr;
    w2 = w2 - dw2 * lr;
    b2 = b2 - db2 * lr;
    return loss;
  }
};
