// Tests of the fusion configuration (spec §1): targets, limits, FusionOptions and its
// constructors, the environment overrides (through map_env, never the process environment),
// and printing/parsing for --fusion-options.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "fusebox/fusion_options.h"

namespace fusebox {
namespace {

using Vars = std::map<std::string, std::string, std::less<>>;

FusionOptions with(std::function<void(FusionOptions&)> change, FusionOptions o = {}) {
  change(o);
  return o;
}

// ---- targets and limits ----

TEST(FusionTarget, NamesRoundTrip) {
  const std::vector<std::pair<FusionTarget, std::string>> expected = {
      {FusionTarget::Cpu, "cpu"},   {FusionTarget::Cuda, "cuda"}, {FusionTarget::Metal, "metal"},
      {FusionTarget::Mlx, "mlx"},   {FusionTarget::Wgpu, "wgpu"}, {FusionTarget::Rocm, "rocm"},
      {FusionTarget::Tpu, "tpu"}};
  ASSERT_EQ(int(expected.size()), kNumFusionTargets);
  for (const auto& [t, name] : expected) {
    EXPECT_EQ(target_name(t), name);
    EXPECT_EQ(parse_target(name), t);
  }
  EXPECT_FALSE(parse_target("CPU").has_value());
  EXPECT_FALSE(parse_target("vulkan").has_value());
  EXPECT_FALSE(parse_target("").has_value());
  EXPECT_EQ(target_choices(), "cpu, cuda, metal, mlx, wgpu, rocm, tpu");
}

TEST(FusionLimits, NamedConstants) {
  EXPECT_EQ(FusionLimits::GPU_NATIVE, (FusionLimits{32, 16}));
  EXPECT_EQ(FusionLimits{}, FusionLimits::GPU_NATIVE);  // also the default
  EXPECT_EQ(FusionLimits::UNBOUNDED.max_elementwise_steps, kUnboundedLimit);
  EXPECT_EQ(FusionLimits::UNBOUNDED.max_elementwise_inputs, kUnboundedLimit);
  EXPECT_NE(FusionLimits::GPU_NATIVE, FusionLimits::UNBOUNDED);
}

TEST(FusionLimits, DefaultsPerTarget) {
  EXPECT_EQ(default_limits(FusionTarget::Cpu), FusionLimits::UNBOUNDED);
  EXPECT_EQ(default_limits(FusionTarget::Tpu), (FusionLimits{32, 16}));
  for (FusionTarget t : {FusionTarget::Cuda, FusionTarget::Metal, FusionTarget::Mlx,
                         FusionTarget::Wgpu, FusionTarget::Rocm}) {
    EXPECT_EQ(default_limits(t), FusionLimits::GPU_NATIVE) << t;
  }
}

TEST(FusionLimits, Printing) {
  EXPECT_EQ(limits_to_string(FusionLimits::GPU_NATIVE), "32x16");
  EXPECT_EQ(limits_to_string(FusionLimits::UNBOUNDED), "unbounded");
  EXPECT_EQ(limits_to_string({64, kUnboundedLimit}), "64xinf");
  EXPECT_EQ(limits_to_string({kUnboundedLimit, 3}), "infx3");
}

TEST(FusionLimits, ExplicitLimitsAreKeptEvenWhenEqualToADefault) {
  FusionOptions o;
  EXPECT_FALSE(o.fusion_limits.has_value());
  EXPECT_EQ(o.resolved_limits(FusionTarget::Cpu), FusionLimits::UNBOUNDED);
  EXPECT_EQ(o.resolved_limits(FusionTarget::Cuda), FusionLimits::GPU_NATIVE);
  // GPU_NATIVE set by hand is the GPU default, but on CPU it must not turn back into UNBOUNDED.
  o.fusion_limits = FusionLimits::GPU_NATIVE;
  EXPECT_EQ(o.resolved_limits(FusionTarget::Cpu), FusionLimits::GPU_NATIVE);
  o.fusion_limits = FusionLimits::UNBOUNDED;
  EXPECT_EQ(o.resolved_limits(FusionTarget::Cuda), FusionLimits::UNBOUNDED);
  o.fusion_limits = FusionLimits{8, 4};
  for (int i = 0; i < kNumFusionTargets; ++i) {
    EXPECT_EQ(o.resolved_limits(FusionTarget(i)), (FusionLimits{8, 4}));
  }
}

// ---- FusionOptions value type and constructors ----

TEST(FusionOptions, DefaultsAreTheSpecTable) {
  FusionOptions o;
  EXPECT_FALSE(o.skip_fusion);
  EXPECT_FALSE(o.unfuse_elementwise_regions);
  EXPECT_FALSE(o.keep_elementwise_regions);
  EXPECT_FALSE(o.decompose_fusion_regions);
  EXPECT_TRUE(o.fk_fusion);
  EXPECT_TRUE(o.fuse_region_prologue);
  EXPECT_TRUE(o.fuse_batch_preprocess);
  EXPECT_FALSE(o.native_fk_regions);
  EXPECT_FALSE(o.fusion_limits.has_value());
  EXPECT_FALSE(o.disable_conv_bias_act_fusion);
  EXPECT_FALSE(o.no_io_peaks_output);
}

TEST(FusionOptions, EqualitySeesEveryField) {
  const std::vector<std::function<void(FusionOptions&)>> changes = {
      [](FusionOptions& o) { o.skip_fusion = true; },
      [](FusionOptions& o) { o.unfuse_elementwise_regions = true; },
      [](FusionOptions& o) { o.keep_elementwise_regions = true; },
      [](FusionOptions& o) { o.decompose_fusion_regions = true; },
      [](FusionOptions& o) { o.fk_fusion = false; },
      [](FusionOptions& o) { o.fuse_region_prologue = false; },
      [](FusionOptions& o) { o.fuse_batch_preprocess = false; },
      [](FusionOptions& o) { o.native_fk_regions = true; },
      [](FusionOptions& o) { o.fusion_limits = FusionLimits::GPU_NATIVE; },
      [](FusionOptions& o) { o.disable_conv_bias_act_fusion = true; },
      [](FusionOptions& o) { o.no_io_peaks_output = true; },
  };
  ASSERT_EQ(changes.size(), 11u);
  for (size_t i = 0; i < changes.size(); ++i) {
    FusionOptions changed = with(changes[i]);
    EXPECT_NE(changed, FusionOptions{}) << i;
    FusionOptions copy = changed;
    EXPECT_EQ(copy, changed) << i;
  }
  EXPECT_NE(with([](FusionOptions& o) { o.fusion_limits = FusionLimits{32, 16}; }),
            with([](FusionOptions& o) { o.fusion_limits = FusionLimits{32, 15}; }));
}

TEST(FusionOptions, ForCpuKeepsRegionsUnbounded) {
  FusionOptions expected;
  expected.fusion_limits = FusionLimits::UNBOUNDED;
  EXPECT_EQ(FusionOptions::for_cpu(), expected);
  EXPECT_FALSE(FusionOptions::for_cpu().unfuse_elementwise_regions);
}

TEST(FusionOptions, ForMetalUnfusesUnlessKeep) {
  EXPECT_EQ(FusionOptions::for_metal(map_env({})),
            with([](FusionOptions& o) { o.unfuse_elementwise_regions = true; }));
  EXPECT_EQ(FusionOptions::for_metal(map_env({{"FUSEBOX_KEEP_ELEMENTWISE_REGIONS", "1"}})),
            with([](FusionOptions& o) { o.keep_elementwise_regions = true; }));
  EXPECT_EQ(FusionOptions::for_metal(map_env({{"FUSEBOX_KEEP_ELEMENTWISE_REGIONS", "0"}})),
            with([](FusionOptions& o) { o.unfuse_elementwise_regions = true; }));
  // keep only stops the forced unfuse; an explicit unfuse request from the env still stands.
  FusionOptions both = FusionOptions::for_metal(map_env(
      {{"FUSEBOX_KEEP_ELEMENTWISE_REGIONS", "1"}, {"FUSEBOX_METAL_UNFUSE_REGIONS", "1"}}));
  EXPECT_TRUE(both.keep_elementwise_regions);
  EXPECT_TRUE(both.unfuse_elementwise_regions);
  // for_metal builds on from_metal_env: the other variables reach it; pattern fusion stays on.
  FusionOptions fk_off = FusionOptions::for_metal(map_env({{"RLX_NO_FK_FUSION", "1"}}));
  EXPECT_FALSE(fk_off.fk_fusion);
  EXPECT_FALSE(fk_off.skip_fusion);
  EXPECT_TRUE(FusionOptions::for_metal(map_env({{"FUSEBOX_METAL_NO_FUSION", "1"}})).skip_fusion);
}

TEST(FusionOptions, ForWgpuUnfuseIsNotKeep) {
  EXPECT_EQ(FusionOptions::for_wgpu(map_env({})),
            with([](FusionOptions& o) { o.unfuse_elementwise_regions = true; }));
  EXPECT_EQ(FusionOptions::for_wgpu(map_env({{"RLX_KEEP_ELEMENTWISE_REGIONS", "yes"}})),
            with([](FusionOptions& o) { o.keep_elementwise_regions = true; }));
  EXPECT_EQ(FusionOptions::for_wgpu(map_env({{"FUSEBOX_KEEP_ELEMENTWISE_REGIONS", "off"}})),
            with([](FusionOptions& o) { o.unfuse_elementwise_regions = true; }));
  // Only KEEP is read: other variables do not change the Wgpu set.
  EXPECT_EQ(FusionOptions::for_wgpu(map_env({{"FUSEBOX_NO_FK_FUSION", "1"},
                                             {"FUSEBOX_NO_FUSION", "1"}})),
            with([](FusionOptions& o) { o.unfuse_elementwise_regions = true; }));
}

TEST(FusionOptions, ForTargetPicksTheConstructor) {
  EnvLookup env = map_env({{"FUSEBOX_KEEP_ELEMENTWISE_REGIONS", "1"},
                           {"FUSEBOX_DISABLE_CONV_BIAS_ACT_FUSION", "1"}});
  EXPECT_EQ(FusionOptions::for_target(FusionTarget::Cpu, env), FusionOptions::for_cpu());
  EXPECT_EQ(FusionOptions::for_target(FusionTarget::Metal, env), FusionOptions::for_metal(env));
  EXPECT_EQ(FusionOptions::for_target(FusionTarget::Mlx, env), FusionOptions::for_metal(env));
  EXPECT_EQ(FusionOptions::for_target(FusionTarget::Wgpu, env), FusionOptions::for_wgpu(env));
  for (FusionTarget t : {FusionTarget::Cuda, FusionTarget::Rocm, FusionTarget::Tpu}) {
    EXPECT_EQ(FusionOptions::for_target(t, env), FusionOptions{}) << t;
  }
  // The env really reached Metal (so the comparison above is not trivially equal).
  EXPECT_TRUE(FusionOptions::for_target(FusionTarget::Metal, env).disable_conv_bias_act_fusion);
  // An empty lookup is an empty environment, not a crash.
  EXPECT_EQ(FusionOptions::for_target(FusionTarget::Metal, EnvLookup{}),
            with([](FusionOptions& o) { o.unfuse_elementwise_regions = true; }));
}

TEST(FusionOptions, FromMetalEnvIsAbsolute) {
  EXPECT_EQ(FusionOptions::from_metal_env(map_env({})), FusionOptions{});
  FusionOptions all = FusionOptions::from_metal_env(map_env({
      {"FUSEBOX_NO_FUSION", "1"},
      {"FUSEBOX_METAL_UNFUSE_REGIONS", "1"},
      {"FUSEBOX_KEEP_ELEMENTWISE_REGIONS", "1"},
      {"FUSEBOX_DECOMPOSE_FUSION_REGIONS", "1"},
      {"FUSEBOX_NO_FK_FUSION", "1"},
      {"FUSEBOX_FUSE_REGION_PROLOGUE", "0"},
      {"FUSEBOX_FUSE_BATCH_PREPROCESS", "0"},
      {"FUSEBOX_NATIVE_FK_REGIONS", "1"},
      {"FUSEBOX_DISABLE_CONV_BIAS_ACT_FUSION", "1"},
      {"FUSEBOX_NO_IO_PEAKS_OUTPUT", "1"},
  }));
  FusionOptions expected{true, true, true, true, false, false, false, true, std::nullopt,
                         true, true};
  EXPECT_EQ(all, expected);
  // merge_env keeps what it does not override; from_metal_env has nothing to keep.
  FusionOptions base = expected;
  EXPECT_EQ(base.merge_env(map_env({})), expected);
  EXPECT_EQ(FusionOptions::from_metal_env(map_env({})), FusionOptions{});
}

// ---- environment ----

TEST(FusionEnv, Truthiness) {
  for (const char* no : {"", " ", "0", "false", "FALSE", "False", "off", "OFF", "Off", "no", "NO",
                         " 0 ", "off\n"}) {
    EXPECT_FALSE(env_truthy(no)) << "'" << no << "'";
  }
  for (const char* yes : {"1", "true", "TRUE", "on", "ON", "yes", "YES", "Yes", "2", "-1",
                          "enabled", "nope", "00", "0x0"}) {
    EXPECT_TRUE(env_truthy(yes)) << "'" << yes << "'";
  }
}

// Every boolean variable of the table: what it does to the default options.
struct FlagCase {
  const char* suffix;
  std::function<void(FusionOptions&)> effect;
};

std::vector<FlagCase> flag_cases() {
  return {
      {"NO_FUSION", [](FusionOptions& o) { o.skip_fusion = true; }},
      {"METAL_NO_FUSION", [](FusionOptions& o) { o.skip_fusion = true; }},
      {"METAL_UNFUSE_REGIONS", [](FusionOptions& o) { o.unfuse_elementwise_regions = true; }},
      {"KEEP_ELEMENTWISE_REGIONS", [](FusionOptions& o) { o.keep_elementwise_regions = true; }},
      {"DECOMPOSE_FUSION_REGIONS", [](FusionOptions& o) { o.decompose_fusion_regions = true; }},
      {"NO_FK_FUSION", [](FusionOptions& o) { o.fk_fusion = false; }},
      {"NATIVE_FK_REGIONS", [](FusionOptions& o) { o.native_fk_regions = true; }},
      {"DISABLE_CONV_BIAS_ACT_FUSION",
       [](FusionOptions& o) { o.disable_conv_bias_act_fusion = true; }},
      {"NO_IO_PEAKS_OUTPUT", [](FusionOptions& o) { o.no_io_peaks_output = true; }},
  };
}

TEST(FusionEnv, EveryFlagVariableAndValue) {
  const std::vector<std::pair<std::string, bool>> values = {
      {"1", true},  {"yes", true},  {"true", true}, {"on", true},  {"whatever", true},
      {"0", false}, {"off", false}, {"OFF", false}, {"no", false}, {"", false}};
  for (const FlagCase& c : flag_cases()) {
    FusionOptions effect = with(c.effect);
    EXPECT_EQ(FusionOptions{}.merge_env(map_env({})), FusionOptions{}) << c.suffix;
    for (const auto& [value, acts] : values) {
      for (const char* prefix : {"FUSEBOX_", "RLX_"}) {
        EnvLookup env = map_env({{std::string(prefix) + c.suffix, value}});
        FusionOptions merged = FusionOptions{}.merge_env(env);
        EXPECT_EQ(merged, acts ? effect : FusionOptions{})
            << prefix << c.suffix << "='" << value << "'";
        EXPECT_EQ(FusionOptions::from_metal_env(env), merged) << prefix << c.suffix;
      }
    }
    // A false value never undoes what the caller set: overrides only ever apply.
    EXPECT_EQ(effect.merge_env(map_env({{std::string("FUSEBOX_") + c.suffix, "0"}})), effect)
        << c.suffix;
  }
}

TEST(FusionEnv, PrologueAndBatchActOnlyWhenSet) {
  struct Case {
    const char* suffix;
    bool FusionOptions::*field;
  };
  for (Case c : {Case{"FUSE_REGION_PROLOGUE", &FusionOptions::fuse_region_prologue},
                 Case{"FUSE_BATCH_PREPROCESS", &FusionOptions::fuse_batch_preprocess}}) {
    for (bool base_value : {false, true}) {
      FusionOptions base;
      base.*c.field = base_value;
      auto merged = [&](std::map<std::string, std::string, std::less<>> vars) {
        return base.merge_env(map_env(std::move(vars))).*c.field;
      };
      std::string fb = std::string("FUSEBOX_") + c.suffix;
      std::string rlx = std::string("RLX_") + c.suffix;
      EXPECT_EQ(merged({}), base_value) << c.suffix;         // unset: unchanged
      EXPECT_EQ(merged({{fb, ""}}), base_value) << c.suffix;  // empty counts as unset
      EXPECT_FALSE(merged({{fb, "0"}})) << c.suffix;
      EXPECT_FALSE(merged({{fb, "off"}})) << c.suffix;
      EXPECT_FALSE(merged({{fb, "OFF"}})) << c.suffix;
      EXPECT_FALSE(merged({{fb, "no"}})) << c.suffix;
      EXPECT_TRUE(merged({{fb, "1"}})) << c.suffix;
      EXPECT_TRUE(merged({{fb, "yes"}})) << c.suffix;
      EXPECT_TRUE(merged({{fb, "anything"}})) << c.suffix;
      EXPECT_FALSE(merged({{rlx, "0"}})) << c.suffix;
      EXPECT_TRUE(merged({{rlx, "1"}})) << c.suffix;
      // FUSEBOX_ wins over RLX_ both ways.
      EXPECT_FALSE(merged({{fb, "0"}, {rlx, "1"}})) << c.suffix;
      EXPECT_TRUE(merged({{fb, "1"}, {rlx, "0"}})) << c.suffix;
      EXPECT_FALSE(merged({{fb, ""}, {rlx, "0"}})) << c.suffix;  // empty FUSEBOX_ hides nothing
    }
  }
}

TEST(FusionEnv, FuseboxPrefixWinsOverAlias) {
  for (const FlagCase& c : flag_cases()) {
    FusionOptions effect = with(c.effect);
    std::string fb = std::string("FUSEBOX_") + c.suffix;
    std::string rlx = std::string("RLX_") + c.suffix;
    EXPECT_EQ(FusionOptions{}.merge_env(map_env({{fb, "0"}, {rlx, "1"}})), FusionOptions{})
        << c.suffix;
    EXPECT_EQ(FusionOptions{}.merge_env(map_env({{fb, "1"}, {rlx, "0"}})), effect) << c.suffix;
    EXPECT_EQ(FusionOptions{}.merge_env(map_env({{fb, ""}, {rlx, "1"}})), effect) << c.suffix;
  }
  EnvLookup env = map_env({{"FUSEBOX_FUSION_REPORT", "off"}, {"RLX_FUSION_REPORT", "1"}});
  EXPECT_EQ(fusion_env_value(env, "FUSION_REPORT"), "off");
  EXPECT_FALSE(fusion_env_value(env, "NO_SUCH_THING").has_value());
}

TEST(FusionEnv, NoNativeVetoesNative) {
  EnvLookup both = map_env({{"FUSEBOX_NATIVE_FK_REGIONS", "1"},
                            {"FUSEBOX_NO_NATIVE_FK_REGIONS", "1"}});
  EXPECT_FALSE(FusionOptions{}.merge_env(both).native_fk_regions);
  EnvLookup mixed = map_env({{"RLX_NATIVE_FK_REGIONS", "1"}, {"FUSEBOX_NO_NATIVE_FK_REGIONS", "1"}});
  EXPECT_FALSE(FusionOptions{}.merge_env(mixed).native_fk_regions);
  // NO also clears a value that was already true.
  FusionOptions native_on = with([](FusionOptions& o) { o.native_fk_regions = true; });
  EnvLookup no = map_env({{"RLX_NO_NATIVE_FK_REGIONS", "yes"}});
  EXPECT_EQ(native_on.merge_env(no), FusionOptions{});
  EXPECT_TRUE(native_on.merge_env(map_env({{"FUSEBOX_NO_NATIVE_FK_REGIONS", "0"}}))
                  .native_fk_regions);
}

TEST(FusionEnv, NativeFkDefaults) {
  EnvLookup none = map_env({});
  EnvLookup veto = map_env({{"FUSEBOX_NO_NATIVE_FK_REGIONS", "1"}});
  EnvLookup native = map_env({{"RLX_NATIVE_FK_REGIONS", "1"}});
  EnvLookup both = map_env({{"FUSEBOX_NATIVE_FK_REGIONS", "1"},
                            {"FUSEBOX_NO_NATIVE_FK_REGIONS", "on"}});
  FusionOptions on = with([](FusionOptions& o) { o.native_fk_regions = true; });
  for (int i = 0; i < kNumFusionTargets; ++i) {
    FusionTarget t = FusionTarget(i);
    // Every target's backend runs transform/batch regions natively (spec §1.3 list).
    EXPECT_TRUE(FusionOptions{}.apply_native_fk_defaults(t).native_fk_regions) << t;
    EXPECT_TRUE(FusionOptions{}.apply_native_fk_defaults(t, &none).native_fk_regions) << t;
    EXPECT_TRUE(FusionOptions{}.apply_native_fk_defaults(t, &native).native_fk_regions) << t;
    // The veto wins over the target, over NATIVE and over an already-true value.
    EXPECT_FALSE(FusionOptions{}.apply_native_fk_defaults(t, &veto).native_fk_regions) << t;
    EXPECT_FALSE(on.apply_native_fk_defaults(t, &veto).native_fk_regions) << t;
    EXPECT_FALSE(on.apply_native_fk_defaults(t, &both).native_fk_regions) << t;
    // Only native_fk_regions changes.
    EXPECT_EQ(FusionOptions{}.apply_native_fk_defaults(t), on) << t;
    // Idempotent, with and without env, from either starting value.
    for (const EnvLookup* env : std::vector<const EnvLookup*>{nullptr, &none, &veto, &native,
                                                              &both}) {
      for (const FusionOptions& base : {FusionOptions{}, on}) {
        FusionOptions once = base.apply_native_fk_defaults(t, env);
        EXPECT_EQ(once.apply_native_fk_defaults(t, env), once) << t;
      }
    }
  }
}

TEST(FusionEnv, FusionReportIsARuntimeFlag) {
  EXPECT_FALSE(fusion_report_requested(map_env({})));
  EXPECT_FALSE(fusion_report_requested(EnvLookup{}));
  EXPECT_TRUE(fusion_report_requested(map_env({{"FUSEBOX_FUSION_REPORT", "1"}})));
  EXPECT_TRUE(fusion_report_requested(map_env({{"RLX_FUSION_REPORT", "yes"}})));
  EXPECT_FALSE(fusion_report_requested(map_env({{"FUSEBOX_FUSION_REPORT", "0"}})));
  EXPECT_FALSE(fusion_report_requested(map_env({{"FUSEBOX_FUSION_REPORT", "OFF"}})));
  EXPECT_FALSE(fusion_report_requested(map_env({{"FUSEBOX_FUSION_REPORT", ""}})));
  EXPECT_FALSE(fusion_report_requested(
      map_env({{"FUSEBOX_FUSION_REPORT", "no"}, {"RLX_FUSION_REPORT", "1"}})));
  // Not an option field: it changes nothing in merge_env.
  EXPECT_EQ(FusionOptions{}.merge_env(map_env({{"FUSEBOX_FUSION_REPORT", "1"}})), FusionOptions{});
}

TEST(FusionEnv, ProcessEnvReadsWithoutMutating) {
  EnvLookup env = process_env();
  EXPECT_FALSE(env("FUSEBOX_TEST_SURELY_NOT_SET_7f3a9").has_value());
  if (const char* path = std::getenv("PATH")) {
    EXPECT_EQ(env("PATH"), std::string(path));
  }
}

// ---- printing and parsing ----

TEST(FusionOptionsText, PrintsEveryFieldInOrder) {
  EXPECT_EQ(to_string(FusionOptions{}),
            "skip_fusion=0,unfuse_elementwise_regions=0,keep_elementwise_regions=0,"
            "decompose_fusion_regions=0,fk_fusion=1,fuse_region_prologue=1,"
            "fuse_batch_preprocess=1,native_fk_regions=0,fusion_limits=default,"
            "disable_conv_bias_act_fusion=0,no_io_peaks_output=0");
  FusionOptions o{true, false, true, false, false, true, false, true, FusionLimits{32, 16},
                  true, false};
  EXPECT_EQ(to_string(o),
            "skip_fusion=1,unfuse_elementwise_regions=0,keep_elementwise_regions=1,"
            "decompose_fusion_regions=0,fk_fusion=0,fuse_region_prologue=1,"
            "fuse_batch_preprocess=0,native_fk_regions=1,fusion_limits=32x16,"
            "disable_conv_bias_act_fusion=1,no_io_peaks_output=0");
  EXPECT_NE(to_string(FusionOptions::for_cpu()).find("fusion_limits=unbounded"),
            std::string::npos);
}

TEST(FusionOptionsText, RoundTripsEveryCombination) {
  const std::vector<std::optional<FusionLimits>> limits = {
      std::nullopt, FusionLimits::GPU_NATIVE, FusionLimits::UNBOUNDED, FusionLimits{8, 4},
      FusionLimits{64, kUnboundedLimit}, FusionLimits{1, 1}};
  for (int bits = 0; bits < (1 << 10); ++bits) {
    for (const auto& l : limits) {
      auto b = [bits](int i) { return ((bits >> i) & 1) != 0; };
      FusionOptions o{b(0), b(1), b(2), b(3), b(4), b(5), b(6), b(7), l, b(8), b(9)};
      // Parse on a base that differs from o everywhere, so every field must come from the text.
      FusionOptions base{!b(0), !b(1), !b(2), !b(3), !b(4), !b(5), !b(6), !b(7),
                         l ? std::nullopt : std::optional(FusionLimits{3, 2}), !b(8), !b(9)};
      Expected<FusionOptions> back = parse_fusion_options(to_string(o), base);
      ASSERT_TRUE(back) << back.status().to_string();
      ASSERT_EQ(*back, o) << to_string(o);
    }
  }
}

TEST(FusionOptionsText, ParsesPartialListsOnABase) {
  FusionOptions base = FusionOptions::for_cpu();
  Expected<FusionOptions> o =
      parse_fusion_options("skip_fusion=1,fk_fusion=0,fusion_limits=8x4", base);
  ASSERT_TRUE(o) << o.status().to_string();
  FusionOptions expected = base;
  expected.skip_fusion = true;
  expected.fk_fusion = false;
  expected.fusion_limits = FusionLimits{8, 4};
  EXPECT_EQ(*o, expected);

  EXPECT_EQ(*parse_fusion_options("", base), base);
  EXPECT_EQ(*parse_fusion_options(" , ,", base), base);
  // Bare boolean names, blanks, any-case values, last one wins, default limits reset.
  o = parse_fusion_options(" no_io_peaks_output , fk_fusion = OFF,fk_fusion=Yes,"
                           "fusion_limits=default,native_fk_regions=true,", base);
  ASSERT_TRUE(o) << o.status().to_string();
  expected = base;
  expected.no_io_peaks_output = true;
  expected.native_fk_regions = true;
  expected.fusion_limits.reset();
  EXPECT_EQ(*o, expected);
  EXPECT_EQ(parse_fusion_options("fusion_limits=UNBOUNDED")->fusion_limits,
            FusionLimits::UNBOUNDED);
  EXPECT_EQ(parse_fusion_options("fusion_limits=inf x 7")->fusion_limits,
            (FusionLimits{kUnboundedLimit, 7}));
}

TEST(FusionOptionsText, ErrorsNameTheFieldAndValue) {
  auto error_of = [](std::string_view text) {
    Expected<FusionOptions> o = parse_fusion_options(text);
    EXPECT_FALSE(o) << text;
    return o.status().message();
  };
  std::string m = error_of("skip_fusion=1,fuse_everything=1");
  EXPECT_NE(m.find("unknown fusion option 'fuse_everything'"), std::string::npos) << m;
  EXPECT_NE(m.find("no_io_peaks_output"), std::string::npos) << m;  // lists the known ones
  m = error_of("fk_fusion=maybe");
  EXPECT_NE(m.find("'fk_fusion'"), std::string::npos) << m;
  EXPECT_NE(m.find("'maybe'"), std::string::npos) << m;
  m = error_of("skip_fusion=");
  EXPECT_NE(m.find("'skip_fusion'"), std::string::npos) << m;
  for (const char* bad : {"8y4", "0x4", "8x0", "8x", "x4", "-1x4", "8x4x2", "abc", "", "8"}) {
    m = error_of(std::string("fusion_limits=") + bad);
    EXPECT_NE(m.find("fusion_limits"), std::string::npos) << bad << ": " << m;
    EXPECT_NE(m.find(std::string("'") + bad + "'"), std::string::npos) << bad << ": " << m;
  }
  m = error_of("fusion_limits");
  EXPECT_NE(m.find("fusion_limits"), std::string::npos) << m;
  // Names are exact: no case folding, no dashes.
  EXPECT_FALSE(parse_fusion_options("Skip_Fusion=1"));
  EXPECT_FALSE(parse_fusion_options("skip-fusion=1"));
  EXPECT_EQ(parse_fusion_options("fk_fusion=2").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fusebox
