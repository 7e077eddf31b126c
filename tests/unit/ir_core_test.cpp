// Tests of the IR core: dtypes, shapes and broadcasting, the op table, the builder, shape
// inference and the verifier.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "fusebox/graph.h"
#include "ir/block_pool.h"
#include "ir/shape_inference.h"
#include "ir/size.h"

namespace fusebox {
namespace {

// Arrays of up to 64 bytes live in one pooled block with their control block, the bytes aligned
// by hand: every size starts on a cache line and owns its bytes alone.
TEST(Array, SmallAndLargeBuffersAreAlignedAndSeparate) {
  std::vector<Array> arrays;
  for (int64_t n = 0; n <= 40; ++n) arrays.emplace_back(DType::U8, std::vector<int64_t>{n});
  arrays.emplace_back(DType::F32, std::vector<int64_t>{});
  arrays.emplace_back(DType::F64, std::vector<int64_t>{8});
  arrays.emplace_back(DType::F64, std::vector<int64_t>{9});
  for (size_t k = 0; k < arrays.size(); ++k) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(arrays[k].raw()) % kArrayAlignment, 0u) << arrays[k].type_string();
    arrays[k].fill_bytes(uint8_t(k + 1));
  }
  for (size_t k = 0; k < arrays.size(); ++k) {
    const auto* b = static_cast<const uint8_t*>(arrays[k].raw());
    for (size_t i = 0; i < arrays[k].nbytes(); ++i)
      ASSERT_EQ(b[i], uint8_t(k + 1)) << arrays[k].type_string();
  }
  Array copy = arrays[8];  // shares the block; the block lives while any copy does
  arrays.clear();
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(static_cast<const uint8_t*>(copy.raw())[i], 9);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
TEST(BlockPool, AFreedBlockIsReusedByTheFreeingThread) {
  void* a = pool_allocate(40);
  void* b = pool_allocate(48);  // the same class of 16 bytes
  pool_free(a, 40);
  EXPECT_EQ(pool_allocate(33), a);  // last freed, first given
  pool_free(b, 48);
  pool_free(a, 33);
  void* big = pool_allocate(kMaxPooledBytes + 1);  // not pooled: malloc
  pool_free(big, kMaxPooledBytes + 1);
}
#endif

// Blocks made on one thread and freed on others (as tensor states dropped on another thread) are
// kept by the freeing thread and given back when it ends; none is handed out twice.
TEST(BlockPool, BlocksCrossThreadsIntact) {
  constexpr int kBlocks = 3000;  // over kMaxPooledBlocks: the rest go back to malloc
  std::vector<uint64_t*> blocks(kBlocks);
  for (int i = 0; i < kBlocks; ++i) {
    blocks[size_t(i)] = static_cast<uint64_t*>(pool_allocate(64));
    for (int w = 0; w < 8; ++w) blocks[size_t(i)][w] = uint64_t(i) * 8 + uint64_t(w);
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint64_t*> mine;
      for (int i = t; i < kBlocks; i += 2) {
        for (int w = 0; w < 8; ++w) EXPECT_EQ(blocks[size_t(i)][w], uint64_t(i) * 8 + uint64_t(w));
        pool_free(blocks[size_t(i)], 64);
        auto* again = static_cast<uint64_t*>(pool_allocate(64));
        again[0] = uint64_t(t);
        mine.push_back(again);
      }
      for (uint64_t* p : mine) EXPECT_EQ(p[0], uint64_t(t));  // no block was given to two owners
      for (uint64_t* p : mine) pool_free(p, 64);
    });
  }
  for (std::thread& th : threads) th.join();
}

TEST(DType, NamesRoundTrip) {
  for (int i = 0; i < kNumDTypes; ++i) {
    DType t = static_cast<DType>(i);
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  }
  EXPECT_FALSE(parse_dtype("f128").has_value());
}

// The wider and unsigned integers: sizes, signedness, and Array element access at the edges of
// each range (u64 above 2^63 included, which does not fit an i64).
TEST(DType, SixteenBitAndUnsignedIntegers) {
  EXPECT_EQ(dtype_size(DType::I16), 2);
  EXPECT_EQ(dtype_size(DType::U16), 2);
  EXPECT_EQ(dtype_size(DType::U32), 4);
  EXPECT_EQ(dtype_size(DType::U64), 8);
  for (DType t : {DType::I16, DType::U16, DType::U32, DType::U64}) EXPECT_TRUE(is_integer(t));
  EXPECT_TRUE(is_signed(DType::I16));
  EXPECT_FALSE(is_signed(DType::U16) || is_signed(DType::U32) || is_signed(DType::U64));
  Array a(DType::U64, {3});
  a.set_f64(0, 18446744073709549568.0);  // the largest double below 2^64
  a.set_f64(1, 9223372036854775808.0);   // 2^63
  a.set_f64(2, -1.0);                    // saturates to the i64 range, then wraps like a cast
  EXPECT_EQ(a.data<uint64_t>()[0], 18446744073709549568ull);
  EXPECT_EQ(a.data<uint64_t>()[1], 9223372036854775808ull);
  EXPECT_EQ(a.data<uint64_t>()[2], ~uint64_t(0));
  EXPECT_EQ(a.get_f64(1), 9223372036854775808.0);
  Array b(DType::U16, {2});
  b.set_i64(0, 65535);
  b.set_i64(1, 65536);  // wraps
  EXPECT_EQ(b.get_i64(0), 65535);
  EXPECT_EQ(b.get_i64(1), 0);
  Array c(DType::I16, {1});
  c.set_f64(0, -32768.0);
  EXPECT_EQ(c.get_i64(0), -32768);
}

TEST(DType, HalfConversionsRoundToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);                 // overflow to inf
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(NAN))));
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
  // Every f16 value converts to f32 and back unchanged.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;  // NaNs
    ASSERT_EQ(f32_to_f16(f16_to_f32(uint16_t(h))), h) << h;
  }
}

TEST(Shape, BroadcastFollowsNumpy) {
  std::string why;
  auto s = broadcast_shapes(make_shape({3, 1}), make_shape({3, 5}), &why);
  ASSERT_TRUE(s);
  EXPECT_EQ(shape_to_string(*s), "3,5");
  s = broadcast_shapes(make_shape({5}), make_shape({2, 3, 1}), &why);
  ASSERT_TRUE(s);
  EXPECT_EQ(shape_to_string(*s), "2,3,5");
  EXPECT_FALSE(broadcast_shapes(make_shape({3}), make_shape({4}), &why));
  EXPECT_NE(why.find("cannot broadcast"), std::string::npos);
  s = broadcast_shapes({Dim::symbol("N"), 1}, {1, 8}, &why);
  ASSERT_TRUE(s);
  EXPECT_EQ(shape_to_string(*s), "N,8");
}

TEST(Size, CheckedArithmeticStopsAtTheLimit) {
  EXPECT_EQ(size_add(kMaxSize - 1, 1), kMaxSize);
  EXPECT_FALSE(size_add(kMaxSize, 1));
  EXPECT_FALSE(size_add(-1, 1));
  EXPECT_EQ(size_mul(int64_t(1) << 24, int64_t(1) << 24), kMaxSize);
  EXPECT_FALSE(size_mul(int64_t(1) << 24, (int64_t(1) << 24) + 1));
  EXPECT_FALSE(size_mul(0, kMaxSize + 1));  // an operand over the limit, even times 0
  EXPECT_FALSE(size_mul(INT64_MAX, INT64_MAX));
}

TEST(Size, ZeroElementTensorsAreHeldToTheLimitInEitherOrder) {
  const int64_t huge = int64_t(1) << 61, big = int64_t(1) << 30;
  EXPECT_EQ(checked_num_elements(std::vector<int64_t>{0, kMaxSize}), 0);
  EXPECT_EQ(checked_num_elements(std::vector<int64_t>{kMaxSize, 0}), 0);
  EXPECT_FALSE(checked_num_elements(std::vector<int64_t>{0, huge}));
  EXPECT_FALSE(checked_num_elements(std::vector<int64_t>{huge, 0}));
  EXPECT_FALSE(checked_num_elements(std::vector<int64_t>{0, big, big}));
  EXPECT_FALSE(checked_num_elements(std::vector<int64_t>{big, big, 0}));
  EXPECT_EQ(checked_num_elements(std::vector<int64_t>{3, 5, 7}), 105);
  EXPECT_EQ(check_size(std::vector<int64_t>{0, huge}).message(),
            "[0,2305843009213693952] has a dim of 2305843009213693952 (the limit is 2^48 elements per dim and per tensor)");
  EXPECT_EQ(check_size(Shape{Dim::symbol("N"), big, big}).message(),
            "[N,1073741824,1073741824] has more than 2^48 elements (the limit is 2^48 elements per dim and per tensor)");
}

TEST(OpTable, KeywordsAreUniqueAndSchemasParse) {
  for (int i = 0; i < kNumOps; ++i) {
    const OpInfo& info = op_info(static_cast<Op>(i));
    EXPECT_EQ(op_from_keyword(info.keyword), info.op);
    EXPECT_LE(info.min_inputs, info.max_inputs < 0 ? 1 << 20 : info.max_inputs);
  }
  const OpInfo& gelu = op_info(Op::Gelu);
  ASSERT_EQ(gelu.attrs.size(), 1u);
  EXPECT_EQ(gelu.attrs[0].choices.size(), 2u);
  EXPECT_EQ(std::get<std::string>(*gelu.attrs[0].default_value), "none");
  EXPECT_TRUE(op_info(Op::Cast).attrs[0].required);
  EXPECT_LT(op_kind(Op::Add), op_kind(Op::Reshape));
  EXPECT_LT(op_kind(Op::Reshape), op_kind(Op::ReduceSum));
  EXPECT_LT(op_kind(Op::ReduceSum), op_kind(Op::MatMul));
}

TEST(Builder, InfersSymbolicShapes) {
  GraphBuilder b("mlp");
  ValueId x = b.input("x", DType::F32, {Dim::symbol("N"), 512});
  ValueId w = b.input("w", DType::F32, {512, 256});
  ValueId bias = b.input("b", DType::F32, {256});
  ValueId y = b.gelu(b.add(b.matmul(x, w), bias), true);
  b.output(y);
  Expected<Graph> g = b.build();
  ASSERT_TRUE(g) << g.status().to_string();
  EXPECT_EQ(g->type(y).to_string(), "f32[N,256]");
  EXPECT_EQ(g->nodes().size(), 3u);
}

TEST(Builder, ReportsTheFirstErrorWithOperands) {
  GraphBuilder b("bad");
  ValueId x = b.input("x", DType::F32, {3, 4});
  ValueId y = b.input("y", DType::F32, {5});
  ValueId z = b.add(x, y);
  EXPECT_EQ(z, kNoValue);
  b.output(b.relu(z));  // ignored after the first error
  Expected<Graph> g = b.build();
  ASSERT_FALSE(g);
  EXPECT_NE(g.status().message().find("add"), std::string::npos) << g.status().message();
  EXPECT_NE(g.status().message().find("f32[3,4], f32[5]"), std::string::npos) << g.status().message();
}

TEST(Builder, RejectsBadAttributes) {
  GraphBuilder b("bad");
  ValueId x = b.input("x", DType::F32, {3});
  b.op(Op::Gelu, {x}, {{"approximate", std::string("cubic")}});
  Expected<Graph> g = b.build();
  ASSERT_FALSE(g);
  EXPECT_NE(g.status().message().find("expected one of none, tanh"), std::string::npos)
      << g.status().message();

  GraphBuilder b2("bad2");
  ValueId x2 = b2.input("x", DType::F32, {3});
  b2.op(Op::Relu, {x2}, {{"alpha", 1.0}});
  ASSERT_FALSE(b2.build());
  EXPECT_NE(b2.status().message().find("unknown attribute 'alpha'"), std::string::npos);
}

Expected<std::vector<TensorType>> infer(Op op, std::vector<TensorType> in, Attrs attrs = {}) {
  Node n{op, {}, {}, std::move(attrs), nullptr, {}};
  return infer_result_types(n, in);
}

TensorType t(DType d, Shape s) { return TensorType{d, std::move(s)}; }

// At run time symbols are bound: a size over the limit is an error there too, not a wrap.
TEST(ShapeInference, BoundSizesOverTheLimitAreErrors) {
  Node n{Op::Expand, {}, {}, Attrs{{"shape", Shape{Dim::symbol("N"), 4}}}, nullptr, {}};
  std::vector<TensorType> in{t(DType::F32, make_shape({1}))};
  SymbolBindings ok{{"N", 8}}, over{{"N", int64_t(1) << 47}};
  ASSERT_TRUE(infer_result_types(n, in, &ok));
  Expected<std::vector<TensorType>> r = infer_result_types(n, in, &over);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(),
            "expand: attribute 'shape' [140737488355328,4] has more than 2^48 elements (the limit is 2^48 elements per dim and per tensor)");
}

TEST(ShapeInference, ReshapeResolvesMinusOneAndCancelsSymbols) {
  Shape in{Dim::symbol("N"), 64, 8};
  auto r = infer(Op::Reshape, {t(DType::F32, in)}, {{"shape", Shape{Dim::symbol("N"), Dim::dynamic()}}});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ((*r)[0].to_string(), "f32[N,512]");
  auto bad = infer(Op::Reshape, {t(DType::F32, make_shape({6}))}, {{"shape", make_shape({4})}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("cannot reshape"), std::string::npos);
}

TEST(ShapeInference, MatmulBroadcastsBatchAndPromotesVectors) {
  auto r = infer(Op::MatMul, {t(DType::F32, make_shape({2, 1, 3, 4})), t(DType::F32, make_shape({5, 4, 6}))});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ((*r)[0].to_string(), "f32[2,5,3,6]");
  r = infer(Op::MatMul, {t(DType::F32, make_shape({4})), t(DType::F32, make_shape({4, 6}))});
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)[0].to_string(), "f32[6]");
  EXPECT_FALSE(infer(Op::MatMul, {t(DType::F32, make_shape({3, 4})), t(DType::F32, make_shape({5, 6}))}));
}

// fused_swiglu: matmul's result with the last dim halved; what it cannot halve is an error.
TEST(ShapeInference, FusedSwigluHalvesTheMatmulResult) {
  auto r = infer(Op::FusedSwiglu, {t(DType::F32, {Dim::symbol("N"), 3, 4}), t(DType::F32, make_shape({4, 10})),
                                   t(DType::F32, make_shape({10}))});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ((*r)[0].to_string(), "f32[N,3,5]");
  auto message = [](const Expected<std::vector<TensorType>>& e) { return e ? std::string() : e.status().message(); };
  EXPECT_EQ(message(infer(Op::FusedSwiglu, {t(DType::F32, make_shape({3, 4})), t(DType::F32, make_shape({4, 7}))})),
            "fused_swiglu: the matmul result f32[3,7] must have a known, even last dim (its two halves)");
  EXPECT_EQ(message(infer(Op::FusedSwiglu, {t(DType::F32, make_shape({3, 4})), t(DType::F32, make_shape({4}))})),
            "fused_swiglu: w must be at least rank 2, got f32[4]");
  EXPECT_EQ(message(infer(Op::FusedSwiglu, {t(DType::F32, make_shape({3, 4})), t(DType::F32, make_shape({4, 8})),
                                            t(DType::F32, make_shape({4}))})),
            "fused_swiglu: bias f32[4] does not broadcast along the last axis of f32[3,8]");
  EXPECT_FALSE(infer(Op::FusedSwiglu, {t(DType::I32, make_shape({3, 4})), t(DType::I32, make_shape({4, 8}))}));
}

TEST(ShapeInference, ConvAndPoolOutputSizes) {
  auto r = infer(Op::Conv2d, {t(DType::F32, make_shape({1, 8, 32, 30})), t(DType::F32, make_shape({16, 4, 3, 3}))},
                 {{"stride", std::vector<int64_t>{2, 2}}, {"pad", std::vector<int64_t>{1, 1, 1, 1}},
                  {"groups", int64_t(2)}});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ((*r)[0].to_string(), "f32[1,16,16,15]");
  r = infer(Op::ConvTranspose2d, {t(DType::F32, make_shape({1, 8, 5, 5})), t(DType::F32, make_shape({8, 3, 3, 3}))},
            {{"stride", std::vector<int64_t>{2, 2}}, {"pad", std::vector<int64_t>{1, 1, 1, 1}},
             {"output_padding", std::vector<int64_t>{1, 1}}});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ((*r)[0].to_string(), "f32[1,3,10,10]");
  // ceil_mode: (5 - 2) / 2 rounded up + 1 = 3 windows.
  r = infer(Op::MaxPool2d, {t(DType::F32, make_shape({1, 1, 5, 5}))},
            {{"kernel", std::vector<int64_t>{2, 2}}, {"stride", std::vector<int64_t>{2, 2}}, {"ceil_mode", true}});
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)[0].to_string(), "f32[1,1,3,3]");
  auto bad = infer(Op::Conv2d, {t(DType::F32, make_shape({1, 3, 8, 8})), t(DType::F32, make_shape({4, 2, 3, 3}))});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("channels"), std::string::npos);
}

// The fused residual norms: x and r of one type, a bias that broadcasts into it without growing
// it, scale/shift over the normalised axes; one result, or two (normed, sum) when the node has two.
TEST(ShapeInference, FusedResidualNormsCheckTheirOperands) {
  const TensorType x = t(DType::F32, Shape{Dim::symbol("N"), 8});
  auto r = infer(Op::FusedResidualLayerNorm, {x, x, t(DType::F32, make_shape({8})), t(DType::F32, make_shape({8}))},
                 {{"has_bias", true}});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].to_string(), "f32[N,8]");
  Node two{Op::FusedResidualRmsNorm, {}, {0, 1}, {}, nullptr, {}};
  std::vector<TensorType> in{x, x};
  auto both = infer_result_types(two, in);
  ASSERT_TRUE(both) << both.status().to_string();
  EXPECT_EQ(both->size(), 2u);
  auto message = [](const Expected<std::vector<TensorType>>& e) { return e ? std::string() : e.status().message(); };
  // Defect 8 at the type level: a [8] operand is not a residual.
  EXPECT_EQ(message(infer(Op::FusedResidualLayerNorm, {x, t(DType::F32, make_shape({8}))})),
            "fused_residual_layer_norm: residual f32[8] differs from x f32[N,8]");
  EXPECT_EQ(message(infer(Op::FusedResidualRmsNorm, {x, x, t(DType::F32, make_shape({3, 1}))}, {{"has_bias", true}})),
            "fused_residual_rms_norm: bias f32[3,1] does not broadcast into f32[N,8]");
  EXPECT_EQ(message(infer(Op::FusedResidualRmsNorm, {x, x, t(DType::F32, make_shape({8})), t(DType::F32, make_shape({8}))})),
            "fused_residual_rms_norm: takes x, r[, scale], got 4 operands");
  EXPECT_EQ(message(infer(Op::FusedResidualLayerNorm, {x, x, t(DType::F32, make_shape({4}))})),
            "fused_residual_layer_norm: scale f32[4] does not broadcast to the normalised shape [8]");
}

TEST(ShapeInference, SliceFollowsOnnxClamping) {
  EXPECT_EQ(normalize_slice(10, 2, 100, 1).count, 8);
  EXPECT_EQ(normalize_slice(10, -3, INT64_MAX, 1).start, 7);
  EXPECT_EQ(normalize_slice(10, -1, INT64_MIN, -1).count, 10);
  EXPECT_EQ(normalize_slice(10, 8, 2, 1).count, 0);
  EXPECT_EQ(normalize_slice(10, 0, 10, 3).count, 4);
  auto r = infer(Op::Slice, {t(DType::F32, {Dim::symbol("N"), 10})},
                 {{"starts", std::vector<int64_t>{1}}, {"ends", std::vector<int64_t>{-1}}, {"axes", std::vector<int64_t>{1}}});
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)[0].to_string(), "f32[N,8]");
}

TEST(ShapeInference, BindingsMakeSymbolicAttributesConcrete) {
  SymbolBindings b{{"N", 4}};
  Node n{Op::Expand, {}, {}, {{"shape", Shape{Dim::symbol("N"), 3}}}, nullptr, {}};
  std::vector<TensorType> in{t(DType::F32, make_shape({1, 3}))};
  auto r = infer_result_types(n, in, &b);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)[0].to_string(), "f32[4,3]");
}

TEST(Verifier, RejectsUseBeforeDefinitionAndWrongDeclaredTypes) {
  Graph g("f");
  ValueId x = g.add_input("x", t(DType::F32, make_shape({4})));
  ValueId later = g.add_value(t(DType::F32, make_shape({4})));
  std::vector<ValueId> r = g.add_node(Op::Add, {x, later}, {t(DType::F32, make_shape({4}))});
  g.add_node(Node{Op::Relu, {x}, {later}, {}, nullptr, {}});
  g.add_output(r[0]);
  Status s = verify(g);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("used before it is defined"), std::string::npos) << s.message();

  Graph h("h");
  ValueId y = h.add_input("y", t(DType::F32, make_shape({4})));
  std::vector<ValueId> z = h.add_node(Op::Relu, {y}, {t(DType::F32, make_shape({5}))});
  h.add_output(z[0]);
  s = verify(h);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("declared f32[5] but the operands give f32[4]"), std::string::npos) << s.message();
}

TEST(Verifier, RequiresSymbolsBoundByInputs) {
  Graph g("f");
  ValueId x = g.add_input("x", t(DType::F32, make_shape({4})));
  std::vector<ValueId> r = g.add_node(Op::Reshape, {x}, {t(DType::F32, {Dim::symbol("M")})},
                                      {{"shape", Shape{Dim::symbol("M")}}});
  g.add_output(r[0]);
  Status s = verify(g);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("symbol 'M' is not bound"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace fusebox
