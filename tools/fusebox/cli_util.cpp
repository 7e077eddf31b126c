#include "cli_util.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <random>

#include "ir/size.h"

namespace fusebox::cli {

CommandLine::CommandLine(std::string command, std::string synopsis, std::string description,
                         std::vector<Option> options)
    : command_(std::move(command)),
      synopsis_(std::move(synopsis)),
      description_(std::move(description)),
      options_(std::move(options)) {}

const Option* CommandLine::find(std::string_view name) const {
  for (const Option& o : options_) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

std::optional<int> CommandLine::parse(const Args& args) {
  bool options_ended = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (options_ended || arg.size() < 2 || arg[0] != '-') {
      positionals_.push_back(arg);
      continue;
    }
    if (arg == "--") {
      options_ended = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage().c_str(), stdout);
      return kExitOk;
    }
    size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    const Option* opt = find(name);
    if (!opt) return usage_error("unknown option '" + name + "'");
    std::string value;
    if (opt->value_name.empty()) {
      if (eq != std::string::npos) return usage_error(name + " takes no value");
    } else if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return usage_error(name + " needs a value: " + name + " " + opt->value_name);
    }
    if (!opt->repeated && has(name)) return usage_error(name + " is given twice");
    given_.emplace_back(std::move(name), std::move(value));
  }
  return std::nullopt;
}

bool CommandLine::has(std::string_view name) const {
  return std::any_of(given_.begin(), given_.end(), [&](const auto& g) { return g.first == name; });
}

std::optional<std::string> CommandLine::value(std::string_view name) const {
  std::optional<std::string> v;
  for (const auto& [n, val] : given_) {
    if (n == name) v = val;
  }
  return v;
}

std::vector<std::string> CommandLine::values(std::string_view name) const {
  std::vector<std::string> v;
  for (const auto& [n, val] : given_) {
    if (n == name) v.push_back(val);
  }
  return v;
}

std::string CommandLine::usage() const {
  std::string s = "usage: fusebox " + command_ + " " + synopsis_ + "\n\n" + description_ + "\n\noptions:\n";
  std::vector<std::pair<std::string, std::string>> rows;
  for (const Option& o : options_) {
    if (o.hidden) continue;
    rows.emplace_back(o.name + (o.value_name.empty() ? "" : " " + o.value_name), o.help);
  }
  rows.emplace_back("--help", "print this help");
  size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r.first.size());
  for (const auto& [left, help] : rows) s += "  " + left + std::string(width - left.size() + 2, ' ') + help + "\n";
  return s;
}

int CommandLine::usage_error(std::string_view message) const {
  std::fprintf(stderr, "fusebox %s: %.*s\n\n%s", command_.c_str(), int(message.size()), message.data(),
               usage().c_str());
  return kExitUsage;
}

int CommandLine::error(std::string_view message) const {
  std::fprintf(stderr, "fusebox %s: %.*s\n", command_.c_str(), int(message.size()), message.data());
  return kExitError;
}

void CommandLine::note(std::string_view message) const {
  std::fprintf(stderr, "fusebox %s: note: %.*s\n", command_.c_str(), int(message.size()), message.data());
}

std::optional<std::pair<std::string, std::string>> split_assignment(std::string_view text) {
  size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size()) return std::nullopt;
  return std::make_pair(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
}

std::optional<int64_t> parse_int(std::string_view text) {
  if (!text.empty() && text[0] == '+') text.remove_prefix(1);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<std::pair<std::string, int64_t>> parse_dim_assignment(std::string_view text) {
  auto kv = split_assignment(text);
  std::optional<int64_t> n = kv ? parse_int(kv->second) : std::nullopt;
  if (!n || *n < 0 || *n > kMaxSize) return std::nullopt;
  return std::pair{kv->first, *n};
}

Expected<FusionOptions> fusion_options_flag(const CommandLine& cl) {
  std::optional<std::string> text = cl.value("--fusion-options");
  if (!text) return FusionOptions{};
  return parse_fusion_options(*text, FusionOptions{});
}

Expected<std::optional<FusionTarget>> target_flag(const CommandLine& cl) {
  std::optional<std::string> text = cl.value("--target");
  if (!text) return std::optional<FusionTarget>();
  std::optional<FusionTarget> target = parse_target(*text);
  if (!target) return Status::invalid("unknown target '" + *text + "' (targets: " + target_choices() + ")");
  return target;
}

uint64_t derive_seed(uint64_t seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) h = (h ^ uint8_t(c)) * 0x100000001b3ull;
  // splitmix64's finaliser: nearby seeds give unrelated streams.
  uint64_t z = seed + h + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

Array random_array(DType dtype, std::vector<int64_t> shape, uint64_t seed, double lo, double hi) {
  Array a(dtype, std::move(shape));
  std::mt19937_64 rng(seed);
  if (dtype == DType::Bool) {
    for (int64_t i = 0; i < a.numel(); ++i) a.set_i64(i, int64_t(rng() & 1));
    return a;
  }
  if (is_float(dtype)) {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (int64_t i = 0; i < a.numel(); ++i) a.set_f64(i, dist(rng));
    return a;
  }
  // The type's range, capped to the i32 range (where the values keep every op's result exact).
  double type_lo = is_signed(dtype) ? -std::ldexp(1.0, 8 * std::min(dtype_size(dtype), 4) - 1) : 0.0;
  double type_hi = std::ldexp(1.0, 8 * std::min(dtype_size(dtype), 4) - (is_signed(dtype) ? 1 : 0)) - 1;
  int64_t ilo = int64_t(std::max(std::ceil(lo), type_lo));
  int64_t ihi = int64_t(std::min(std::floor(hi), type_hi));
  if (ihi < ilo) ihi = ilo;
  std::uniform_int_distribution<int64_t> dist(ilo, ihi);
  for (int64_t i = 0; i < a.numel(); ++i) a.set_i64(i, dist(rng));
  return a;
}

void Checksum::add(const Array& a) {
  for (int64_t i = 0; i < a.numel(); ++i) sum += a.get_f64(i);
  const auto* bytes = static_cast<const uint8_t*>(a.raw());
  for (size_t i = 0; i < a.nbytes(); ++i) fnv1a = (fnv1a ^ bytes[i]) * 0x100000001b3ull;
}

std::string Checksum::to_string() const {
  char buf[96];
  std::snprintf(buf, sizeof buf, "sum=%.9g fnv1a=0x%016llx", sum, static_cast<unsigned long long>(fnv1a));
  return buf;
}

std::string file_safe(std::string_view name) {
  std::string s(name);
  for (char& c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '.' || c == '-';
    if (!ok) c = '_';
  }
  // "." and ".." are directories, not files.
  if (s.empty() || s == "." || s == "..") s = "_" + s;
  return s;
}

}  // namespace fusebox::cli
