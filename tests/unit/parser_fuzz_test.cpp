// The parser must never crash, hang or abort: this mutates valid programs a few thousand times
// (truncation, byte flips, insertions, deletions, splices, repeated spans, huge numbers, swapped
// op and dtype names, deep bracket nesting) and parses each. Whatever parses must also print to
// text that parses back to the same text. A fixed seed keeps failures reproducible; the failing
// input is printed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "fusebox/graph.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

std::vector<std::string> seed_programs() {
  std::vector<std::string> seeds;
  seeds.push_back(testing::read_test_file("lit/ir/ops-roundtrip.fbir"));
  seeds.push_back(
      "func @mlp(%x: f32[N,512], %w: f32[512,256], %b: f32[256]) -> (f32[N,256], i64[N,4]) {\n"
      "  %0 = matmul %x, %w : f32[N,256]\n"
      "  %1 = add %0, %b : f32[N,256]\n"
      "  %2 = gelu %1 {approximate = \"tanh\"} : f32[N,256]\n"
      "  %3 = constant {value = dense<f32[2]: [1.0, 2.5]>} : f32[2]\n"
      "  %4:2 = peaks %2 {k = 4} : f32[N,4], i64[N,4]\n"
      "  return %2, %4#1\n"
      "}\n");
  seeds.push_back(
      "func @f(%x: f32[N,4,6], %i: i64[3]) -> f32[N,24] {  // comment \"with a quote\n"
      "  %0 = clip %x {min = -inf, max = 1e-05} : f32[N,4,6]\n"
      "  %1 = slice %0 {starts = [-9223372036854775808], ends = [9223372036854775807], axes = [-1]} : f32[N,4,6]\n"
      "  %2 = reshape %1 {shape = [N, -1]} : f32[N,24]\n"
      "  %3 = constant {value = dense<bool[2]: [true, false]>} : bool[2]\n"
      "  %4 = elementwise_region %x {name = \"a\\\"b // c\"} : f32[N,4,6] (%a: f32[]) {\n"
      "    %0 = neg %a : f32[]\n"
      "    return %0\n"
      "  }\n"
      "  return %2\n"
      "}\n");
  return seeds;
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {
    for (int i = 0; i < kNumOps; ++i) words_.emplace_back(op_keyword(static_cast<Op>(i)));
    for (const char* w : {"f32", "f16", "bf16", "f64", "i8", "u8", "i32", "i64", "bool", "func", "return",
                          "dense", "inf", "nan", "true", "?", "N", "-1", "0", "99999999999999999999",
                          "9223372036854775807", "1e999", "\"", "\\", "//", "// -----", "#1", ":3"}) {
      words_.emplace_back(w);
    }
  }

  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }

  std::string mutate(std::string s, const std::vector<std::string>& seeds) {
    int steps = 1 + static_cast<int>(below(3));
    for (int i = 0; i < steps; ++i) s = mutate_once(std::move(s), seeds);
    return s;
  }

 private:
  std::string mutate_once(std::string s, const std::vector<std::string>& seeds) {
    static const char kBytes[] = "{}[]()<>%#@:,=\"\\?-.0123456789e \n\t\0\xff";
    size_t at = below(s.size() + 1);
    switch (below(10)) {
      case 0:  // truncate
        s.resize(at);
        break;
      case 1:  // flip a bit
        if (!s.empty()) s[below(s.size())] ^= static_cast<char>(1 << below(8));
        break;
      case 2:  // insert a byte, structural or random
        s.insert(at, 1, below(2) ? kBytes[below(sizeof(kBytes) - 1)] : static_cast<char>(below(256)));
        break;
      case 3:  // delete a span
        s.erase(at, below(40));
        break;
      case 4: {  // splice with another program
        const std::string& other = seeds[below(seeds.size())];
        s = s.substr(0, at) + other.substr(below(other.size() + 1));
        break;
      }
      case 5: {  // repeat a span
        size_t len = 1 + below(16);
        std::string span = s.substr(at, len);
        size_t times = 1 + below(below(2) ? 8 : 3000);
        std::string rep;
        for (size_t i = 0; i < times; ++i) rep += span;
        s.insert(at, rep);
        break;
      }
      case 6: {  // deep nesting
        static const char kOpen[] = "([{<";
        s.insert(at, 1000 + below(20000), kOpen[below(4)]);
        break;
      }
      case 7:  // insert a word of the language
        s.insert(at, words_[below(words_.size())]);
        break;
      default: {  // replace a word by another (an op, a dtype, a number)
        size_t start = at;
        while (start < s.size() && !std::isalnum(static_cast<unsigned char>(s[start]))) ++start;
        size_t end = start;
        while (end < s.size() && (std::isalnum(static_cast<unsigned char>(s[end])) || s[end] == '_')) ++end;
        s.replace(start, end - start, words_[below(words_.size())]);
        break;
      }
    }
    return s;
  }

  std::mt19937_64 rng_;
  std::vector<std::string> words_;
};

TEST(ParserFuzz, MutatedProgramsNeverCrash) {
  std::vector<std::string> seeds = seed_programs();
  ASSERT_GT(seeds[0].size(), 1000u) << "cannot read ops-roundtrip.fbir";
  // FUSEBOX_FUZZ_ITERATIONS / FUSEBOX_FUZZ_SEED run a longer or different campaign by hand.
  const char* iterations_env = std::getenv("FUSEBOX_FUZZ_ITERATIONS");
  const char* seed_env = std::getenv("FUSEBOX_FUZZ_SEED");
  long iterations = iterations_env ? std::atol(iterations_env) : 4000;
  Mutator mutator(seed_env ? std::strtoull(seed_env, nullptr, 10) : 20240601);
  long parsed = 0;
  for (long i = 0; i < iterations; ++i) {
    std::string input = mutator.mutate(seeds[mutator.below(seeds.size())], seeds);
    Expected<Module> m = parse_module(input, "fuzz.fbir");
    if (!m) {
      std::string msg = m.status().message();
      ASSERT_EQ(msg.rfind("fuzz.fbir:", 0), 0u) << msg << "\n--- input ---\n" << input;
      ASSERT_EQ(msg.find('\n'), std::string::npos) << msg;
      continue;
    }
    ++parsed;
    std::string printed = print_module(*m);
    Expected<Module> again = parse_module(printed, "printed.fbir");
    ASSERT_TRUE(again) << again.status().message() << "\n--- printed ---\n" << printed << "\n--- input ---\n"
                       << input;
    ASSERT_EQ(print_module(*again), printed) << "--- input ---\n" << input;
  }
  // Some mutations (inside comments, whitespace) keep programs valid: the round trip ran too.
  EXPECT_GT(parsed, iterations / 200);
}

TEST(ParserFuzz, PathologicalInputs) {
  std::vector<std::string> inputs = {
      std::string(100000, '['),
      std::string(100000, '{'),
      "func @f(" + std::string(50000, '('),
      "func @f(%x: f32[" + std::string(50000, '1') + "]) -> f32[1] {\n return %x\n}\n",
      "func @f(%x: f32[" + std::string(10000, 'N') + "]) -> f32[1] {\n return %x\n}\n",
      "func @f() -> f32[1] {\n  %0 = constant {value = dense<f32[1099511627776]: [1.0]>} : f32[1]\n  return %0\n}\n",
      "func @f() -> f32[1] {\n  %0 = constant {value = dense<f32[281474976710656,281474976710656]: []>} : f32[1]\n"
      "  return %0\n}\n",
      "func @f(%x: f32[281474976710656,281474976710656,281474976710656]) -> f32[1] {\n"
      "  %0 = reshape %x {shape = [-1]} : f32[1]\n  return %0\n}\n",
      std::string("\0\0\0func", 7),
      "func @f(%x: f32[4]) -> f32[4] {\n  %0:99999999999999999999 = relu %x : f32[4]\n  return %0\n}\n",
      "func @f(%x: f32[4]) -> f32[4] {\n  %0 = relu %x {" + std::string(20000, ',') + "} : f32[4]\n  return %0\n}\n",
      "func @f(%x: f32[4]) -> f32[4] {\n  %0 = elementwise_region %x : f32[4] (%a: f32[]) {\n" +
          [] {
            std::string s;
            for (int i = 0; i < 50; ++i) s += "  %0 = elementwise_region %a : f32[] (%a: f32[]) {\n";
            return s;
          }(),
  };
  for (const std::string& input : inputs) {
    Expected<Module> m = parse_module(input, "p.fbir");
    ASSERT_FALSE(m) << input.substr(0, 200);
    EXPECT_EQ(m.status().message().rfind("p.fbir:", 0), 0u) << m.status().message();
  }
}

}  // namespace
}  // namespace fusebox
