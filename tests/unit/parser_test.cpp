// Tests of the .fbir printer and parser: canonical text round-trips byte for byte, every op of
// ops.def has a sample in tests/lit/ir/ops-roundtrip.fbir, values of every attribute type survive
// print -> parse, and malformed text gets "<file>:<line>:<col>: message".
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "fusebox/graph.h"
#include "fusion/fuse.h"
#include "ir/attr_text.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

// The file without its comment lines: the functions in canonical form, blank-line separated.
std::string without_comments(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("//", 0) == 0) continue;
    if (out.empty() && line.empty()) continue;
    out += line + "\n";
  }
  return out;
}

std::string round_trip(const std::string& text) {
  Expected<Module> m = parse_module(text, "t.fbir");
  if (!m) return "error: " + m.status().message();
  return print_module(*m);
}

std::string parse_error(const std::string& text) {
  Expected<Module> m = parse_module(text, "t.fbir");
  return m ? "no error" : m.status().message();
}

void collect_ops(const Graph& g, std::set<Op>* ops) {
  for (const Node& n : g.nodes()) {
    ops->insert(n.op);
    if (n.body) collect_ops(*n.body, ops);
  }
}

TEST(OpsRoundTrip, FileIsCanonicalAndCoversEveryOp) {
  std::string text = testing::read_test_file("lit/ir/ops-roundtrip.fbir");
  ASSERT_FALSE(text.empty()) << "cannot read tests/lit/ir/ops-roundtrip.fbir";
  std::string canonical = without_comments(text);
  Expected<Module> m = parse_module(canonical, "ops-roundtrip.fbir");
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_EQ(print_module(*m), canonical);

  std::set<Op> used;
  for (const Graph& g : m->functions) collect_ops(g, &used);
  for (int i = 0; i < kNumOps; ++i) {
    Op op = static_cast<Op>(i);
    EXPECT_TRUE(used.count(op)) << "ops-roundtrip.fbir has no sample of '" << op_keyword(op)
                                << "': add one with its attributes";
    EXPECT_NE(canonical.find(" = " + std::string(op_keyword(op)) + " "), std::string::npos)
        << op_keyword(op);
  }
}

TEST(Printer, PrintsTheMlpExample) {
  const std::string text =
      "func @mlp(%x: f32[N,512], %w: f32[512,256], %b: f32[256]) -> (f32[N,256], i64[N,4]) {\n"
      "  %0 = matmul %x, %w : f32[N,256]\n"
      "  %1 = add %0, %b : f32[N,256]\n"
      "  %2 = gelu %1 {approximate = \"tanh\"} : f32[N,256]\n"
      "  %3 = constant {value = dense<f32[2]: [1.0, 2.5]>} : f32[2]\n"
      "  %4:2 = peaks %2 {k = 4} : f32[N,4], i64[N,4]\n"
      "  return %2, %4#1\n"
      "}\n";
  EXPECT_EQ(round_trip(text), text);
}

TEST(Printer, BuilderGraphsPrintCanonicalText) {
  GraphBuilder b("f");
  ValueId x = b.input("x", DType::F32, {Dim::symbol("N"), 64});
  std::vector<ValueId> peaks = b.op_results(Op::Peaks, {x}, {{"k", int64_t(3)}});
  ValueId r = b.relu(peaks[0]);
  ValueId c = b.cast(peaks[1], DType::F32);
  b.output(b.add(r, c));
  Expected<Graph> g = b.build();
  ASSERT_TRUE(g) << g.status().message();
  // The second result of peaks is %0#1 and takes no number: relu is %1.
  const std::string want =
      "func @f(%x: f32[N,64]) -> f32[N,3] {\n"
      "  %0:2 = peaks %x {k = 3} : f32[N,3], i64[N,3]\n"
      "  %1 = relu %0#0 : f32[N,3]\n"
      "  %2 = cast %0#1 {to = f32} : f32[N,3]\n"
      "  %3 = add %1, %2 : f32[N,3]\n"
      "  return %3\n"
      "}\n";
  EXPECT_EQ(print_graph(*g), want);
  EXPECT_EQ(round_trip(want), want);
}

TEST(Printer, NamesAreMadeUniqueAndParseable) {
  GraphBuilder b("f");
  ValueId x = b.input("x", DType::F32, {4});
  ValueId y = b.relu(x);
  ValueId z = b.tanh(y);
  ValueId w = b.sigmoid(z);
  b.name(y, "my value");  // a space cannot be written in text
  b.name(z, "x");         // taken by the input
  b.name(w, "0");         // a number the counter would otherwise hand out
  b.output(w);
  b.output(b.op(Op::Neg, {w}));
  Expected<Graph> g = b.build();
  ASSERT_TRUE(g) << g.status().message();
  std::string text = print_graph(*g);
  EXPECT_NE(text.find("%my_value = relu %x"), std::string::npos) << text;
  EXPECT_NE(text.find("%x.1 = tanh %my_value"), std::string::npos) << text;
  EXPECT_NE(text.find("%0 = sigmoid %x.1"), std::string::npos) << text;
  EXPECT_NE(text.find("%1 = neg %0"), std::string::npos) << text;
  EXPECT_EQ(round_trip(text), text);
}

TEST(Parser, KeepsNamesAndSetsLocations) {
  const std::string text =
      "// a comment line\n"
      "func @f(%x: f32[N,10]) -> f32[N,10] {\n"
      "  %logits = relu %x : f32[N,10]  // trailing comment\n"
      "  %probs.v2 = softmax %logits {axis = -1} : f32[N,10]\n"
      "  return %probs.v2\n"
      "}\n";
  Expected<Graph> g = parse_graph(text, "t.fbir");
  ASSERT_TRUE(g) << g.status().message();
  ASSERT_EQ(g->nodes().size(), 2u);
  EXPECT_EQ(g->value(g->nodes()[0].outputs[0]).name, "logits");
  EXPECT_EQ(g->nodes()[0].loc.line, 3);
  EXPECT_EQ(g->nodes()[0].loc.column, 3);
  EXPECT_EQ(g->nodes()[1].loc.line, 4);
  EXPECT_EQ(print_graph(*g), without_comments(
                                 "func @f(%x: f32[N,10]) -> f32[N,10] {\n"
                                 "  %logits = relu %x : f32[N,10]\n"
                                 "  %probs.v2 = softmax %logits {axis = -1} : f32[N,10]\n"
                                 "  return %probs.v2\n"
                                 "}\n"));
}

TEST(Parser, AcceptsFreeLayoutAndPrintsCanonically) {
  const std::string text =
      "func   @f ( %x :f32[ N , 4 ] )->(f32[N,4])\n{ %a=leaky_relu %x{alpha=1}:f32[N,4]\n"
      "return %a }";
  EXPECT_EQ(round_trip(text),
            "func @f(%x: f32[N,4]) -> f32[N,4] {\n"
            "  %a = leaky_relu %x {alpha = 1.0} : f32[N,4]\n"
            "  return %a\n"
            "}\n");
}

TEST(Parser, SymbolicAndUnknownDimsRoundTrip) {
  const std::string text =
      "func @conv(%img: f32[N,8,H,W], %k: f32[16,8,3,3]) -> f32[N,16,?,?] {\n"
      "  %0 = conv2d %img, %k {pad = [1, 1, 1, 1]} : f32[N,16,?,?]\n"
      "  return %0\n"
      "}\n"
      "\n"
      "func @scalar(%s: f64[]) -> f64[] {\n"
      "  %0 = exp %s : f64[]\n"
      "  return %0\n"
      "}\n";
  EXPECT_EQ(round_trip(text), text);
  // A result may be declared more precisely than inference knows ('?' is refined).
  const std::string refined =
      "func @conv(%img: f32[N,8,H,W], %k: f32[16,8,3,3]) -> f32[N,16,H,W] {\n"
      "  %0 = conv2d %img, %k {pad = [1, 1, 1, 1]} : f32[N,16,H,W]\n"
      "  return %0\n"
      "}\n";
  EXPECT_EQ(round_trip(refined), refined);
  EXPECT_EQ(parse_error("func @f(%x: f32[?]) -> f32[?] {\n  return %x\n}\n"),
            "t.fbir:1:17: parameter %x has an unnamed dim '?'; name it with a symbol such as N");
}

TEST(Parser, MultiResultsUseHashIndices) {
  const std::string text =
      "func @f(%x: f32[8,32]) -> (i64[8,2], f32[8,2]) {\n"
      "  %top:2 = peaks %x {k = 2} : f32[8,2], i64[8,2]\n"
      "  %0 = relu %top#0 : f32[8,2]\n"
      "  return %top#1, %0\n"
      "}\n";
  Expected<Graph> g = parse_graph(text, "t.fbir");
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(g->nodes()[0].outputs.size(), 2u);
  EXPECT_EQ(g->outputs()[0], g->nodes()[0].outputs[1]);
  EXPECT_EQ(print_graph(*g), text);
  EXPECT_EQ(parse_error("func @f(%x: f32[8,32]) -> f32[8,2] {\n  %p:2 = peaks %x {k = 2} : f32[8,2], i64[8,2]\n"
                        "  return %p\n}\n"),
            "t.fbir:3:10: %p has 2 results; use one of %p#0 to %p#1");
  EXPECT_EQ(parse_error("func @f(%x: f32[8,32]) -> f32[8,2] {\n  %p:2 = peaks %x {k = 2} : f32[8,2], i64[8,2]\n"
                        "  return %p#2\n}\n"),
            "t.fbir:3:10: %p has 2 results; the index must be below 2");
  EXPECT_EQ(parse_error("func @f(%x: f32[8]) -> f32[8] {\n  return %x#0\n}\n"),
            "t.fbir:2:10: %x is a single value; use it without '#'");
  EXPECT_EQ(parse_error("func @f(%x: f32[8,32]) -> f32[8,2] {\n  %p = peaks %x {k = 2} : f32[8,2], i64[8,2]\n"
                        "  return %p\n}\n"),
            "t.fbir:2:27: %p has 2 result types; a node with several results is written %p:2");
}

// Every attribute type, including the awkward values, reads back to the same text.
TEST(Parser, EveryAttributeTypeRoundTrips) {
  const std::string text =
      "func @attrs(%x: f32[N,4,6], %i: i64[3]) -> f32[N,24] {\n"
      "  %0 = leaky_relu %x {alpha = 1e-05} : f32[N,4,6]\n"
      "  %1 = clip %0 {min = -inf, max = inf} : f32[N,4,6]\n"
      "  %2 = pad %1 {pads = [0, 0, 0, 0, 0, 0], value = nan} : f32[N,4,6]\n"
      "  %3 = hardsigmoid %2 {alpha = 0.16666666666666666, beta = 1.5e+300} : f32[N,4,6]\n"
      "  %4 = reduce_sum %3 {axes = [-1], keepdims = true} : f32[N,4,1]\n"
      "  %5 = slice %3 {starts = [-9223372036854775808], ends = [9223372036854775807], axes = [-1], "
      "steps = [1]} : f32[N,4,6]\n"
      "  %6 = resize %5 {scales = [1.0, 0.5, 2.5], mode = \"linear\"} : f32[N,2,15]\n"
      "  %7 = reshape %5 {shape = [N, -1]} : f32[N,24]\n"
      "  %8 = expand %4 {shape = [N, 4, 6]} : f32[N,4,6]\n"
      "  %9 = cast %i {to = bf16} : bf16[3]\n"
      "  %10 = constant {value = dense<i8[2,2]: [-128, 127, 0, -1]>} : i8[2,2]\n"
      "  %11 = elementwise_region %x {name = \"q\\\"uote\\\\back\\nline\\ttab // not a comment\"} : f32[N,4,6] "
      "(%a: f32[]) {\n"
      "    %0 = neg %a : f32[]\n"
      "    return %0\n"
      "  }\n"
      "  return %7\n"
      "}\n";
  EXPECT_EQ(round_trip(text), text);
  Expected<Graph> g = parse_graph(text);
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(g->nodes()[11].attr_str("name"), "q\"uote\\back\nline\ttab // not a comment");
  EXPECT_TRUE(std::isnan(g->nodes()[2].attr_f64("value")));
  EXPECT_EQ(g->nodes()[5].attr_i64s("starts")[0], INT64_MIN);
}

TEST(Parser, DenseArraysOfEveryDtypeKeepTheirValues) {
  for (int i = 0; i < kNumDTypes; ++i) {
    DType dt = static_cast<DType>(i);
    Array a = testing::random_array(dt, {3, 5}, 1234 + i, -100.0, 100.0);
    GraphBuilder b("c");
    ValueId c = b.constant(a);
    b.output(c);
    Expected<Graph> g = b.build();
    ASSERT_TRUE(g) << g.status().message();
    std::string text = print_graph(*g);
    Expected<Graph> back = parse_graph(text);
    ASSERT_TRUE(back) << dtype_name(dt) << ": " << back.status().message() << "\n" << text;
    EXPECT_TRUE(back->nodes()[0].attr_array("value").same_data(a)) << text;
    EXPECT_EQ(print_graph(*back), text);
  }
  const std::string edge =
      "func @c() -> (f32[], f32[0], u8[2], i64[2]) {\n"
      "  %0 = constant {value = dense<f32[]: [-0.0]>} : f32[]\n"
      "  %1 = constant {value = dense<f32[0]: []>} : f32[0]\n"
      "  %2 = constant {value = dense<u8[2]: [0, 255]>} : u8[2]\n"
      "  %3 = constant {value = dense<i64[2]: [-9223372036854775808, 9223372036854775807]>} : i64[2]\n"
      "  return %0, %1, %2, %3\n"
      "}\n";
  EXPECT_EQ(round_trip(edge), edge);
}

TEST(Parser, RandomScalarAttributesRoundTripExactly) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 500; ++i) {
    uint64_t bits = rng();
    double f;
    std::memcpy(&f, &bits, sizeof f);
    int64_t n = static_cast<int64_t>(rng());
    for (const AttrValue& v : {AttrValue(f), AttrValue(n), AttrValue(std::vector<double>{f, -f}),
                               AttrValue(std::vector<int64_t>{n, -(n / 2)})}) {
      std::string text = print_attr_value(v);
      size_t consumed = 0;
      Expected<AttrValue> back = parse_attr_value(text, attr_type_of(v), &consumed, nullptr);
      ASSERT_TRUE(back) << text << ": " << back.status().message();
      EXPECT_EQ(consumed, text.size());
      EXPECT_EQ(print_attr_value(*back), text);
      if (!std::isnan(f)) {
        EXPECT_TRUE(attr_values_equal(*back, v)) << text;
      }
    }
  }
}

// Regions made by the fusion outliner (a multi-result region whose results reuse value ids)
// print as text that parses back to the same text.
TEST(Printer, FusedRegionsRoundTrip) {
  const std::string text =
      "func @f(%x: f32[N,8], %a: f32[8], %b: f32[8]) -> (f32[N,8], f32[N,8]) {\n"
      "  %0 = mul %x, %a : f32[N,8]\n"
      "  %1 = add %0, %b : f32[N,8]\n"
      "  %2 = relu %1 : f32[N,8]\n"
      "  %3 = tanh %1 : f32[N,8]\n"
      "  %4 = matmul %2, %x : f32[N,8]\n"
      "  return %4, %3\n"
      "}\n";
  Expected<Graph> g = parse_graph(text);
  ASSERT_TRUE(g) << g.status().message();
  Expected<Graph> fused = Fuse(FusionTarget::Cpu, claim_table_of(FusionTarget::Cpu)).run(*g);
  ASSERT_TRUE(fused) << fused.status().message();
  std::string printed = print_graph(*fused);
  EXPECT_NE(printed.find("elementwise_region"), std::string::npos) << printed;
  EXPECT_EQ(round_trip(printed), printed);
}

TEST(Parser, ModulesWithSeveralFunctions) {
  const std::string text =
      "func @a(%x: f32[2]) -> f32[2] {\n  %0 = relu %x : f32[2]\n  return %0\n}\n"
      "\n"
      "func @b(%x: f32[2], %y: f32[2]) -> (f32[2], f32[2]) {\n  %0 = add %x, %y : f32[2]\n  return %0, %x\n}\n";
  Expected<Module> m = parse_module(text);
  ASSERT_TRUE(m) << m.status().message();
  ASSERT_EQ(m->functions.size(), 2u);
  EXPECT_NE(m->find("b"), nullptr);
  EXPECT_EQ(print_module(*m), text);
  EXPECT_FALSE(parse_graph(text));  // parse_graph wants exactly one
}

TEST(Parser, ErrorsCarryFileLineAndColumn) {
  auto fn = [](const std::string& body) {
    return "func @f(%x: f32[4], %y: f32[5]) -> f32[4] {\n" + body + "}\n";
  };
  EXPECT_EQ(parse_error(fn("  %0 = addd %x, %x : f32[4]\n  return %0\n")), "t.fbir:2:8: unknown op 'addd'");
  EXPECT_EQ(parse_error(fn("  %0 = relu %7 : f32[4]\n  return %0\n")), "t.fbir:2:13: use of undefined value %7");
  EXPECT_EQ(parse_error(fn("  %0 = relu %x : f32[4]\n  %0 = relu %x : f32[4]\n  return %0\n")),
            "t.fbir:3:3: %0 is defined twice (first at 2:3)");
  EXPECT_EQ(parse_error(fn("  %0 = relu %x : f32[4\n  return %0\n")),
            "t.fbir:3:3: expected ',' or ']' in the type, found 'return'");
  EXPECT_EQ(parse_error(fn("  %0 = relu %x {alpha = 1.0} : f32[4]\n  return %0\n")),
            "t.fbir:2:17: unknown attribute 'alpha' for relu (it takes none)");
  EXPECT_EQ(parse_error(fn("  %0 = gelu %x {approximat = \"tanh\"} : f32[4]\n  return %0\n")),
            "t.fbir:2:17: unknown attribute 'approximat' for gelu (it takes: approximate)");
  EXPECT_EQ(parse_error(fn("  %0 = gelu %x {approximate = \"cubic\"} : f32[4]\n  return %0\n")),
            "t.fbir:2:31: attribute 'approximate' of gelu is \"cubic\", expected one of none, tanh");
  // The verifier's findings point at the node.
  EXPECT_EQ(parse_error(fn("  %0 = add %x, %y : f32[4]\n  return %0\n")),
            "t.fbir:2:3: %0 = add: add: cannot broadcast [4] with [5]: dim 0 is 4 vs 5");
  EXPECT_EQ(parse_error(fn("  %0 = relu %x : f32[5]\n  return %0\n")),
            "t.fbir:2:3: %0 = relu: result 0 is declared f32[5] but the operands give f32[4]");
  EXPECT_EQ(parse_error(fn("  %0 = relu %x : f32[4]\n  return %y\n")),
            "t.fbir:3:10: return value 0 is f32[5] but the signature declares f32[4]");
  EXPECT_EQ(parse_error(""), "t.fbir:1:1: empty file: expected at least one 'func'");
  EXPECT_EQ(parse_error("func @f(%x: f32[4]) -> f32[4] {\n  return %x\n}\nfunc @f(%x: f32[4]) -> f32[4] {\n"
                        "  return %x\n}\n"),
            "t.fbir:4:6: function @f is defined twice (first at 1:1)");
  EXPECT_EQ(parse_error("func @f(%x: f32[4]) -> f32[4] {\n  %0 = relu %x : f32[4]\n}\n"),
            "t.fbir:3:1: expected 'return' ending the body, found '}'");
}

TEST(Parser, SplitChunksKeepWholeFileLines) {
  Expected<Module> m = parse_module("\n\nfunc @f(%x: f32[4]) -> f32[4] {\n  %0 = relu %y : f32[4]\n}\n", "big.fbir", 40);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.status().message(), "big.fbir:43:13: use of undefined value %y");
}

TEST(Parser, GarbageGetsPrintableMessages) {
  std::string msg = parse_error(std::string("func @f(%x: f32[4]) -> f32[4] {\n  \x01\xff\n}\n"));
  EXPECT_EQ(msg, "t.fbir:2:3: expected a node ('%name = op ...') or 'return', found '\\x01'");
  msg = parse_error("func @f(%x: f32[99999999999999999999]) -> f32[4] {\n  return %x\n}\n");
  EXPECT_EQ(msg, "t.fbir:1:17: dim 99999999999999999999 is too large (the limit is 2^48)");
  msg = parse_error("func @f(%x: f32[4]) -> f32[4] {\n  %0 = gelu %x {approximate = \"tanh} : f32[4]\n"
                    "  return %0\n}\n");
  EXPECT_EQ(msg.rfind("t.fbir:2:31: bad str value for attribute 'approximate' of gelu: unterminated string", 0), 0u)
      << msg;
}

}  // namespace
}  // namespace fusebox
