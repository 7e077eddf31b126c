#include "fusion/options.h"

#include <charconv>
#include <ostream>
#include <utility>


namespace fusebox {
namespace {

constexpr std::pair<FusionTarget, std::string_view> kTargetNames[] = {
    {FusionTarget::Cpu, "cpu"},   {FusionTarget::Cuda, "cuda"}, {FusionTarget::Metal, "metal"},
    {FusionTarget::Mlx, "mlx"},   {FusionTarget::Wgpu, "wgpu"}, {FusionTarget::Rocm, "rocm"},
    {FusionTarget::Tpu, "tpu"},
};
static_assert(std::size(kTargetNames) == kNumFusionTargets);

// The boolean fields in declaration order; fusion_limits sits between index 7 and 8. Printing
// and parsing both use this table, so they cannot disagree on a name.
constexpr std::pair<std::string_view, bool FusionOptions::*> kBoolFields[] = {
    {"skip_fusion", &FusionOptions::skip_fusion},
    {"unfuse_elementwise_regions", &FusionOptions::unfuse_elementwise_regions},
    {"keep_elementwise_regions", &FusionOptions::keep_elementwise_regions},
    {"decompose_fusion_regions", &FusionOptions::decompose_fusion_regions},
    {"fk_fusion", &FusionOptions::fk_fusion},
    {"fuse_region_prologue", &FusionOptions::fuse_region_prologue},
    {"fuse_batch_preprocess", &FusionOptions::fuse_batch_preprocess},
    {"native_fk_regions", &FusionOptions::native_fk_regions},
    {"disable_conv_bias_act_fusion", &FusionOptions::disable_conv_bias_act_fusion},
    {"no_io_peaks_output", &FusionOptions::no_io_peaks_output},
};
constexpr size_t kLimitsPosition = 8;
constexpr std::string_view kLimitsField = "fusion_limits";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  }
  return out;
}

// Strict, unlike env_truthy: a typo on the command line is an error, not "true".
std::optional<bool> parse_bool(std::string_view text) {
  std::string v = lower(text);
  if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "off" || v == "no") return false;
  return std::nullopt;
}

std::string field_names() {
  std::string out;
  for (size_t i = 0; i < std::size(kBoolFields); ++i) {
    if (i == kLimitsPosition) out.append(kLimitsField).append(", ");
    out.append(kBoolFields[i].first);
    if (i + 1 < std::size(kBoolFields)) out += ", ";
  }
  return out;
}

std::string cap_to_string(size_t cap) {
  return cap == kUnboundedLimit ? std::string("inf") : std::to_string(cap);
}

std::optional<size_t> parse_cap(std::string_view text) {
  text = trim(text);
  if (text == "inf") return kUnboundedLimit;
  size_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0) return std::nullopt;
  return value;
}

}  // namespace

std::string_view target_name(FusionTarget t) {
  for (const auto& [target, name] : kTargetNames) {
    if (target == t) return name;
  }
  return "?";
}

std::optional<FusionTarget> parse_target(std::string_view name) {
  for (const auto& [target, text] : kTargetNames) {
    if (text == name) return target;
  }
  return std::nullopt;
}

std::string target_choices() {
  std::string out;
  for (const auto& [target, name] : kTargetNames) {
    if (!out.empty()) out += ", ";
    out.append(name);
  }
  return out;
}

std::ostream& operator<<(std::ostream& os, FusionTarget t) { return os << target_name(t); }

FusionLimits default_limits(FusionTarget t) {
  switch (t) {
    case FusionTarget::Cpu:
      return FusionLimits::UNBOUNDED;
    case FusionTarget::Tpu:
      // The spec states {32, 16} for Tpu on its own row: it equals GPU_NATIVE today, but is
      // not defined through it, so tuning GPU_NATIVE does not move the TPU.
      return FusionLimits{32, 16};
    case FusionTarget::Cuda:
    case FusionTarget::Metal:
    case FusionTarget::Mlx:
    case FusionTarget::Wgpu:
    case FusionTarget::Rocm:
      return FusionLimits::GPU_NATIVE;
  }
  return FusionLimits::GPU_NATIVE;
}

std::string limits_to_string(const FusionLimits& l) {
  if (l == FusionLimits::UNBOUNDED) return "unbounded";
  return cap_to_string(l.max_elementwise_steps) + "x" + cap_to_string(l.max_elementwise_inputs);
}

std::ostream& operator<<(std::ostream& os, const FusionLimits& l) {
  return os << limits_to_string(l);
}

FusionOptions FusionOptions::for_cpu() {
  FusionOptions o;
  o.fusion_limits = FusionLimits::UNBOUNDED;
  return o;
}

FusionOptions FusionOptions::for_metal(const EnvLookup& env) {
  FusionOptions o = from_metal_env(env);
  if (!o.keep_elementwise_regions) o.unfuse_elementwise_regions = true;
  return o;
}

FusionOptions FusionOptions::for_wgpu(const EnvLookup& env) {
  FusionOptions o;
  o.keep_elementwise_regions = fusion_env_flag(env, env_var::kKeepElementwiseRegions);
  o.unfuse_elementwise_regions = !o.keep_elementwise_regions;
  return o;
}

FusionOptions FusionOptions::for_target(FusionTarget t, const EnvLookup& env) {
  switch (t) {
    case FusionTarget::Cpu:
      return for_cpu();
    case FusionTarget::Metal:
    case FusionTarget::Mlx:
      return for_metal(env);
    case FusionTarget::Wgpu:
      return for_wgpu(env);
    case FusionTarget::Cuda:
    case FusionTarget::Rocm:
    case FusionTarget::Tpu:
      return FusionOptions{};
  }
  return FusionOptions{};
}

FusionOptions FusionOptions::from_metal_env(const EnvLookup& env) {
  // Overrides applied to the defaults are exactly the absolute values: every variable either
  // sets its field or leaves the default, and nothing else feeds in.
  return FusionOptions{}.merge_env(env);
}

FusionOptions FusionOptions::merge_env(const EnvLookup& env) const {
  FusionOptions o = *this;
  if (fusion_env_flag(env, env_var::kNoFusion)) o.skip_fusion = true;
  if (fusion_env_flag(env, env_var::kMetalNoFusion)) o.skip_fusion = true;
  if (fusion_env_flag(env, env_var::kMetalUnfuseRegions)) o.unfuse_elementwise_regions = true;
  if (fusion_env_flag(env, env_var::kKeepElementwiseRegions)) o.keep_elementwise_regions = true;
  if (fusion_env_flag(env, env_var::kDecomposeFusionRegions)) o.decompose_fusion_regions = true;
  if (fusion_env_flag(env, env_var::kNoFkFusion)) o.fk_fusion = false;
  if (auto v = fusion_env_bool(env, env_var::kFuseRegionPrologue)) o.fuse_region_prologue = *v;
  if (auto v = fusion_env_bool(env, env_var::kFuseBatchPreprocess)) o.fuse_batch_preprocess = *v;
  if (fusion_env_flag(env, env_var::kNoNativeFkRegions)) {
    o.native_fk_regions = false;  // NO wins over NATIVE
  } else if (fusion_env_flag(env, env_var::kNativeFkRegions)) {
    o.native_fk_regions = true;
  }
  if (fusion_env_flag(env, env_var::kDisableConvBiasActFusion)) {
    o.disable_conv_bias_act_fusion = true;
  }
  if (fusion_env_flag(env, env_var::kNoIoPeaksOutput)) o.no_io_peaks_output = true;
  return o;
}

FusionOptions FusionOptions::apply_native_fk_defaults(FusionTarget target,
                                                      const EnvLookup* env) const {
  FusionOptions o = *this;
  if (env && fusion_env_flag(*env, env_var::kNoNativeFkRegions)) {
    o.native_fk_regions = false;
    return o;
  }
  if (o.native_fk_regions) return o;
  if (env && fusion_env_flag(*env, env_var::kNativeFkRegions)) {
    o.native_fk_regions = true;
    return o;
  }
  // Spec §1.3: the backends of Cuda, Rocm, Metal, Mlx, Wgpu, Tpu and fusebox's Cpu run transform
  // and batch regions natively, i.e. every target; the pipeline still runs them natively only
  // where the target's claim table claims both kinds (plan_pipeline, step 5).
  (void)target;
  o.native_fk_regions = true;
  return o;
}

std::string to_string(const FusionOptions& o) {
  std::string out;
  for (size_t i = 0; i < std::size(kBoolFields); ++i) {
    if (i == kLimitsPosition) {
      out.append(kLimitsField).append("=");
      out += o.fusion_limits ? limits_to_string(*o.fusion_limits) : "default";
      out += ",";
    }
    const auto& [name, member] = kBoolFields[i];
    out.append(name).append(o.*member ? "=1" : "=0");
    if (i + 1 < std::size(kBoolFields)) out += ",";
  }
  return out;
}

std::ostream& operator<<(std::ostream& os, const FusionOptions& o) { return os << to_string(o); }

Expected<FusionLimits> parse_fusion_limits(std::string_view text) {
  text = trim(text);
  if (lower(text) == "unbounded") return FusionLimits::UNBOUNDED;
  size_t x = text.find_first_of("xX");
  std::optional<size_t> steps, inputs;
  if (x != std::string_view::npos) {
    steps = parse_cap(text.substr(0, x));
    inputs = parse_cap(text.substr(x + 1));
  }
  if (!steps || !inputs) {
    return Status::invalid("bad fusion limits '" + std::string(text) +
                           "' (expected STEPSxINPUTS with positive numbers or inf, such as "
                           "32x16, or unbounded)");
  }
  return FusionLimits{*steps, *inputs};
}

Expected<FusionOptions> parse_fusion_options(std::string_view text, FusionOptions base) {
  FusionOptions o = base;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.empty()) continue;

    size_t eq = item.find('=');
    std::string_view name = trim(item.substr(0, eq));
    std::optional<std::string_view> value;
    if (eq != std::string_view::npos) value = trim(item.substr(eq + 1));

    if (name == kLimitsField) {
      if (!value) return Status::invalid("fusion option 'fusion_limits' needs a value");
      if (lower(*value) == "default") {
        o.fusion_limits.reset();
        continue;
      }
      Expected<FusionLimits> limits = parse_fusion_limits(*value);
      if (!limits) return limits.status().with_context("fusion option 'fusion_limits'");
      o.fusion_limits = *limits;
      continue;
    }

    bool FusionOptions::*member = nullptr;
    for (const auto& [field, m] : kBoolFields) {
      if (field == name) member = m;
    }
    if (!member) {
      return Status::invalid("unknown fusion option '" + std::string(name) +
                             "' (known: " + field_names() + ")");
    }
    std::optional<bool> flag = value ? parse_bool(*value) : std::optional<bool>(true);
    if (!flag) {
      return Status::invalid("fusion option '" + std::string(name) + "': bad value '" +
                             std::string(*value) +
                             "' (expected 0, 1, true, false, on, off, yes or no)");
    }
    o.*member = *flag;
  }
  return o;
}

}  // namespace fusebox
