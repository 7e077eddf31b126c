#include "support/test_util.h"

#include "runtime/file_io.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "backends/cpu/reference/reference.h"
#include "backends/host_backend.h"
#include "backends/registry/registry.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/shape_inference.h"

namespace fusebox::testing {

Array random_array(DType dtype, std::vector<int64_t> shape, uint64_t seed, double lo, double hi) {
  Array a(dtype, std::move(shape));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (dtype == DType::Bool) {
      a.set_i64(i, rng() & 1);
    } else if (is_float(dtype)) {
      a.set_f64(i, dist(rng));
    } else {
      a.set_i64(i, static_cast<int64_t>(dist(rng)));
    }
  }
  return a;
}

Array array_f32(std::vector<int64_t> shape, std::vector<float> values) {
  Array a(DType::F32, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(values.size()), a.numel());
  for (size_t i = 0; i < values.size() && static_cast<int64_t>(i) < a.numel(); ++i) a.data<float>()[i] = values[i];
  return a;
}

Array array_of(DType dtype, std::vector<int64_t> shape, std::vector<double> values) {
  Array a(dtype, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(values.size()), a.numel());
  for (size_t i = 0; i < values.size() && static_cast<int64_t>(i) < a.numel(); ++i) a.set_f64(static_cast<int64_t>(i), values[i]);
  return a;
}

Array array_of_ints(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> values) {
  Array a(dtype, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(values.size()), a.numel());
  for (size_t i = 0; i < values.size() && static_cast<int64_t>(i) < a.numel(); ++i) a.set_i64(static_cast<int64_t>(i), values[i]);
  return a;
}

Expected<std::vector<Array>> try_run_op(Op op, const std::vector<Array>& inputs, Attrs attrs) {
  CompileOptions options;  // the oracle: no fusion, every node on its reference kernel
  options.fuse = false;
  options.backend = "reference";
  return try_run_op_with(op, inputs, std::move(attrs), options);
}

Expected<std::vector<Array>> try_run_op_with(Op op, const std::vector<Array>& inputs, Attrs attrs,
                                             const CompileOptions& options) {
  GraphBuilder b("op");
  std::vector<ValueId> ins;
  NamedArrays named;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string name = "in" + std::to_string(i);
    ins.push_back(b.input(name, inputs[i].dtype(), make_shape(inputs[i].shape())));
    named[name] = inputs[i];
  }
  for (ValueId v : b.op_results(op, ins, std::move(attrs))) b.output(v);
  FUSEBOX_ASSIGN_OR_RETURN(Graph g, b.build());
  Session session;
  FUSEBOX_ASSIGN_OR_RETURN(Executable exe, session.compile(g, options));
  return exe.run(named);
}

std::vector<Array> run_op(Op op, const std::vector<Array>& inputs, Attrs attrs) {
  Expected<std::vector<Array>> r = try_run_op(op, inputs, std::move(attrs));
  EXPECT_TRUE(r.has_value()) << op_keyword(op) << ": " << r.status().to_string();
  if (!r) return {};
  return std::move(*r);
}

Array run_op1(Op op, const std::vector<Array>& inputs, Attrs attrs) {
  std::vector<Array> r = run_op(op, inputs, std::move(attrs));
  return r.empty() ? Array() : r[0];
}

std::vector<Array> run_reference_poisoned(Op op, const std::vector<Array>& inputs, Attrs attrs) {
  std::vector<Array> via_session = run_op(op, inputs, attrs);
  Node node{op, {}, {}, std::move(attrs), nullptr, {}};
  std::vector<TensorType> types;
  for (const Array& a : inputs) types.push_back(TensorType{a.dtype(), make_shape(a.shape())});
  Expected<std::vector<TensorType>> result_types = infer_result_types(node, types);
  EXPECT_TRUE(result_types) << op_keyword(op) << ": " << result_types.status().to_string();
  if (!result_types) return via_session;
  EXPECT_EQ(via_session.size(), result_types->size()) << op_keyword(op) << ": number of results";
  if (via_session.size() != result_types->size()) return via_session;
  for (uint8_t poison : kPoisonBytes) {
    std::vector<Array> outs;
    for (const TensorType& t : *result_types) {
      outs.emplace_back(t.dtype, static_dims(t.shape));
      outs.back().fill_bytes(poison);
    }
    Status s = cpu::run_reference(node, inputs, outs);
    EXPECT_TRUE(s.is_ok()) << op_keyword(op) << ": " << s.to_string();
    if (!s.is_ok()) continue;
    for (size_t i = 0; i < outs.size(); ++i) {
      EXPECT_TRUE(outs[i].same_data(via_session[i]))
          << op_keyword(op) << ": result " << i << " differs with poison " << int(poison);
    }
  }
  return via_session;
}

std::string read_test_file(const std::string& relative) {
  std::filesystem::path tests = FUSEBOX_TESTS_DIR;
  Expected<std::string> text = read_file((tests / relative).string());
  return text ? *text : std::string();
}

::testing::AssertionResult close_to_scale(const Array& actual, const Array& expected, double rel) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure() << actual.type_string() << " vs " << expected.type_string();
  }
  std::vector<double> a = to_doubles(actual), b = to_doubles(expected);
  double scale = 1;
  for (double v : b) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(std::fabs(a[i] - b[i]) <= rel * scale)) {
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i] << " (scale " << scale << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

size_t count_op(const Graph& g, Op op) {
  size_t n = 0;
  for (const Node& node : g.nodes()) n += node.op == op;
  return n;
}

std::vector<double> to_doubles(const Array& a) {
  std::vector<double> v(static_cast<size_t>(a.numel()));
  for (int64_t i = 0; i < a.numel(); ++i) v[static_cast<size_t>(i)] = a.get_f64(i);
  return v;
}

std::vector<int64_t> to_ints(const Array& a) {
  std::vector<int64_t> v(static_cast<size_t>(a.numel()));
  for (int64_t i = 0; i < a.numel(); ++i) v[static_cast<size_t>(i)] = a.get_i64(i);
  return v;
}

::testing::AssertionResult arrays_close(const Array& actual, const Array& expected, double rtol,
                                        double atol) {
  if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure() << "type " << actual.type_string() << " vs expected "
                                         << expected.type_string();
  }
  for (int64_t i = 0; i < actual.numel(); ++i) {
    double a = actual.get_f64(i), e = expected.get_f64(i);
    if (std::isnan(a) && std::isnan(e)) continue;
    if (std::isinf(e) && a == e) continue;
    if (!(std::fabs(a - e) <= atol + rtol * std::fabs(e))) {
      return ::testing::AssertionFailure() << "element " << i << ": " << a << " vs expected " << e
                                           << " (rtol " << rtol << ", atol " << atol << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

Graph expect_frame_program_matches_reference(const Graph& g, std::optional<FusionOptions> options,
                                             const std::vector<int64_t>& frame, std::initializer_list<uint64_t> seeds) {
  Session session;
  CompileOptions ref_opts;
  ref_opts.fuse = false;
  use_backend(ref_opts, kReference);
  CompileOptions fused_opts;
  fused_opts.fusion = std::move(options);
  fused_opts.verify_each_pass = true;
  Expected<Executable> ref = session.compile(g, ref_opts);
  Expected<Executable> fused = session.compile(g, fused_opts);
  EXPECT_TRUE(ref && fused) << (fused ? ref.status() : fused.status()).to_string();
  if (!ref || !fused) return Graph();
  for (uint64_t seed : seeds) {
    NamedArrays in{{"frame", random_array(DType::U8, frame, seed, 0, 256)}};
    Expected<std::vector<Array>> want = ref->run(in);
    Expected<std::vector<Array>> got = fused->run(in);
    EXPECT_TRUE(want && got) << got.status().to_string();
    if (!want || !got) break;
    EXPECT_TRUE(arrays_close((*got)[0], (*want)[0], 1e-6, 1e-6)) << print_graph(fused->graph());
  }
  return fused->graph();
}

Expected<OracleAndPlan> compile_against_reference(const Graph& g, const CompileOptions& options) {
  Session session;
  CompileOptions oracle;
  oracle.fuse = false;
  oracle.backend = "reference";
  FUSEBOX_ASSIGN_OR_RETURN(Executable reference, session.compile(g, oracle));
  FUSEBOX_ASSIGN_OR_RETURN(Executable plan, session.compile(g, options));
  return OracleAndPlan{std::move(reference), std::move(plan)};
}

std::string dims_text(std::initializer_list<int64_t> dims) {
  std::string s;
  for (int64_t v : dims) s += (s.empty() ? "" : ",") + std::to_string(v);
  return s;
}

Graph one_node(Op op, const std::vector<Array>& in, const Attrs& attrs, const TensorType& result) {
  Graph g("one");
  std::vector<ValueId> ids;
  for (size_t i = 0; i < in.size(); ++i) {
    ids.push_back(g.add_input("in" + std::to_string(i), TensorType{in[i].dtype(), make_shape(in[i].shape())}));
  }
  g.add_output(g.add_node(op, ids, {result}, attrs)[0]);
  return g;
}

Graph one_node(Op op, const std::vector<TensorType>& types, const Attrs& attrs) {
  Graph g("one");
  std::vector<ValueId> ids;
  for (size_t i = 0; i < types.size(); ++i) ids.push_back(g.add_input("in" + std::to_string(i), types[i]));
  Node n{op, ids, {}, attrs, nullptr, {}};
  Expected<std::vector<TensorType>> results = infer_result_types(n, types);
  EXPECT_TRUE(results) << results.status().to_string();
  if (!results) return g;
  g.add_output(g.add_node(op, ids, *results, attrs)[0]);
  return g;
}

Expected<Array> run_host_kernel(const Kernel& kernel, const Array& in, const TensorType& result,
                                uint8_t poison) {
  Array out(result.dtype, static_dims(result.shape));
  out.fill_bytes(poison);
  const BufferView in_view = host_view(in), out_view = host_view(out);
  InlineStream stream(kHostDevice);
  FUSEBOX_RETURN_IF_ERROR(kernel.run(stream, std::span<const BufferView>(&in_view, 1),
                                     std::span<const BufferView>(&out_view, 1)));
  return out;
}

Expected<Array> run_one_kernel(const std::string& backend, Op op, const std::vector<Array>& in, const Attrs& attrs,
                               const Array& like, uint8_t poison) {
  const Graph g = one_node(op, in, attrs, TensorType{like.dtype(), make_shape(like.shape())});
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<Backend> device, make_backend(backend));
  const Node& n = g.nodes()[0];
  if (Claim c = device->claims(g, n); !c) return Status::unimplemented("refused: " + c.reason);
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const Kernel> kernel, device->compile(g, n));
  std::vector<Buffer> buffers;
  std::vector<BufferView> views;
  for (const Array& a : in) {
    FUSEBOX_ASSIGN_OR_RETURN(Buffer b, device->allocate(a.dtype(), a.shape()));
    FUSEBOX_RETURN_IF_ERROR(device->copy_from_host(device->stream(), host_view(a), b.view()));
    views.push_back(b.view());
    buffers.push_back(std::move(b));
  }
  Array result(like.dtype(), like.shape());
  result.fill_bytes(poison);
  FUSEBOX_ASSIGN_OR_RETURN(Buffer out, device->allocate(result.dtype(), result.shape()));
  FUSEBOX_RETURN_IF_ERROR(device->copy_from_host(device->stream(), host_view(result), out.view()));
  const BufferView out_view = out.view();
  FUSEBOX_RETURN_IF_ERROR(kernel->run(device->stream(), views, std::span<const BufferView>(&out_view, 1)));
  FUSEBOX_RETURN_IF_ERROR(device->copy_to_host(device->stream(), out_view, host_view(result)));
  FUSEBOX_RETURN_IF_ERROR(device->stream().sync());
  return result;
}

const Node* find_node(const Graph& g, Op op) {
  for (const Node& n : g.nodes()) {
    if (n.op == op) return &n;
  }
  return nullptr;
}

std::string backend_of(const Executable& exe, Op op) {
  const Graph& g = exe.graph();
  const Placement& p = exe.placement();
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (g.nodes()[i].op == op) return std::string(p.backends[size_t(p.node_backend[i])]->name());
  }
  return "absent";
}

Graph parse_or_fail(const std::string& text) {
  Expected<Graph> g = parse_graph(text);
  EXPECT_TRUE(g) << g.status().message() << "\n" << text;
  return g ? std::move(*g) : Graph("empty");
}

}  // namespace fusebox::testing
