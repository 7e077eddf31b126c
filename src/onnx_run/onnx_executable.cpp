#include "onnx_run/onnx_executable.h"

#include <deque>

namespace fusebox {

struct OnnxExecutable::Plan {
  Executable exe;
  std::set<std::string> bound;  // graph input names whose values it was compiled with
  std::string values;           // "v = [2,3]", for messages
};

struct OnnxExecutable::State {
  std::string path;   // a file, or
  std::string bytes;  // the model itself (path empty), named `name`
  std::string name;
  CompileOptions options;
  std::mutex mu;
  std::set<std::string> value_inputs;      // ONNX names, grows as imports ask for values
  // key(values) -> compiled specialisation; the oldest goes first beyond kMaxPlans. Shared, so
  // that a run still holding an evicted plan finishes on it.
  std::map<std::string, std::shared_ptr<const Plan>> plans;
  std::deque<std::string> order;

  Expected<Graph> import(const OnnxInputValues& values, std::string* needs) const {
    if (!path.empty()) return import_onnx_file(path, values, needs);
    return import_onnx_bytes(bytes, name, values, needs);
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

std::string describe(const OnnxInputValues& values) {
  std::string s;
  for (const auto& [name, a] : values) {
    std::string elems;
    for (int64_t k = 0; k < a.numel() && k < 8; ++k) {
      elems += (k ? "," : "") + (is_float(a.dtype()) ? std::to_string(a.get_f64(k)) : std::to_string(a.get_i64(k)));
    }
    if (a.numel() > 8) elems += ",...";
    s += (s.empty() ? "" : ", ") + name + " = [" + elems + "]";
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
  std::string needs;
  Expected<Graph> g = exe.state_->import({}, &needs);
  if (!g) {
    if (needs.empty()) return g.status();
    return exe;  // compiled per value in run(), which finds the inputs to read again
  }
  FUSEBOX_ASSIGN_OR_RETURN(Executable plain, Session().compile(*g, exe.state_->options));
  exe.state_->plans.emplace(key_of({}), std::make_shared<const Plan>(Plan{std::move(plain), {}, {}}));
  return exe;
}

Expected<std::shared_ptr<const OnnxExecutable::Plan>> OnnxExecutable::specialise(const NamedArrays& inputs) const {
  State& st = *state_;
  std::lock_guard<std::mutex> lock(st.mu);
  FUSEBOX_ASSIGN_OR_RETURN(OnnxInputValues values, values_of(st.value_inputs, inputs));
  auto hit = st.plans.find(key_of(values));
  if (hit != st.plans.end()) return hit->second;
  // Import with the values known so far; each refusal that names another given input adds it.
  for (;;) {
    std::string needs;
    Expected<Graph> g = st.import(values, &needs);
    if (g) {
      std::string key = key_of(values);
      if (auto again = st.plans.find(key); again != st.plans.end()) return again->second;
      FUSEBOX_ASSIGN_OR_RETURN(Executable exe, Session().compile(*g, st.options));
      auto plan = std::make_shared<Plan>(Plan{std::move(exe), {}, describe(values)});
      for (const auto& entry : values) plan->bound.insert(onnx_value_name(entry.first));
      st.plans.emplace(key, plan);
      st.order.push_back(key);
      if (st.order.size() > kMaxPlans) {
        st.plans.erase(st.order.front());
        st.order.pop_front();
      }
      return std::shared_ptr<const Plan>(plan);
    }
    if (needs.empty() || values.count(needs)) {
      if (values.empty()) return g.status();
      return g.status().with_context("with " + describe(values));
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

Expected<std::vector<Array>> OnnxExecutable::run(const NamedArrays& inputs) const {
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, specialise(inputs));
  // The specialisation has no input for a value it was compiled with.
  NamedArrays rest;
  for (const auto& [name, a] : inputs) {
    if (!plan->bound.count(name)) rest.emplace(name, a);
  }
  Expected<std::vector<Array>> out = plan->exe.run(rest);
  // A size that does not fit is found only now when it involves a run-time dim.
  if (!out && !plan->values.empty()) return out.status().with_context("with " + plan->values);
  return out;
}

std::set<std::string> OnnxExecutable::value_inputs() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->value_inputs;
}

size_t OnnxExecutable::specializations() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->plans.size();
}

}  // namespace fusebox
