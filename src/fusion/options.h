// FusionTarget, FusionLimits and FusionOptions (spec §1): what to fuse, for which target.
//
// FusionOptions is a plain value (copy, compare with ==, print, parse). The environment reaches
// it only through an EnvLookup handed in by the caller (see env.h); passes receive resolved
// options explicitly. Resolution for a compile lives in pipeline_plan.h (resolve_options).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "fusebox/status.h"
#include "fusion/env.h"

namespace fusebox {

// Cpu and Cuda have executing backends; the others have options, claims and pipelines only.
enum class FusionTarget : uint8_t { Cpu, Cuda, Metal, Mlx, Wgpu, Rocm, Tpu };
inline constexpr int kNumFusionTargets = 7;

std::string_view target_name(FusionTarget t);  // "cpu", "cuda", "metal", ...
// Exact lower-case names only.
std::optional<FusionTarget> parse_target(std::string_view name);
// "cpu, cuda, metal, mlx, wgpu, rocm, tpu": for error messages and --help.
std::string target_choices();
std::ostream& operator<<(std::ostream& os, FusionTarget t);

// Caps for one element-wise region. An over-limit group is split, never dropped.
struct FusionLimits {
  size_t max_elementwise_steps = 32;
  size_t max_elementwise_inputs = 16;

  static const FusionLimits GPU_NATIVE;  // {32, 16}
  static const FusionLimits UNBOUNDED;   // no cap on either

  bool operator==(const FusionLimits&) const = default;
};
inline constexpr size_t kUnboundedLimit = std::numeric_limits<size_t>::max();
inline constexpr FusionLimits FusionLimits::GPU_NATIVE = {32, 16};
inline constexpr FusionLimits FusionLimits::UNBOUNDED = {kUnboundedLimit, kUnboundedLimit};

// Cpu -> UNBOUNDED (its region executor runs any size); Tpu -> {32, 16}; others -> GPU_NATIVE.
FusionLimits default_limits(FusionTarget t);
// "32x16", "unbounded", or "64xinf" when only one cap is unbounded.
std::string limits_to_string(const FusionLimits& l);
std::ostream& operator<<(std::ostream& os, const FusionLimits& l);

// Exactly the eleven fields of spec §1.3, in its order.
struct FusionOptions {
  bool skip_fusion = false;
  bool unfuse_elementwise_regions = false;
  bool keep_elementwise_regions = false;
  bool decompose_fusion_regions = false;
  bool fk_fusion = true;
  bool fuse_region_prologue = true;
  bool fuse_batch_preprocess = true;
  bool native_fk_regions = false;
  // nullopt: the target's default (resolved at compile). A value set by the caller is kept
  // even when it equals some target's default.
  std::optional<FusionLimits> fusion_limits;
  bool disable_conv_bias_act_fusion = false;
  bool no_io_peaks_output = false;

  bool operator==(const FusionOptions&) const = default;

  // The limits in effect for `target`: the explicit ones, else the target's default.
  FusionLimits resolved_limits(FusionTarget target) const {
    return fusion_limits.value_or(default_limits(target));
  }

  // CPU keeps regions (its executor runs them as fused loops); limits UNBOUNDED. No env.
  static FusionOptions for_cpu();
  // from_metal_env(), then unfuse element-wise regions unless keep_elementwise_regions.
  static FusionOptions for_metal(const EnvLookup& env = process_env());
  // keep = env KEEP_ELEMENTWISE_REGIONS; unfuse = !keep; every other field default.
  static FusionOptions for_wgpu(const EnvLookup& env = process_env());
  // Cpu -> for_cpu; Metal, Mlx -> for_metal; Wgpu -> for_wgpu; Cuda, Rocm, Tpu -> defaults.
  static FusionOptions for_target(FusionTarget t, const EnvLookup& env = process_env());
  // Every field from the environment alone (absolute: unset variables give the defaults, the
  // result does not depend on any earlier options). fusion_limits stays nullopt.
  static FusionOptions from_metal_env(const EnvLookup& env = process_env());

  // A copy with the environment overrides of spec §1.3 applied on top of this.
  FusionOptions merge_env(const EnvLookup& env = process_env()) const;

  // In order: NO_NATIVE_FK_REGIONS (read from `env` when given) sets false and stops; already
  // true or NATIVE_FK_REGIONS set -> true; a target whose backend runs transform and batch
  // regions natively (its claims say so: every target today) -> true. Idempotent. The env is
  // consulted only when the caller passes one, i.e. when it asked for environment overrides.
  FusionOptions apply_native_fk_defaults(FusionTarget target,
                                         const EnvLookup* env = nullptr) const;
};

// "skip_fusion=0,unfuse_elementwise_regions=0,...,fusion_limits=32x16,..." with every field in
// declaration order; fusion_limits prints "default" when unset. parse_fusion_options reads it
// back exactly.
std::string to_string(const FusionOptions& o);
std::ostream& operator<<(std::ostream& os, const FusionOptions& o);

// Applies "name=value,name=value" on top of `base` (for --fusion-options). Booleans take
// 0/1/true/false/on/off/yes/no (any case); a bare boolean name means =1. fusion_limits takes
// "SxI" (each a positive number or "inf"), "unbounded" or "default". Blanks around items are
// ignored and empty items skipped. An unknown field or a bad value is an error naming it.
Expected<FusionOptions> parse_fusion_options(std::string_view text, FusionOptions base = {});
Expected<FusionLimits> parse_fusion_limits(std::string_view text);

}  // namespace fusebox
