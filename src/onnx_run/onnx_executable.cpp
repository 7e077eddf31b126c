#include "onnx_run/onnx_executable.h"

#include <deque>

namespace fusebox {

struct OnnxExecutable::Plan {
  Executable exe;
  std::set<std::string> bound;  // graph input names whose values it was compiled with
  std::string values;           // "v = [2,3]", for messages
  std::vector<OnnxOutputLayout> outputs;
  std::set<std::string> layout_inputs;  // graph input names of its sequence and optional inputs
};

struct OnnxExecutable::State {
  std::string path;   // a file, or
  std::string bytes;  // the model itself (path empty), named `name`
  std::string name;
  CompileOptions options;
  std::mutex mu;
  std::set<std::string> value_inputs;      // ONNX names, grows as imports ask for values
  std::set<std::string> layout_inputs;     // ONNX names of sequence and optional inputs, the same way
  // key(values) -> compiled specialisation; the oldest goes first beyond kMaxPlans. Shared, so
  // that a run still holding an evicted plan finishes on it.
  std::map<std::string, std::shared_ptr<const Plan>> plans;
  std::deque<std::string> order;

  Expected<Graph> import(const OnnxInputValues& values, const OnnxInputLayouts& layouts,
                         OnnxImportReport* report) const {
    if (!path.empty()) return import_onnx_file(path, values, layouts, report);
    return import_onnx_bytes(bytes, name, values, layouts, report);
  }
};

namespace {

// Values that change on every run (a data tensor feeding a shape) would compile on every run: the
// cache keeps the most recent plans only.
constexpr size_t kMaxPlans = 64;
// An input read to fix shapes is a shape-like vector; reading a data tensor's values to compile
// would make every run a compile (the importer folds integer vectors up to this size too).
constexpr int64_t kMaxValueElements = int64_t(1) << 16;

// Identifies a set of given values: names, types and bytes.
std::string key_of(const OnnxInputValues& values) {
  std::string key;
  for (const auto& [name, a] : values) {
    key += name + ":" + a.type_string() + ":" + std::to_string(a.nbytes()) + ":";
    key.append(static_cast<const char*>(a.data<void>()), a.nbytes());
  }
  return key;
}

// Identifies a set of layouts: names, kinds and element types.
std::string key_of(const OnnxInputLayouts& layouts) {
  std::string key;
  for (const auto& [name, l] : layouts) {
    key += name + ":" + std::to_string(int(l.kind)) + "[";
    for (const TensorType& t : l.elements) key += t.to_string() + ",";
    key += "];";
  }
  return key;
}

// The layout of what a run gives for a sequence or optional input (a tensor: an optional holding
// one).
OnnxInputLayout layout_of(const OnnxValue& v) {
  OnnxInputLayout l;
  l.kind = v.kind() == OnnxValue::Kind::Tensor     ? OnnxValueKind::Tensor
           : v.kind() == OnnxValue::Kind::Sequence ? OnnxValueKind::Sequence
                                                   : OnnxValueKind::None;
  for (const Array& a : v.elements()) l.elements.push_back(TensorType{a.dtype(), make_shape(a.shape())});
  return l;
}

// "v = [2,3], s = sequence [f32[2],f32[3]], o = none", for messages.
std::string describe(const OnnxInputValues& values, const OnnxInputLayouts& layouts) {
  std::string s;
  for (const auto& [name, a] : values) {
    std::string elems;
    for (int64_t k = 0; k < a.numel() && k < 8; ++k) {
      elems += (k ? "," : "") + (is_float(a.dtype()) ? std::to_string(a.get_f64(k)) : std::to_string(a.get_i64(k)));
    }
    if (a.numel() > 8) elems += ",...";
    s += (s.empty() ? "" : ", ") + name + " = [" + elems + "]";
  }
  for (const auto& [name, l] : layouts) {
    std::string types;
    for (const TensorType& t : l.elements) types += (types.empty() ? "" : ",") + t.to_string();
    s += (s.empty() ? "" : ", ") + name + " = " +
         (l.kind == OnnxValueKind::None     ? "none"
          : l.kind == OnnxValueKind::Tensor ? types
                                            : "sequence [" + types + "]");
  }
  return s;
}

// Only shape-like vectors are read; `why` says what needed the value.
Status check_size(const std::string& name, const Array& a, const Status& why) {
  if (a.numel() <= kMaxValueElements) return Status::ok();
  return Status::unimplemented(why.message() + " (graph input '" + name + "' is " + a.type_string() + "; only inputs of up to " +
                               std::to_string(kMaxValueElements) + " elements are read to fix shapes)");
}

// The given values of `names`, taken from the run's inputs.
Expected<OnnxInputValues> values_of(const std::set<std::string>& names, const NamedArrays& inputs) {
  OnnxInputValues values;
  for (const std::string& name : names) {
    auto it = inputs.find(onnx_value_name(name));
    if (it == inputs.end()) {
      return Status::not_found("input '" + onnx_value_name(name) + "' is missing (its value fixes shapes in the model)");
    }
    FUSEBOX_RETURN_IF_ERROR(check_size(name, it->second, Status::invalid("its value fixes shapes in the model")));
    values[name] = it->second;
  }
  return values;
}

}  // namespace

Expected<OnnxExecutable> OnnxExecutable::compile(std::string path, CompileOptions options) {
  auto state = std::make_shared<State>();
  state->path = std::move(path);
  state->options = std::move(options);
  return start(std::move(state));
}

Expected<OnnxExecutable> OnnxExecutable::compile_bytes(std::string bytes, std::string name, CompileOptions options) {
  auto state = std::make_shared<State>();
  state->bytes = std::move(bytes);
  state->name = std::move(name);
  state->options = std::move(options);
  return start(std::move(state));
}

Expected<OnnxExecutable> OnnxExecutable::start(std::shared_ptr<State> state) {
  OnnxExecutable exe;
  exe.state_ = std::move(state);
  OnnxImportReport report;
  Expected<Graph> g = exe.state_->import({}, {}, &report);
  if (!g) {
    if (report.needs_value.empty()) return g.status();
    return exe;  // compiled per value in run(), which finds the inputs to read again
  }
  FUSEBOX_ASSIGN_OR_RETURN(Executable plain, Session().compile(*g, exe.state_->options));
  exe.state_->plans.emplace(
      key_of(OnnxInputValues{}) + key_of(OnnxInputLayouts{}),
      std::make_shared<const Plan>(Plan{std::move(plain), {}, {}, std::move(report.outputs)}));
  return exe;
}

namespace {

// The layouts of `names` from the run's values (a tensor given for an optional input: present).
Expected<OnnxInputLayouts> layouts_of(const std::set<std::string>& names, const NamedArrays& inputs,
                                      const NamedOnnxValues& structured) {
  OnnxInputLayouts layouts;
  for (const std::string& name : names) {
    const std::string graph_name = onnx_value_name(name);
    if (auto s = structured.find(graph_name); s != structured.end()) {
      layouts[name] = layout_of(s->second);
    } else if (auto t = inputs.find(graph_name); t != inputs.end()) {
      layouts[name] = layout_of(OnnxValue(t->second));
    } else {
      return Status::not_found("input '" + graph_name + "' (a sequence or an optional) is missing");
    }
  }
  return layouts;
}

}  // namespace

Expected<std::shared_ptr<const OnnxExecutable::Plan>> OnnxExecutable::specialise(
    const NamedArrays& inputs, const NamedOnnxValues& structured) const {
  State& st = *state_;
  std::lock_guard<std::mutex> lock(st.mu);
  FUSEBOX_ASSIGN_OR_RETURN(OnnxInputValues values, values_of(st.value_inputs, inputs));
  FUSEBOX_ASSIGN_OR_RETURN(OnnxInputLayouts layouts, layouts_of(st.layout_inputs, inputs, structured));
  auto hit = st.plans.find(key_of(values) + key_of(layouts));
  if (hit != st.plans.end()) return hit->second;
  // Import with the values known so far; each refusal that names another given input adds it.
  for (;;) {
    OnnxImportReport report;
    Expected<Graph> g = st.import(values, layouts, &report);
    const std::string& needs = report.needs_value;
    if (g) {
      std::string key = key_of(values) + key_of(layouts);
      if (auto again = st.plans.find(key); again != st.plans.end()) return again->second;
      FUSEBOX_ASSIGN_OR_RETURN(Executable exe, Session().compile(*g, st.options));
      auto plan = std::make_shared<Plan>(
          Plan{std::move(exe), {}, describe(values, layouts), std::move(report.outputs)});
      for (const auto& entry : values) plan->bound.insert(onnx_value_name(entry.first));
      for (const auto& entry : layouts) plan->layout_inputs.insert(onnx_value_name(entry.first));
      st.plans.emplace(key, plan);
      st.order.push_back(key);
      if (st.order.size() > kMaxPlans) {
        st.plans.erase(st.order.front());
        st.order.pop_front();
      }
      return std::shared_ptr<const Plan>(plan);
    }
    if (needs.empty() || values.count(needs) || layouts.count(needs)) {
      if (values.empty() && layouts.empty()) return g.status();
      return g.status().with_context("with " + describe(values, layouts));
    }
    if (report.needs_layout) {
      FUSEBOX_ASSIGN_OR_RETURN(OnnxInputLayouts one, layouts_of({needs}, inputs, structured));
      layouts[needs] = one[needs];
      st.layout_inputs.insert(needs);
      continue;
    }
    if (structured.count(onnx_value_name(needs))) {
      return Status::invalid("input '" + onnx_value_name(needs) +
                             "' is a tensor input; a sequence or none was given (" + g.status().message() +
                             ")");
    }
    if (!inputs.count(onnx_value_name(needs))) {
      return Status::not_found("input '" + onnx_value_name(needs) + "' is missing (its value fixes shapes in the model: " +
                               g.status().message() + ")");
    }
    const Array& given = inputs.find(onnx_value_name(needs))->second;
    FUSEBOX_RETURN_IF_ERROR(check_size(needs, given, g.status()));
    values[needs] = given;
    st.value_inputs.insert(needs);
  }
}

Expected<std::vector<Array>> OnnxExecutable::run_plan(const Plan& plan, const NamedArrays& inputs) const {
  Expected<std::vector<Array>> out = plan.exe.run(inputs);
  // A size that does not fit is found only now when it involves a run-time dim.
  if (!out && !plan.values.empty()) return out.status().with_context("with " + plan.values);
  return out;
}

// The graph's inputs: the run's tensors without those the plan was compiled with, and the
// elements of its sequence and optional inputs.
NamedArrays OnnxExecutable::plan_inputs(const Plan& plan, const NamedArrays& inputs,
                                        const NamedOnnxValues& structured) {
  NamedArrays rest;
  for (const auto& [name, a] : inputs) {
    if (!plan.bound.count(name) && !plan.layout_inputs.count(name)) rest.emplace(name, a);
  }
  for (const std::string& name : plan.layout_inputs) {
    auto s = structured.find(name);
    auto t = inputs.find(name);
    if (s != structured.end()) {
      for (size_t k = 0; k < s->second.elements().size(); ++k)
        rest[onnx_element_name(name, k)] = s->second.elements()[k];
    } else if (t != inputs.end()) {
      rest[onnx_element_name(name, 0)] = t->second;
    }
  }
  return rest;
}

Expected<std::vector<Array>> OnnxExecutable::run(const NamedArrays& inputs) const {
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, specialise(inputs, {}));
  return run_plan(*plan, plan_inputs(*plan, inputs, {}));
}

Expected<std::vector<OnnxValue>> OnnxExecutable::run_values(const NamedOnnxValues& inputs) const {
  NamedArrays tensors;
  NamedOnnxValues structured;
  for (const auto& [name, v] : inputs) {
    if (v.kind() == OnnxValue::Kind::Tensor)
      tensors.emplace(name, v.tensor());
    else
      structured.emplace(name, v);
  }
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, specialise(tensors, structured));
  for (const auto& entry : structured) {
    if (!plan->layout_inputs.count(entry.first)) {
      return Status::invalid(
          "input '" + entry.first + "' is not a sequence or optional input of the model; a " +
          (entry.second.kind() == OnnxValue::Kind::None ? "none" : "sequence") + " was given");
    }
  }
  FUSEBOX_ASSIGN_OR_RETURN(std::vector<Array> flat, run_plan(*plan, plan_inputs(*plan, tensors, structured)));
  std::vector<OnnxValue> out;
  size_t next = 0;
  for (const OnnxOutputLayout& l : plan->outputs) {
    if (next + l.count > flat.size())
      return Status::internal("the plan returned fewer outputs than its layout says");
    std::vector<Array> part(flat.begin() + long(next), flat.begin() + long(next + l.count));
    next += l.count;
    if (l.kind == OnnxValueKind::Tensor)
      out.emplace_back(std::move(part[0]));
    else if (l.kind == OnnxValueKind::Sequence)
      out.push_back(OnnxValue::sequence(std::move(part)));
    else
      out.push_back(OnnxValue::none());
  }
  return out;
}

std::set<std::string> OnnxExecutable::value_inputs() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->value_inputs;
}

std::set<std::string> OnnxExecutable::layout_inputs() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->layout_inputs;
}

size_t OnnxExecutable::specializations() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->plans.size();
}

}  // namespace fusebox
