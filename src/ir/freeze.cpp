#include "ir/freeze.h"

#include <memory>
#include <set>
#include <vector>

namespace fusebox {

Expected<Graph> freeze_inputs(const Graph& g, const std::map<std::string, Array, std::less<>>& values) {
  std::set<std::string, std::less<>> unused;
  for (const auto& [name, _] : values) unused.insert(name);
  Graph out(g.name());
  std::vector<ValueId> map(g.num_values(), kNoValue);
  for (ValueId v : g.inputs()) {
    const std::string& name = g.value(v).name;
    const TensorType& type = g.type(v);
    auto it = values.find(name);
    if (it == values.end()) {
      map[size_t(v)] = out.add_input(name, type);
      continue;
    }
    unused.erase(name);
    const Array& a = it->second;
    if (!is_static(type.shape)) {
      return Status::invalid("freeze: input %" + name + " has symbolic dims (" + type.to_string() + ")");
    }
    const TensorType given{a.dtype(), make_shape(a.shape())};
    if (given.dtype != type.dtype || given.shape != type.shape) {
      return Status::invalid("freeze: input %" + name + " is " + type.to_string() + ", the value is " + given.to_string());
    }
    map[size_t(v)] = out.add_node(Op::Constant, {}, {type}, Attrs{{"value", std::make_shared<const Array>(a)}})[0];
    out.value(map[size_t(v)]).name = name;
  }
  if (!unused.empty()) return Status::invalid("freeze: @" + g.name() + " has no input %" + *unused.begin());
  for (const Node& n : g.nodes()) {
    Node copy = n;
    for (ValueId& v : copy.inputs) v = map[size_t(v)];
    for (ValueId& o : copy.outputs) {
      ValueId mapped = out.add_value(g.type(o), g.value(o).name);
      map[size_t(o)] = mapped;
      o = mapped;
    }
    out.add_node(std::move(copy));
  }
  for (ValueId v : g.outputs()) out.add_output(map[size_t(v)]);
  out.set_optional_outputs(g.optional_outputs());
  out.set_unmaterialized_outputs(g.unmaterialized_outputs());
  return out;
}

}  // namespace fusebox
