// Environment overrides of the fusion options, read only through an injectable lookup.
//
// Nothing in fusebox calls getenv except process_env(): option constructors and resolution take
// an EnvLookup, so tests pass a map_env() and never mutate the process environment, and two
// compiles with different lookups can run side by side (no global state, spec §5 defect 9).
//
// Variables are named by suffix: FUSEBOX_<SUFFIX>, with RLX_<SUFFIX> accepted as an alias so
// scripts written for the reference system keep working. FUSEBOX_ wins when both are set.
// An empty value counts as unset, for the alias lookup too (FUSEBOX_X= does not hide RLX_X=1):
// one rule everywhere, and `X=` never silently turns a default-on feature off.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace fusebox {

// Returns the value of the variable called `name`, or nullopt when it is not set.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

// The real process environment (std::getenv). The only place fusebox reads it.
EnvLookup process_env();
// A fixed environment for tests and embedders: exactly the given variables are set.
EnvLookup map_env(std::map<std::string, std::string, std::less<>> vars);

// The variable prefixes, in precedence order.
inline constexpr std::string_view kEnvPrefix = "FUSEBOX_";
inline constexpr std::string_view kEnvAliasPrefix = "RLX_";

// Truthiness of a value: empty (after trimming ASCII blanks) -> false; 0, false, off, no (any
// case) -> false; anything else non-empty (1, true, on, yes, arbitrary text) -> true.
bool env_truthy(std::string_view value);

// FUSEBOX_<suffix> if set and non-empty, else RLX_<suffix> if set and non-empty, else nullopt.
// An empty std::function lookup behaves as an empty environment.
std::optional<std::string> fusion_env_value(const EnvLookup& env, std::string_view suffix);
// The truth value of the variable, or nullopt when it is unset (for "only when set" overrides).
std::optional<bool> fusion_env_bool(const EnvLookup& env, std::string_view suffix);
// The truth value, unset meaning false.
bool fusion_env_flag(const EnvLookup& env, std::string_view suffix);

// FUSION_REPORT: print the fusion report after compiling. A runtime flag, not an option field.
bool fusion_report_requested(const EnvLookup& env);

// The variable suffixes of spec §1.3, so callers and docs cannot misspell them.
namespace env_var {
inline constexpr std::string_view kNoFusion = "NO_FUSION";
inline constexpr std::string_view kMetalNoFusion = "METAL_NO_FUSION";
inline constexpr std::string_view kMetalUnfuseRegions = "METAL_UNFUSE_REGIONS";
inline constexpr std::string_view kKeepElementwiseRegions = "KEEP_ELEMENTWISE_REGIONS";
inline constexpr std::string_view kDecomposeFusionRegions = "DECOMPOSE_FUSION_REGIONS";
inline constexpr std::string_view kNoFkFusion = "NO_FK_FUSION";
inline constexpr std::string_view kFuseRegionPrologue = "FUSE_REGION_PROLOGUE";
inline constexpr std::string_view kFuseBatchPreprocess = "FUSE_BATCH_PREPROCESS";
inline constexpr std::string_view kNativeFkRegions = "NATIVE_FK_REGIONS";
inline constexpr std::string_view kNoNativeFkRegions = "NO_NATIVE_FK_REGIONS";
inline constexpr std::string_view kDisableConvBiasActFusion = "DISABLE_CONV_BIAS_ACT_FUSION";
inline constexpr std::string_view kNoIoPeaksOutput = "NO_IO_PEAKS_OUTPUT";
inline constexpr std::string_view kFusionReport = "FUSION_REPORT";
}  // namespace env_var

}  // namespace fusebox
