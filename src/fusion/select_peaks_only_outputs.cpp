// select-peaks-only-outputs — the IO output gate (spec §4.6).
//
// Matches: an output slot the caller marked optional (Graph::optional_outputs, from
// CompileOptions::optional_outputs or `return ... {optional = [k]}`) that returns the result of
// an fft_magnitude whose peaks are also returned (in a slot that is not optional).
// Decides: per target, from the claim table's TargetIoParams, what materialising the spectrum
// costs beyond the peaks alone: kernel launches and device traffic (the same either way: peaks
// reads the spectrum on the device), host read-back bytes at the read-back bandwidth, and one
// more sync point. When that saving reaches the target's minimum gain the slot is left
// unmaterialised; on a target with unified memory (cpu) nothing is read back, so it is kept.
// Every decision, with its numbers, is a line of the fusion report (`fusebox explain`).
// Produces: the same graph with the slot listed in Graph::unmaterialized_outputs.
// Preserves: the output list (arity, order, values: spec §5 defect 10), inputs, every node.
// Symbols in the spectrum's shape count as 1 (the pass sees no sizes), which underestimates
// the saving: the gate errs towards keeping the output.
#include <algorithm>
#include <cstdio>

#include "fusion/pass.h"
#include "ir/use_info.h"

namespace fusebox {

namespace {

constexpr const char* kPass = "select-peaks-only-outputs";
constexpr const char* kTopic = "io-gate";

std::string fmt(double v, const char* unit) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g %s", v, unit);
  return buf;
}

std::string fmt_bytes(double b) {
  if (b >= 1e6) return fmt(b / 1e6, "MB");
  if (b >= 1e3) return fmt(b / 1e3, "KB");
  return fmt(b, "B");
}

double static_bytes(const TensorType& t) {
  double n = 1;
  for (const Dim& d : t.shape) n *= d.is_static() ? double(d.value()) : 1.0;
  return n * double(dtype_size(t.dtype));
}

bool is_optional(const Graph& g, size_t slot) {
  const auto& o = g.optional_outputs();
  return std::binary_search(o.begin(), o.end(), int64_t(slot));
}

// The candidate of slot k: the spectrum's producer is fft_magnitude, a peaks node reads it and
// returns at least one result through a slot that is not optional, and no required slot
// returns the spectrum itself.
Verdict is_spectrum_with_peaks(const Graph& g, const UseInfo& uses, size_t k) {
  const ValueId v = g.outputs()[k];
  const int p = uses.producer[size_t(v)];
  if (p < 0 || g.nodes()[size_t(p)].op != Op::FftMagnitude) return Verdict::no("it is not an fft_magnitude result");
  for (size_t j = 0; j < g.outputs().size(); ++j) {
    if (j != k && g.outputs()[j] == v && !is_optional(g, j)) {
      return Verdict::no("output " + std::to_string(j) + " returns the same spectrum and is not optional");
    }
  }
  for (int user : uses.users[size_t(v)]) {
    const Node& n = g.nodes()[size_t(user)];
    if (n.op != Op::Peaks) continue;
    for (size_t j = 0; j < g.outputs().size(); ++j) {
      bool of_peaks = std::find(n.outputs.begin(), n.outputs.end(), g.outputs()[j]) != n.outputs.end();
      if (of_peaks && !is_optional(g, j)) return Verdict::yes();
    }
  }
  return Verdict::no("no peaks of it are returned");
}

}  // namespace

Status run_select_peaks_only_outputs(Graph& g, PassContext& ctx) {
  if (g.optional_outputs().empty()) return Status::ok();
  const ClaimTable& table = ctx.table();
  const TargetIoParams& io = table.io;
  const UseInfo uses = compute_uses(g);
  const std::vector<std::string> names = value_display_names(g);
  std::vector<int64_t> dropped = g.unmaterialized_outputs();
  for (int64_t slot : g.optional_outputs()) {
    const size_t k = size_t(slot);
    if (!g.output_materialized(k)) continue;
    const ValueId v = g.outputs()[k];
    const std::string what = "output " + std::to_string(k) + " (%" + names[size_t(v)] + ": " + g.type(v).to_string() + ")";
    if (Verdict c = is_spectrum_with_peaks(g, uses, k); !c) {
      ctx.remarks.note(kTopic, what + " kept: " + c.reason());
      continue;
    }
    const double bytes = static_bytes(g.type(v));
    // Launches and device traffic: fft_magnitude writes the spectrum and peaks reads it on the
    // device whether or not it is read back, so they are the same either way.
    const std::string same = "launches 2 -> 2, device traffic unchanged";
    if (table.unified_memory) {
      ctx.remarks.note(kTopic, what + " kept: target " + std::string(table.target) +
                                   " has unified memory (read-back 0 B, gain 0 us; " + same + ")");
      ctx.count(kPass, "kept");
      continue;
    }
    const double readback_us = bytes / (io.host_readback_gbps * 1e3);
    const double gain_us = readback_us + io.sync_cost_us;
    const std::string numbers = "read-back " + fmt_bytes(bytes) + " at " + fmt(io.host_readback_gbps, "GB/s") + " = " +
                                fmt(readback_us, "us") + " + 1 sync " + fmt(io.sync_cost_us, "us") + " = gain " +
                                fmt(gain_us, "us") + " vs min gain " + fmt(io.min_gain_us, "us") + "; " + same;
    if (gain_us < io.min_gain_us) {
      ctx.remarks.note(kTopic, what + " kept: " + numbers);
      ctx.count(kPass, "kept");
      continue;
    }
    ctx.remarks.note(kTopic, what + " not materialised: " + numbers);
    ctx.count(kPass, "unmaterialized");
    dropped.push_back(slot);
  }
  g.set_unmaterialized_outputs(std::move(dropped));
  return Status::ok();
}

}  // namespace fusebox
