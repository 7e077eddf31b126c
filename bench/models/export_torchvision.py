"""Exports torchvision's resnet50 and efficientnet_b0 to ONNX for the model benchmark.

    python3 bench/models/export_torchvision.py OUT_DIR [--f16]

Random weights (torch.manual_seed(0), no download: nothing outside the package registries is
reachable, and the benchmark needs the architecture, not trained weights), eval mode, batch as
a dynamic axis, opset 13. Writes OUT_DIR/resnet50.onnx, OUT_DIR/efficientnet_b0.onnx and
OUT_DIR/cases.json (the cases make_reference.js runs: batch 1 and 8 at 224x224). --f16 also
writes OUT_DIR/resnet50_f16.onnx and OUT_DIR/efficientnet_b0_f16.onnx: the same weights in f16,
f16 input and output, traced on the GPU (needs CUDA: PyTorch's CPU convolutions have no f16).
"""
import inspect
import json
import os
import sys

import torch
import torchvision


def main() -> int:
    args = sys.argv[1:]
    f16 = "--f16" in args
    args = [a for a in args if a != "--f16"]
    if len(args) != 1:
        print("usage: export_torchvision.py OUT_DIR [--f16]", file=sys.stderr)
        return 2
    out = args[0]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    cases = []
    for seed, name in enumerate(["resnet50", "efficientnet_b0"]):
        model = getattr(torchvision.models, name)(weights=None).eval()
        # Random init leaves batch-norm statistics at 0/1; give them spread so folding matters.
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, torch.nn.BatchNorm2d):
                    m.running_mean.uniform_(-0.1, 0.1)
                    m.running_var.uniform_(0.5, 1.5)
        path = os.path.join(out, name + ".onnx")
        example = torch.randn(1, 3, 224, 224)
        # The TorchScript exporter (newer torch defaults to the dynamo one, which writes other
        # opsets and op forms).
        legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
        torch.onnx.export(model, example, path, opset_version=13, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "N"}, "y": {0: "N"}}, **legacy)
        short = "rn50" if name == "resnet50" else "effb0"
        for batch in (1, 8):
            cases.append({"name": f"{short}_{batch}x3x224x224", "model": name + ".onnx",
                          "shape": [batch, 3, 224, 224], "seed": 10 * seed + batch})
        print(f"exported {path}")
        if f16:
            half = model.cuda().half()
            path16 = os.path.join(out, name + "_f16.onnx")
            torch.onnx.export(half, example.cuda().half(), path16, opset_version=13, input_names=["x"],
                              output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}}, **legacy)
            print(f"exported {path16}")
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
