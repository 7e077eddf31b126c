// Helpers shared by the fusebox subcommands: option parsing with generated usage text, error
// reporting with the CLI's exit codes, seeded random arrays and output checksums.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "fusebox/status.h"
#include "fusion/options.h"
#include "ir/array.h"

namespace fusebox::cli {

// Exit codes of every subcommand (see commands.h).
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;

struct Option {
  std::string name;        // "--input"
  std::string value_name;  // "NAME=FILE.npy"; empty for a flag that takes no value
  std::string help;
  bool repeated = false;   // may be given several times (otherwise twice is a usage error)
  bool hidden = false;     // accepted but not listed in --help
};

// Options take their value as `--name VALUE` or `--name=VALUE`; everything else is positional
// (`--` ends the options). `--help` / `-h` is always accepted.
class CommandLine {
 public:
  CommandLine(std::string command, std::string synopsis, std::string description,
              std::vector<Option> options);

  // nullopt: carry on. A value: stop and exit with it (--help printed the usage: 0; bad usage
  // printed the problem and the usage to stderr: 2).
  std::optional<int> parse(const Args& args);

  bool has(std::string_view name) const;
  // The last value given for an option.
  std::optional<std::string> value(std::string_view name) const;
  std::vector<std::string> values(std::string_view name) const;
  const std::vector<std::string>& positionals() const { return positionals_; }

  std::string usage() const;
  // Prints "fusebox <command>: <message>" and the usage to stderr; returns kExitUsage.
  int usage_error(std::string_view message) const;
  // Prints "fusebox <command>: <message>" to stderr; returns kExitError.
  int error(std::string_view message) const;
  int error(const Status& status) const { return error(status.message()); }
  // Prints "fusebox <command>: note: <message>" to stderr.
  void note(std::string_view message) const;

 private:
  const Option* find(std::string_view name) const;

  std::string command_, synopsis_, description_;
  std::vector<Option> options_;
  std::vector<std::pair<std::string, std::string>> given_;  // (option name, value) in order
  std::vector<std::string> positionals_;
};

// "NAME=VALUE" split at the first '='; nullopt when there is none or either side is empty.
std::optional<std::pair<std::string, std::string>> split_assignment(std::string_view text);
// A whole decimal integer (optional sign), or nullopt.
std::optional<int64_t> parse_int(std::string_view text);
// "SYMBOL=SIZE" of --dim; nullopt when it is not that form or SIZE is outside 0..2^48 (the size
// limit, ir/size.h).
std::optional<std::pair<std::string, int64_t>> parse_dim_assignment(std::string_view text);

// --fusion-options applied over the defaults (FusionOptions{}), or the defaults when it is not
// given. The target's own choices (its forced unfuse of element-wise regions, its limits) and the
// FUSEBOX_* environment come later, when the pipeline resolves the options (resolve_options), so
// keep_elementwise_regions=1 still stops that unfuse: over for_target, which has already
// unfused, it could not.
Expected<FusionOptions> fusion_options_flag(const CommandLine& cl);

// --target parsed, nullopt when it is not given; an unknown name is an error naming the choices.
Expected<std::optional<FusionTarget>> target_flag(const CommandLine& cl);

// Seeded values: floats uniform in [lo, hi), integers uniform in [ceil(lo), floor(hi)] clamped
// to the type's range, bools true with probability 1/2.
Array random_array(DType dtype, std::vector<int64_t> shape, uint64_t seed, double lo = -1.0,
                   double hi = 1.0);
// A seed for one named value derived from a run's seed, so adding or removing one input does
// not change the values drawn for the others.
uint64_t derive_seed(uint64_t seed, std::string_view name);

// A checksum of one or more arrays: the sum of every value as double and a 64-bit FNV-1a hash
// of the raw bytes (equal hashes: equal bytes, for all practical purposes).
struct Checksum {
  double sum = 0;
  uint64_t fnv1a = 0xcbf29ce484222325ull;

  void add(const Array& a);
  std::string to_string() const;  // "sum=12.5 fnv1a=0x0123456789abcdef"
};

// A name made safe to use as a file name: characters outside [A-Za-z0-9_.-] become '_'.
std::string file_safe(std::string_view name);

}  // namespace fusebox::cli
