#include "fusion/report.h"

#include "ir/fused_norm_ops.h"
#include "ir/fused_attention_op.h"
#include "ir/fused_ops.h"

#include <cstdio>

namespace fusebox {

namespace {

double value_bytes(const TensorType& t, const SymbolBindings& sizes) {
  double n = dtype_size(t.dtype);
  for (const Dim& d : t.shape) {
    if (d.is_static()) {
      n *= double(d.value());
    } else if (d.is_symbol()) {
      auto it = sizes.find(d.symbol_name());
      n *= it == sizes.end() ? 1.0 : double(it->second);
    }
  }
  return n;
}

std::string format_bytes(double b) {
  char buf[32];
  if (b >= 1e9) std::snprintf(buf, sizeof(buf), "%.1f GB", b / 1e9);
  else if (b >= 1e6) std::snprintf(buf, sizeof(buf), "%.1f MB", b / 1e6);
  else if (b >= 1e3) std::snprintf(buf, sizeof(buf), "%.1f KB", b / 1e3);
  else std::snprintf(buf, sizeof(buf), "%.0f B", b);
  return buf;
}

std::string plural(size_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

}  // namespace

size_t count_kernels(const Graph& g) {
  size_t n = 0;
  for (const Node& node : g.nodes()) n += node.op != Op::Constant;
  return n;
}

double estimate_bytes_moved(const Graph& g, const SymbolBindings& sizes) {
  double total = 0;
  for (const Node& n : g.nodes()) {
    if (n.op == Op::Constant) continue;
    for (ValueId v : n.inputs) total += value_bytes(g.type(v), sizes);
    for (ValueId v : n.outputs) total += value_bytes(g.type(v), sizes);
  }
  return total;
}

FusionReport make_fusion_report(const Graph& before, const Graph& after, FusionTarget target,
                                const FusionRemarks& remarks,
                                const std::map<std::string, int64_t>& stats,
                                const SymbolBindings& sizes) {
  FusionReport r;
  r.function = after.name();
  r.target = target;
  r.nodes_before = before.nodes().size();
  r.nodes_after = after.nodes().size();
  r.kernels_before = count_kernels(before);
  r.kernels_after = count_kernels(after);
  r.bytes_before = estimate_bytes_moved(before, sizes);
  r.bytes_after = estimate_bytes_moved(after, sizes);
  std::vector<std::string> unsized;
  for (const std::string& s : before.input_symbols())
    if (!sizes.count(s)) unsized.push_back(s);
  for (const std::string& s : unsized) r.size_note += (r.size_note.empty() ? "" : ", ") + s + "=1";
  for (const Node& n : after.nodes()) {
    if (n.op == Op::FusedAttention) {
      FusedEntry e;
      e.kind = std::string(n.info().keyword);
      for (const std::string& step : fused_attention_steps(n)) e.name += (e.name.empty() ? "" : "+") + step;
      e.ops = fused_attention_steps(n).size();
      e.inputs = n.inputs.size();
      e.outputs = n.outputs.size();
      r.fused.push_back(std::move(e));
      continue;
    }
    if (is_fused_contraction(n.op) || is_fused_norm(n.op)) {
      FusedEntry e;
      e.kind = std::string(n.info().keyword);
      const std::vector<std::string> steps = is_fused_norm(n.op) ? fused_norm_steps(n) : fused_contraction_steps(n);
      for (const std::string& step : steps) e.name += (e.name.empty() ? "" : "+") + step;
      e.ops = steps.size();  // a bias in conv2d's own operand counts as a step
      e.inputs = n.inputs.size();
      e.outputs = n.outputs.size();
      r.fused.push_back(std::move(e));
      continue;
    }
    if (n.op == Op::FusedSwiglu) {  // matmul (+ bias), two slices, silu, mul: ir/fused_swiglu_op.h
      const bool bias = n.inputs.size() == 3;
      r.fused.push_back(FusedEntry{std::string(n.info().keyword), bias ? "matmul+bias+swiglu" : "matmul+swiglu",
                                   bias ? 6u : 5u, n.inputs.size(), n.outputs.size()});
      continue;
    }
    if (!n.body) continue;
    FusedEntry e;
    e.kind = std::string(n.info().keyword);
    e.name = n.attrs.has("name") ? n.attr_str("name") : e.kind;
    for (const Node& b : n.body->nodes()) e.ops += b.op != Op::Constant;
    e.inputs = n.inputs.size();
    e.outputs = n.outputs.size();
    r.fused.push_back(std::move(e));
  }
  r.missed = remarks.missed;
  r.notes = remarks.notes;
  const std::string skipped = "pipeline.skipped.";
  for (const auto& [key, value] : stats)
    if (key.rfind(skipped, 0) == 0) r.skipped_passes.push_back(key.substr(skipped.size()));
  return r;
}

std::string FusionReport::to_string() const {
  std::string s = "fusion report @" + function + " (target " + std::string(target_name(target)) + ")\n";
  s += "  nodes    " + std::to_string(nodes_before) + " -> " + std::to_string(nodes_after) + "\n";
  s += "  kernels  " + std::to_string(kernels_before) + " -> " + std::to_string(kernels_after) + "\n";
  s += "  bytes    " + format_bytes(bytes_before) + " -> " + format_bytes(bytes_after);
  if (!size_note.empty()) s += " (sized with " + size_note + ")";
  s += "\n";
  std::map<std::string, std::vector<const FusedEntry*>> by_kind;
  for (const FusedEntry& e : fused) by_kind[e.kind].push_back(&e);
  if (by_kind.empty()) s += "  fused    none\n";
  for (const auto& [kind, entries] : by_kind) {
    s += "  fused    " + kind + " x" + std::to_string(entries.size()) + " (";
    for (size_t i = 0; i < entries.size(); ++i) {
      const FusedEntry& e = *entries[i];
      s += (i ? "; " : "") + e.name + ": " + plural(e.ops, "op") + ", " + plural(e.inputs, "input") + ", " +
           plural(e.outputs, "output");
    }
    s += ")\n";
  }
  if (missed.empty()) s += "  missed   none\n";
  for (const MissedFusion& m : missed) {
    s += "  missed   " + m.pattern + " at " + m.node + ": " + miss_reason_name(m.reason) + ": " + m.detail;
    if (!m.hint.empty()) s += " (hint: " + m.hint + ")";
    s += "\n";
  }
  for (const auto& [topic, line] : notes) {
    std::string label = topic;
    if (label.size() < 8) label.resize(8, ' ');
    s += "  " + label + " " + line + "\n";
  }
  if (!skipped_passes.empty()) {
    std::string list;
    for (const std::string& p : skipped_passes) list += (list.empty() ? "" : ", ") + p;
    s += "  pending  " + list + " (planned for this target, not in this build)\n";
  }
  return s;
}

Status assert_fusion_clean(const FusionReport& report) {
  if (report.missed.empty()) return Status::ok();
  std::string msg = "fusion of @" + report.function + " missed " + std::to_string(report.missed.size()) + " pattern(s):";
  for (const MissedFusion& m : report.missed) {
    msg += "\n  " + m.pattern + " at " + m.node + ": " + miss_reason_name(m.reason) + ": " + m.detail;
  }
  return Status::invalid(msg);
}

}  // namespace fusebox
