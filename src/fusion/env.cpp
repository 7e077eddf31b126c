#include "fusion/env.h"

#include <cstdlib>
#include <utility>

namespace fusebox {
namespace {

std::string_view trim(std::string_view s) {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

bool equals_ignoring_case(std::string_view a, std::string_view lower) {
  if (a.size() != lower.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
}

std::optional<std::string> lookup_non_empty(const EnvLookup& env, std::string_view prefix,
                                            std::string_view suffix) {
  std::string name;
  name.reserve(prefix.size() + suffix.size());
  name.append(prefix).append(suffix);
  std::optional<std::string> value = env(name);
  if (!value || trim(*value).empty()) return std::nullopt;
  return value;
}

}  // namespace

EnvLookup process_env() {
  return [](std::string_view name) -> std::optional<std::string> {
    // getenv needs a terminated string; the view may point into a larger buffer.
    const char* value = std::getenv(std::string(name).c_str());
    if (!value) return std::nullopt;
    return std::string(value);
  };
}

EnvLookup map_env(std::map<std::string, std::string, std::less<>> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

bool env_truthy(std::string_view value) {
  value = trim(value);
  if (value.empty()) return false;
  for (std::string_view no : {"0", "false", "off", "no"}) {
    if (equals_ignoring_case(value, no)) return false;
  }
  return true;
}

std::optional<std::string> fusion_env_value(const EnvLookup& env, std::string_view suffix) {
  if (!env) return std::nullopt;
  if (auto v = lookup_non_empty(env, kEnvPrefix, suffix)) return v;
  return lookup_non_empty(env, kEnvAliasPrefix, suffix);
}

std::optional<bool> fusion_env_bool(const EnvLookup& env, std::string_view suffix) {
  std::optional<std::string> value = fusion_env_value(env, suffix);
  if (!value) return std::nullopt;
  return env_truthy(*value);
}

bool fusion_env_flag(const EnvLookup& env, std::string_view suffix) {
  return fusion_env_bool(env, suffix).value_or(false);
}

bool fusion_report_requested(const EnvLookup& env) {
  return fusion_env_flag(env, env_var::kFusionReport);
}

}  // namespace fusebox
