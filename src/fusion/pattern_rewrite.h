// What the contraction pattern passes (fuse-matmul-bias-act, fuse-matmul-residual,
// fuse-conv-bias-act) and canonicalize's batch-norm folding share: walking a single-use chain
// after a node, recognising per-channel and full-shape operands, emitting small helper nodes
// (folded at once when their operands are constants), and replacing a matched chain by one
// node.
//
//   decide       sole_user() / next_in_chain(): the one node that reads a value, with the
//                reason when there is not exactly one (graph outputs count as uses)
//   materialize  a Rewrite per match: `prelude` nodes (weights scaled, biases combined) and the
//                fused node, put where the last absorbed node was; the absorbed nodes go.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/claim_table.h"
#include "fusion/pass.h"
#include "ir/epilogue.h"
#include "ir/use_info.h"

namespace fusebox {

// The one node reading `v`, or nullopt with the reason (several users, or a graph output).
struct ChainStep {
  int user = -1;
  std::string why_not;  // when user < 0: "%3 is also a graph output", "%3 has 2 users"
};
ChainStep next_in_chain(const Graph& g, const UseInfo& uses, ValueId v, const std::vector<std::string>& names);

// The operand of binary node `n` that is not `v` (kNoValue when both are `v`).
ValueId other_operand(const Node& n, ValueId v);

// True when `t` broadcasts against `result` as a per-channel vector: rank <= result rank, every
// dim 1 except the one aligned with `axis` of `result` (counted from the front), which equals
// that dim. A conv bias is [C,1,1] or [1,C,1,1] against [N,C,H,W] (axis 1).
bool is_per_channel(const TensorType& t, const TensorType& result, int axis);
// True when `t` holds one value broadcast everywhere (every dim 1, rank <= result's): the
// same for every channel, so a per-channel operand too.
bool is_broadcast_scalar(const TensorType& t, const TensorType& result);
// True when `t` has exactly `result`'s dtype and shape.
bool is_full_shape(const TensorType& t, const TensorType& result);

struct Rewrite;

// The decisions every contraction pattern makes, with their remarks.
struct EpilogueMatcher {
  const Graph& g;
  const UseInfo& uses;
  const std::vector<std::string>& names;
  PassContext& ctx;
  const char* pattern;  // "fused_conv_bias_act"
  FusedKind kind;

  // The single node reading `v` when it is one `is_candidate` accepts. When `v` has a candidate
  // user but other uses too (or is returned), records why `head` stops there and returns null.
  const Node* next(size_t head, ValueId v, const std::function<bool(const Node&)>& is_candidate) const;
  // The contraction's result dtype is claimed by the target (else records the refusal).
  bool dtype_claimed(size_t head) const;
  // Absorbs the activation reading `*v` into `rw` when the target claims it for `kind`.
  void absorb_activation(size_t head, ValueId* v, Rewrite* rw, Epilogue* ep) const;
  void miss(size_t head, const Node& user, MissReason reason, const std::string& detail) const;
};
bool is_add(const Node& n);
bool is_activation(const Node& n);

struct Rewrite {
  std::vector<size_t> absorbed;  // nodes replaced; the last one (in graph order) is the anchor
  std::vector<Node> prelude;     // helper nodes placed before the fused node
  Node fused;                    // defines the anchor's result value
};

// Builds helper nodes for a Rewrite's prelude.
class Prelude {
 public:
  Prelude(Graph& g, PassContext& ctx, const UseInfo& uses, std::vector<Node>& out)
      : g_(g), ctx_(ctx), uses_(uses), out_(out) {}
  // Appends `op` over `inputs` (its type inferred) and returns its result; when every operand
  // is a constant and the context can evaluate, a constant holding the result instead.
  Expected<ValueId> emit(Op op, std::vector<ValueId> inputs, Attrs attrs = {});
  // A rank-0 constant of `dtype`.
  ValueId scalar(DType dtype, double value);
  // A per-channel operand (is_per_channel or is_broadcast_scalar) as a [channels] vector.
  Expected<ValueId> channel_vector(ValueId v, int64_t channels);
  // `v` reshaped to `dims` (static).
  Expected<ValueId> reshape(ValueId v, std::vector<int64_t> dims);

 private:
  const Array* constant_value(ValueId v) const;
  Graph& g_;
  PassContext& ctx_;
  const UseInfo& uses_;  // of the graph before any rewrite: new values have no entry
  std::vector<Node>& out_;
};

// Applies rewrites: each fused node (after its prelude) takes the place of its last absorbed
// node, the other absorbed nodes are removed. A rewrite that wants a node an earlier one took is
// dropped. Returns how many were applied.
size_t apply_rewrites(Graph& g, std::vector<Rewrite> rewrites);

}  // namespace fusebox
