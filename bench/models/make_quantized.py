#!/usr/bin/env python3
"""Writes a quantized CNN in ONNX's QOperator form (QuantizeLinear, QLinearConv, QLinearMatMul,
DequantizeLinear, as ONNX Runtime's quantizer emits them) and the cases make_reference.js runs.

    python3 bench/models/make_quantized.py OUT_DIR

OUT_DIR/qcnn.onnx: x f32 [N, 64, 56, 56] -> QuantizeLinear (u8) -> three QLinearConv 3x3 64->64
(pad 1; int8 weights with a scale per output channel, zero point 0; i32 bias; u8 results with
zero point 0, so ReLU-like) -> a 1x1 QLinearConv 64->128 -> DequantizeLinear -> f32.
OUT_DIR/qmlp.onnx: x f32 [N, 512] -> QuantizeLinear -> QLinearMatMul 512->1024 -> QLinearMatMul
1024->512 -> DequantizeLinear.
OUT_DIR/dqmlp.onnx: dynamic quantization (ONNX Runtime's quantize_dynamic form) of a BERT-sized
MLP, x f32 [N, 768] -> 3072 -> 768: DynamicQuantizeLinear, MatMulInteger, Cast, Mul by the scales,
bias, ReLU.
Weights are random (seeded), drawn so that each output channel uses the int8 range as a
quantizer's symmetric per-channel scales make it do. OUT_DIR/cases.json: qcnn at batch 1 and 8,
qmlp at batch 64, dqmlp at 128 rows.
Needs Debian's python3-onnx and python3-numpy.
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def weights(rng, shape):
    """int8 weights with a scale per output channel (axis 0): a normal draw scaled so that each
    channel's largest magnitude is 127, as symmetric per-channel quantization gives."""
    w = rng.standard_normal(shape).astype(np.float32)
    flat = w.reshape(shape[0], -1)
    peak = np.abs(flat).max(axis=1, keepdims=True)
    q = np.round(flat / peak * 127).astype(np.int8).reshape(shape)
    scale = (0.05 / 127 * np.ones(shape[0])).astype(np.float32)
    return q, scale


class Net:
    """Initializers and nodes of a model whose input x is quantized to u8 (scale 0.02, zero
    point 128) by its first node, giving q0."""

    def __init__(self):
        self.inits, self.nodes = [], []
        self.x_scale, self.x_zp = self.const("x_scale", np.float32(0.02)), self.const("x_zp", np.uint8(128))
        self.nodes.append(helper.make_node("QuantizeLinear", ["x", self.x_scale, self.x_zp], ["q0"]))

    def const(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def model(self, name, last, scale, zp, x_shape, y_shape):
        """The model, its last quantized value `last` dequantized as its output y."""
        self.nodes.append(helper.make_node("DequantizeLinear", [last, scale, zp], ["y"]))
        graph = helper.make_graph(
            self.nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def output_scale(x_scale, w, rms_in, w_scale):
    """The output scale that spreads the integer sums over about 40 levels (one standard
    deviation): sums of K products of inputs whose rms is `rms_in` levels with the weights `w`."""
    k = w[0].size
    acc_std = np.sqrt(k) * rms_in * np.sqrt(np.mean(w.astype(np.float64) ** 2))
    return acc_std, np.float32(acc_std * x_scale * w_scale / 40)


def qcnn(rng):
    net = Net()
    const, nodes = net.const, net.nodes
    prev, prev_scale, prev_zp, channels = "q0", net.x_scale, net.x_zp, 64
    # x is uniform in [-1, 1): 50 / sqrt(3) levels rms about its zero point; after each layer
    # (zero point 0: the negative half clips to 0) 40 / sqrt(2).
    x_scale, rms = 0.02, 50 / np.sqrt(3)
    layers = [(64, 3), (64, 3), (64, 3), (128, 1)]
    for i, (out, k) in enumerate(layers):
        w, w_scale = weights(rng, (out, channels, k, k))
        acc_std, y = output_scale(x_scale, w, rms, w_scale[0])
        bias = rng.integers(-int(acc_std / 4), int(acc_std / 4), size=out).astype(np.int32)
        y_scale, y_zp = const(f"y{i}_scale", y), const(f"y{i}_zp", np.uint8(0))
        x_scale, rms = y, 40 / np.sqrt(2)
        inputs = [prev, prev_scale, prev_zp, const(f"w{i}", w), const(f"w{i}_scale", w_scale),
                  const(f"w{i}_zp", np.zeros(out, np.int8)), y_scale, y_zp, const(f"b{i}", bias)]
        nodes.append(helper.make_node("QLinearConv", inputs, [f"q{i + 1}"], pads=[k // 2] * 4,
                                      kernel_shape=[k, k]))
        prev, prev_scale, prev_zp, channels = f"q{i + 1}", y_scale, y_zp, out
    return net.model("qcnn", prev, prev_scale, prev_zp, ["N", 64, 56, 56], ["N", 128, 56, 56])


def qmlp(rng):
    net = Net()
    const, nodes = net.const, net.nodes
    prev, prev_scale, prev_zp, width = "q0", net.x_scale, net.x_zp, 512
    x_scale, rms = 0.02, 50 / np.sqrt(3)  # then 40 levels about the zero point 128
    for i, out in enumerate([1024, 512]):
        w, w_scale = weights(rng, (out, width))
        _, y = output_scale(x_scale, w, rms, w_scale[0])
        y_scale, y_zp = const(f"y{i}_scale", y), const(f"y{i}_zp", np.uint8(128))
        x_scale, rms = y, 40
        inputs = [prev, prev_scale, prev_zp, const(f"w{i}", np.ascontiguousarray(w.T)),
                  const(f"w{i}_scale", w_scale[0]), const(f"w{i}_zp", np.int8(0)), y_scale, y_zp]
        nodes.append(helper.make_node("QLinearMatMul", inputs, [f"q{i + 1}"]))
        prev, prev_scale, prev_zp, width = f"q{i + 1}", y_scale, y_zp, out
    return net.model("qmlp", prev, prev_scale, prev_zp, ["N", 512], ["N", 512])


def dqmlp(rng):
    """An MLP in the form of dynamic quantization (ONNX Runtime's quantize_dynamic): per layer,
    DynamicQuantizeLinear of the f32 activations, MatMulInteger with int8 weights, Cast, a Mul by
    the two scales, the f32 bias, ReLU between the layers."""
    inits, nodes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    prev, width = "x", 768
    for i, out in enumerate([3072, 768]):
        w, w_scale = weights(rng, (out, width))
        w_name, w_zp = const(f"w{i}", np.ascontiguousarray(w.T)), const(f"w{i}_zp", np.int8(0))
        nodes.append(helper.make_node("DynamicQuantizeLinear", [prev], [f"q{i}", f"s{i}", f"z{i}"]))
        nodes.append(helper.make_node("MatMulInteger", [f"q{i}", w_name, f"z{i}", w_zp], [f"acc{i}"]))
        nodes.append(helper.make_node("Cast", [f"acc{i}"], [f"accf{i}"], to=TensorProto.FLOAT))
        nodes.append(helper.make_node("Mul", [f"s{i}", const(f"w{i}_scale", w_scale[0])], [f"scale{i}"]))
        nodes.append(helper.make_node("Mul", [f"accf{i}", f"scale{i}"], [f"real{i}"]))
        bias = const(f"b{i}", (0.1 * rng.standard_normal(out)).astype(np.float32))
        last = i == 1
        nodes.append(helper.make_node("Add", [f"real{i}", bias], ["y" if last else f"pre{i}"]))
        if not last:
            nodes.append(helper.make_node("Relu", [f"pre{i}"], [f"h{i}"]))
            prev, width = f"h{i}", out
    graph = helper.make_graph(nodes, "dqmlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 768])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 768])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def main():
    if len(sys.argv) != 2:
        print("usage: make_quantized.py OUT_DIR", file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(7)
    for name, model in (("qcnn", qcnn(rng)), ("qmlp", qmlp(rng)), ("dqmlp", dqmlp(rng))):
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(out, name + ".onnx"))
    cases = [{"name": f"qcnn_{n}x64x56x56", "model": "qcnn.onnx", "shape": [n, 64, 56, 56], "seed": 20 + n}
             for n in (1, 8)]
    cases.append({"name": "qmlp_64x512", "model": "qmlp.onnx", "shape": [64, 512], "seed": 30})
    cases.append({"name": "dqmlp_128x768", "model": "dqmlp.onnx", "shape": [128, 768], "seed": 31})
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
