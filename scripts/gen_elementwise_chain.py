#!/usr/bin/env python3
"""Writes an N-op element-wise chain as .fbir, for timing region marking:
    scripts/gen_elementwise_chain.py 100000 > /tmp/chain.fbir
    time build/tools/fusebox/fusebox explain /tmp/chain.fbir > /dev/null
"""
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
t = "f32[64]"
out = [f"func @chain(%x: {t}, %y: {t}) -> {t} {{", f"  %0 = add %x, %y : {t}"]
ops = ["mul", "add", "sub"]
for i in range(1, n):
    # Alternate unary and binary steps; binary ones also read %x so the region has inputs.
    if i % 2:
        out.append(f"  %{i} = relu %{i - 1} : {t}")
    else:
        out.append(f"  %{i} = {ops[i % 3]} %{i - 1}, %x : {t}")
out.append(f"  return %{n - 1}")
out.append("}")
print("\n".join(out))
