// fused_attention (ops.def) in terms of the primitives it replaces: its shape rule, and the one
// unfused form that its reference kernel runs, `fuse-attention` matches and tests unfuse with.
//
//   q [B,Tq,H*D] ─ reshape [B,Tq,H,D] ─ transpose [0,2,1,3] ─┐            (a [B,H,Tq,D] q is used as it is)
//   k [B,Tk,H*D] ─ reshape [B,Tk,H,D] ─ transpose [0,2,3,1] ─┤ matmul      (a [B,H,Tk,D] k: transpose [0,1,3,2])
//                                                            s = mul s, scale        (absent when scale = 1)
//                                                            s = add s, mask         (with a mask operand)
//                                                            s = add s, causal_mask  (causal: 0 / -inf, static T)
//                                                            p = softmax s {axis = -1}
//   v [B,Tk,H*D] ─ reshape ─ transpose [0,2,1,3] ──────────── o = matmul p, v
//                                                            transpose [0,2,1,3] ─ reshape [B,Tq,H*D]  (merge_heads)
//
// Causal: query i sees key j when j <= i + Tk - Tq (the last query sees every key, as in decoding
// with a cache); a row that sees no key is NaN, as softmax over -inf alone is.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "fusebox/status.h"
#include "ir/graph.h"

namespace fusebox {

// Result type of `n` (a fused_attention) over operand types `in`; errors start with
// "fused_attention: " and say which operand or attribute is wrong.
Expected<std::vector<TensorType>> infer_fused_attention(const Node& n, std::span<const TensorType> in);

// The primitive nodes computing fused_attention `n` of `g`, appending their values (types
// inferred) to `g`; the last node defines n's result. Causal attention needs static sequence
// lengths (its mask is a constant): otherwise an error.
Expected<std::vector<Node>> unfused_attention_nodes(Graph& g, const Node& n);

// Replaces every fused_attention of `g` (or those `which` selects) by its primitives; returns how
// many were replaced.
Expected<size_t> unfuse_attention(Graph& g, const std::function<bool(const Graph&, const Node&)>& which = {});

// "matmul+scale+mask+softmax+matmul" (the report's name of the fused op).
std::vector<std::string> fused_attention_steps(const Node& n);

}  // namespace fusebox
