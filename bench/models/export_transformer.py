"""Exports a 4-layer transformer encoder to ONNX for the model benchmark.

    python3 bench/models/export_transformer.py OUT_DIR

torch.nn.TransformerEncoder: 4 layers, d_model 512, 8 heads, dim_feedforward 2048, GELU (the
exact erf form), batch_first, post-norm (PyTorch's default), random weights (torch.manual_seed(0)),
eval mode, with the sequence as a dynamic axis. The nested-tensor fast path is off
(enable_nested_tensor=False, and the export traces the plain ops), so the model is written as
MatMul/Add/Softmax/... and layer norm and GELU as the primitive ops the exporter writes for them.
Opset 13: PyTorch writes LayerNormalization only from opset 17, so at 13 the layer norms are
ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add chains, the form older exports and many
published models have. Writes OUT_DIR/transformer.onnx and OUT_DIR/cases.json (the cases
make_reference.js runs: batch 1 at sequence 128 and 512).
"""
import json
import os
import sys

import torch

D_MODEL, HEADS, FFN, LAYERS = 512, 8, 2048, 4


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: export_transformer.py OUT_DIR", file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(D_MODEL, HEADS, dim_feedforward=FFN, dropout=0.0,
                                             activation="gelu", batch_first=True)
    model = torch.nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False).eval()
    # The encoder deep-copies one layer, so all layers would hold the same weights (and the exporter
    # would store them once): draw each layer's anew, and give the norms' scale and shift spread.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.MultiheadAttention):
                m._reset_parameters()
                torch.nn.init.uniform_(m.in_proj_bias, -0.1, 0.1)
            elif isinstance(m, torch.nn.Linear):
                m.reset_parameters()
            elif isinstance(m, torch.nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
    path = os.path.join(out, "transformer.onnx")
    example = torch.randn(1, 128, D_MODEL)
    # The fast path (torch._transformer_encoder_layer_fwd) is taken only without autograd
    # tracking; tracing under torch.onnx.export records the plain ops.
    torch.onnx.export(model, example, path, opset_version=13, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {1: "S"}, "y": {1: "S"}})
    cases = [{"name": f"tfm_1x{s}x{D_MODEL}", "model": "transformer.onnx", "shape": [1, s, D_MODEL], "seed": s}
             for s in (128, 512)]
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
    print(f"exported {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
