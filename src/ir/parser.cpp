// The .fbir parser: recursive descent over a Lexer, one function at a time. Syntax errors stop
// at the first problem with "<file>:<line>:<col>: message"; each parsed function is then run
// through the verifier, whose message is moved to the location of the node it names.
//
// The grammar is in docs/ir-syntax.md. Attribute values are read by attr_text.h, the same code
// the op table uses for schema defaults, so the two can never disagree.
#include "ir/parser.h"

#include <algorithm>
#include <map>

#include "ir/attr_text.h"
#include "ir/lexer.h"
#include "ir/size.h"
#include "ir/verifier.h"

namespace fusebox {

namespace {

// Regions may hold regions only this deep: the parser recurses per level, and no real program
// nests (the verifier rejects any nesting today).
constexpr int kMaxRegionDepth = 4;

// What a name stands for in one function or region body: one value, or all results of a node.
struct Definition {
  std::vector<ValueId> values;
  bool multi = false;
  SourceLoc loc;
};

struct Scope {
  Graph* graph;
  bool is_region_body;
  std::map<std::string, Definition, std::less<>> defs;
};

std::string loc_text(SourceLoc loc) {
  return std::to_string(loc.line) + ":" + std::to_string(loc.column);
}

// Messages must stay on one line and be printable whatever bytes the input held.
std::string sanitize(std::string_view s) {
  std::string out;
  for (char c : s) out += printable_char(c);
  return out;
}

class Parser {
 public:
  Parser(std::string_view text, std::string_view filename, int first_line)
      : clean_(blank_comments(text)), lex_(clean_, first_line), filename_(filename) {}

  Expected<Module> parse_module();

 private:
  Status error_at(size_t offset, const std::string& message) const {
    return error_at(lex_.loc(offset), message);
  }
  Status error_at(SourceLoc loc, const std::string& message) const {
    return Status::invalid(filename_ + ":" + loc_text(loc) + ": " + sanitize(message));
  }
  // "expected X, found Y" at the next token.
  Status expected(const std::string& what) {
    size_t at = lex_.skip_blanks();
    return error_at(at, "expected " + what + ", found " + lex_.describe_next());
  }

  Status parse_function(Module& m, std::map<std::string, SourceLoc, std::less<>>& seen);
  Status parse_params(Scope& scope);
  Status parse_type(TensorType* type, bool allow_dynamic, const std::string& owner);
  Status parse_return_types(std::vector<TensorType>* types);
  Status parse_block(Scope& scope, int depth, std::vector<size_t>* return_offsets);
  Status parse_node(Scope& scope, int depth);
  Status parse_use(Scope& scope, ValueId* value);
  Status parse_attrs(Node& node);
  Status parse_output_slots(Graph& g);
  Status check_new_name(const Scope& scope, std::string_view name, size_t offset);
  Status verify_function(const Graph& g, SourceLoc func_loc) const;

  std::string clean_;
  Lexer lex_;
  std::string filename_;
};

Expected<Module> Parser::parse_module() {
  Module m;
  std::map<std::string, SourceLoc, std::less<>> seen;
  while (!lex_.at_end()) {
    if (!lex_.consume_word("func")) return expected("'func'");
    FUSEBOX_RETURN_IF_ERROR(parse_function(m, seen));
  }
  if (m.functions.empty()) return error_at(lex_.pos(), "empty file: expected at least one 'func'");
  return m;
}

Status Parser::parse_function(Module& m, std::map<std::string, SourceLoc, std::less<>>& seen) {
  SourceLoc func_loc = lex_.loc(lex_.pos() - 4);
  lex_.skip_blanks();
  if (!lex_.consume('@')) return expected("'@' and the function name");
  size_t name_at = lex_.pos();
  std::string name(lex_.name());
  if (name.empty()) return expected("a function name after '@'");
  if (auto it = seen.find(name); it != seen.end()) {
    return error_at(name_at - 1, "function @" + name + " is defined twice (first at " +
                                     loc_text(it->second) + ")");
  }
  seen.emplace(name, func_loc);

  Graph g(name);
  Scope scope{&g, false, {}};
  FUSEBOX_RETURN_IF_ERROR(parse_params(scope));
  if (!lex_.consume("->")) return expected("'->' and the result types");
  std::vector<TensorType> declared;
  FUSEBOX_RETURN_IF_ERROR(parse_return_types(&declared));
  if (!lex_.consume('{')) return expected("'{' opening the function body");
  std::vector<size_t> return_offsets;
  FUSEBOX_RETURN_IF_ERROR(parse_block(scope, 0, &return_offsets));
  FUSEBOX_RETURN_IF_ERROR(verify_function(g, func_loc));

  if (declared.size() != g.outputs().size()) {
    return error_at(return_offsets.front(),
                    "@" + name + " returns " + std::to_string(g.outputs().size()) +
                        " values but its signature declares " + std::to_string(declared.size()));
  }
  for (size_t i = 0; i < declared.size(); ++i) {
    const TensorType& actual = g.type(g.outputs()[i]);
    if (!(actual == declared[i])) {
      return error_at(return_offsets[i + 1], "return value " + std::to_string(i) + " is " +
                                                 actual.to_string() + " but the signature declares " +
                                                 declared[i].to_string());
    }
  }
  m.functions.push_back(std::move(g));
  return Status::ok();
}

// '(' [ '%' name ':' type { ',' ... } ] ')'
Status Parser::parse_params(Scope& scope) {
  if (!lex_.consume('(')) return expected("'(' and the parameters");
  if (lex_.consume(')')) return Status::ok();
  while (true) {
    size_t at = lex_.skip_blanks();
    if (!lex_.consume('%')) return expected("a parameter ('%name: type')");
    std::string name(lex_.name());
    if (name.empty()) return expected("a parameter name after '%'");
    FUSEBOX_RETURN_IF_ERROR(check_new_name(scope, name, at));
    if (!lex_.consume(':')) return expected("':' and the type of %" + name);
    TensorType type;
    FUSEBOX_RETURN_IF_ERROR(parse_type(&type, scope.is_region_body, "parameter %" + name));
    ValueId v = scope.graph->add_input(name, std::move(type));
    scope.defs[name] = Definition{{v}, false, lex_.loc(at)};
    if (lex_.consume(')')) return Status::ok();
    if (!lex_.consume(',')) return expected("',' or ')' in the parameter list");
  }
}

// dtype '[' [ dim { ',' dim } ] ']' with dim = number | symbol | '?'
Status Parser::parse_type(TensorType* type, bool allow_dynamic, const std::string& owner) {
  size_t at = lex_.skip_blanks();
  std::string_view dtype_name = lex_.identifier();
  if (dtype_name.empty()) return expected("a type such as f32[N,4]");
  std::optional<DType> dtype = parse_dtype(dtype_name);
  if (!dtype) {
    return error_at(at, "unknown dtype '" + std::string(dtype_name) +
                            "' (expected one of f32, f16, bf16, f64, i8, u8, i32, i64, bool)");
  }
  type->dtype = *dtype;
  type->shape.clear();
  if (!lex_.consume('[')) return expected("'[' after the dtype");
  if (lex_.consume(']')) return Status::ok();
  while (true) {
    size_t dim_at = lex_.skip_blanks();
    int64_t value = 0;
    bool overflow = false;
    if (lex_.consume('?')) {
      if (!allow_dynamic) {
        return error_at(dim_at, owner + " has an unnamed dim '?'; name it with a symbol such as N");
      }
      type->shape.push_back(Dim::dynamic());
    } else if (std::string_view sym = lex_.identifier(); !sym.empty()) {
      type->shape.push_back(Dim::symbol(std::string(sym)));
    } else if (lex_.integer(&value, &overflow)) {
      if (overflow || value > kMaxSize) {
        return error_at(dim_at, "dim " + std::string(clean_.substr(dim_at, lex_.pos() - dim_at)) +
                                    " is too large (the limit is 2^48)");
      }
      type->shape.push_back(Dim(value));
    } else {
      return expected("a dim (a number, a symbol or '?')");
    }
    if (lex_.consume(']')) return Status::ok();
    if (!lex_.consume(',')) return expected("',' or ']' in the type");
  }
}

// type | '(' type { ',' type } ')'
Status Parser::parse_return_types(std::vector<TensorType>* types) {
  bool parens = lex_.consume('(');
  while (true) {
    TensorType t;
    FUSEBOX_RETURN_IF_ERROR(parse_type(&t, true, "the result"));
    types->push_back(std::move(t));
    if (!parens) return Status::ok();
    if (lex_.consume(')')) return Status::ok();
    if (!lex_.consume(',')) return expected("',' or ')' in the result types");
  }
}

// The output slot lists after the return values (spec §4.6):
//   '{' ('optional' | 'unmaterialized') '=' '[' slot { ',' slot } ']' [',' ...] '}'
// Slots are output positions; an unmaterialised slot must also be optional.
Status Parser::parse_output_slots(Graph& g) {
  lex_.consume('{');
  std::vector<int64_t> optional, unmaterialized;
  bool have_optional = false, have_unmaterialized = false;
  while (true) {
    size_t at = lex_.skip_blanks();
    std::string key(lex_.identifier());
    bool is_optional = key == "optional";
    if (!is_optional && key != "unmaterialized") {
      return error_at(at, "unknown output list '" + key + "' after return (known: optional, unmaterialized)");
    }
    bool& seen = is_optional ? have_optional : have_unmaterialized;
    if (seen) return error_at(at, "'" + key + "' is given twice");
    seen = true;
    if (!lex_.consume('=')) return expected("'=' after '" + key + "'");
    if (!lex_.consume('[')) return expected("'[' and the output positions of '" + key + "'");
    std::vector<int64_t>& slots = is_optional ? optional : unmaterialized;
    while (!lex_.consume(']')) {
      size_t slot_at = lex_.skip_blanks();
      int64_t v = 0;
      bool overflow = false;
      if (!lex_.integer(&v, &overflow)) return expected("an output position in '" + key + "'");
      if (overflow || v < 0 || v >= int64_t(g.outputs().size())) {
        return error_at(slot_at, "'" + key + "' names output " + std::string(lex_.text().substr(slot_at, lex_.pos() - slot_at)) +
                                     " but the function returns " + std::to_string(g.outputs().size()) + " values");
      }
      slots.push_back(v);
      if (!lex_.consume(',') && lex_.peek() != ']') return expected("',' or ']' in '" + key + "'");
    }
    if (!lex_.consume(',')) break;
  }
  if (!lex_.consume('}')) return expected("'}' closing the output lists");
  for (int64_t u : unmaterialized) {
    if (std::find(optional.begin(), optional.end(), u) == optional.end()) {
      return error_at(lex_.pos(), "output " + std::to_string(u) + " is unmaterialized but not optional");
    }
  }
  g.set_optional_outputs(std::move(optional));
  g.set_unmaterialized_outputs(std::move(unmaterialized));
  return Status::ok();
}

// { node } 'return' value { ',' value } '}'. *return_offsets gets the offset of 'return' and
// then of each returned value, for messages about them.
Status Parser::parse_block(Scope& scope, int depth, std::vector<size_t>* return_offsets) {
  while (true) {
    size_t at = lex_.skip_blanks();
    if (lex_.consume_word("return")) {
      return_offsets->push_back(at);
      if (lex_.peek() == '%') {
        while (true) {
          return_offsets->push_back(lex_.skip_blanks());
          ValueId v = kNoValue;
          FUSEBOX_RETURN_IF_ERROR(parse_use(scope, &v));
          scope.graph->add_output(v);
          if (!lex_.consume(',')) break;
        }
      }
      if (scope.graph->outputs().empty()) return error_at(at, "'return' needs at least one value");
      if (lex_.peek() == '{') FUSEBOX_RETURN_IF_ERROR(parse_output_slots(*scope.graph));
      if (!lex_.consume('}')) return expected("'}' after the return values");
      return Status::ok();
    }
    char c = lex_.peek();
    if (c == '%') {
      FUSEBOX_RETURN_IF_ERROR(parse_node(scope, depth));
    } else if (c == '}' || lex_.at_end()) {
      return expected("'return' ending the body");
    } else {
      return expected("a node ('%name = op ...') or 'return'");
    }
  }
}

Status Parser::check_new_name(const Scope& scope, std::string_view name, size_t offset) {
  auto it = scope.defs.find(name);
  if (it == scope.defs.end()) return Status::ok();
  return error_at(offset, "%" + std::string(name) + " is defined twice (first at " +
                              loc_text(it->second.loc) + ")");
}

// results '=' keyword [ operands ] [ attr-dict ] ':' types [ region-body ]
Status Parser::parse_node(Scope& scope, int depth) {
  size_t at = lex_.skip_blanks();
  lex_.consume('%');
  std::string name(lex_.name());
  if (name.empty()) return expected("a result name after '%'");
  FUSEBOX_RETURN_IF_ERROR(check_new_name(scope, name, at));
  int64_t count = 1;
  bool multi = false;
  if (lex_.consume(':')) {
    lex_.skip_blanks();
    size_t count_at = lex_.pos();
    bool overflow = false;
    if (!lex_.integer(&count, &overflow)) return expected("the result count after '%" + name + ":'");
    if (overflow || count < 2) {
      return error_at(count_at, "a result count must be at least 2 (one result is written %" + name + ")");
    }
    multi = true;
  }
  if (!lex_.consume('=')) return expected("'=' after the result name");
  size_t op_at = lex_.skip_blanks();
  std::string_view keyword = lex_.identifier();
  if (keyword.empty()) return expected("an op name");
  std::optional<Op> op = op_from_keyword(keyword);
  if (!op) return error_at(op_at, "unknown op '" + std::string(keyword) + "'");

  Node node;
  node.op = *op;
  node.loc = lex_.loc(at);
  if (lex_.peek() == '%') {
    while (true) {
      ValueId v = kNoValue;
      FUSEBOX_RETURN_IF_ERROR(parse_use(scope, &v));
      node.inputs.push_back(v);
      if (!lex_.consume(',')) break;
    }
  }
  if (lex_.peek() == '{') FUSEBOX_RETURN_IF_ERROR(parse_attrs(node));
  if (!lex_.consume(':')) return expected("':' and the result types");
  size_t types_at = lex_.skip_blanks();
  std::vector<TensorType> types;
  while (true) {
    TensorType t;
    FUSEBOX_RETURN_IF_ERROR(parse_type(&t, true, "a result"));
    types.push_back(std::move(t));
    if (!lex_.consume(',')) break;
  }
  if (static_cast<int64_t>(types.size()) != count) {
    if (!multi) {
      return error_at(types_at, "%" + name + " has " + std::to_string(types.size()) +
                                    " result types; a node with several results is written %" + name +
                                    ":" + std::to_string(types.size()));
    }
    return error_at(types_at, "%" + name + ":" + std::to_string(count) + " declares " +
                                  std::to_string(count) + " results but " +
                                  std::to_string(types.size()) + " result types follow");
  }
  if (lex_.peek() == '(') {
    if (depth >= kMaxRegionDepth) return error_at(lex_.pos(), "regions nest too deeply");
    auto body = std::make_shared<Graph>(scope.graph->name());
    Scope inner{body.get(), true, {}};
    FUSEBOX_RETURN_IF_ERROR(parse_params(inner));
    if (!lex_.consume('{')) return expected("'{' opening the region body");
    std::vector<size_t> ignored;
    FUSEBOX_RETURN_IF_ERROR(parse_block(inner, depth + 1, &ignored));
    node.body = std::move(body);
  }
  Definition def{{}, multi, node.loc};
  for (size_t i = 0; i < types.size(); ++i) {
    // Only the first result carries the name: the others are %name#k.
    ValueId v = scope.graph->add_value(std::move(types[i]), i == 0 ? name : std::string());
    node.outputs.push_back(v);
    def.values.push_back(v);
  }
  scope.defs[name] = std::move(def);
  scope.graph->add_node(std::move(node));
  return Status::ok();
}

// '%' name [ '#' index ]
Status Parser::parse_use(Scope& scope, ValueId* value) {
  size_t at = lex_.skip_blanks();
  if (!lex_.consume('%')) return expected("a value ('%name')");
  std::string name(lex_.name());
  if (name.empty()) return expected("a value name after '%'");
  auto it = scope.defs.find(name);
  if (it == scope.defs.end()) return error_at(at, "use of undefined value %" + name);
  const Definition& def = it->second;
  std::string count = std::to_string(def.values.size());
  if (lex_.peek_raw() == '#') {
    lex_.set_pos(lex_.pos() + 1);
    int64_t index = 0;
    bool overflow = false;
    if (!lex_.integer(&index, &overflow)) return expected("a result number after '%" + name + "#'");
    if (!def.multi) return error_at(at, "%" + name + " is a single value; use it without '#'");
    if (overflow || index >= static_cast<int64_t>(def.values.size())) {
      return error_at(at, "%" + name + " has " + count + " results; the index must be below " + count);
    }
    *value = def.values[static_cast<size_t>(index)];
    return Status::ok();
  }
  if (def.multi) {
    return error_at(at, "%" + name + " has " + count + " results; use one of %" + name + "#0 to %" +
                            name + "#" + std::to_string(def.values.size() - 1));
  }
  *value = def.values[0];
  return Status::ok();
}

// '{' [ name '=' value { ',' name '=' value } ] '}'
Status Parser::parse_attrs(Node& node) {
  const OpInfo& info = node.info();
  lex_.consume('{');
  if (lex_.consume('}')) return Status::ok();
  while (true) {
    size_t at = lex_.skip_blanks();
    std::string name(lex_.identifier());
    if (name.empty()) return expected("an attribute name");
    const AttrSpec* spec = info.find_attr(name);
    if (!spec) {
      std::string known;
      for (const AttrSpec& a : info.attrs) known += (known.empty() ? "" : ", ") + a.name;
      return error_at(at, "unknown attribute '" + name + "' for " + std::string(info.keyword) +
                              (known.empty() ? " (it takes none)" : " (it takes: " + known + ")"));
    }
    if (node.attrs.has(name)) return error_at(at, "attribute '" + name + "' is given twice");
    if (!lex_.consume('=')) return expected("'=' after the attribute name");
    size_t value_at = lex_.skip_blanks();
    size_t consumed = 0, error_offset = 0;
    Expected<AttrValue> value =
        parse_attr_value(std::string_view(clean_).substr(value_at), spec->type, &consumed, &error_offset);
    std::string what = "attribute '" + name + "' of " + std::string(info.keyword);
    if (!value) {
      std::string msg = value.status().message();
      // attr_text quotes the text after the error; keep only its first line.
      if (size_t nl = msg.find('\n'); nl != std::string::npos) {
        size_t quote = msg.rfind('\'');
        msg.erase(nl, quote != std::string::npos && quote > nl ? quote - nl : std::string::npos);
      }
      // An unterminated string runs to the end of the file; its start is the useful place.
      size_t where = msg.rfind("unterminated string", 0) == 0 ? value_at : value_at + error_offset;
      return error_at(where, "bad " + std::string(attr_type_name(spec->type)) + " value for " +
                                 what + ": " + msg);
    }
    if (!spec->choices.empty()) {
      const std::string& s = std::get<std::string>(*value);
      if (std::find(spec->choices.begin(), spec->choices.end(), s) == spec->choices.end()) {
        std::string allowed;
        for (const std::string& c : spec->choices) allowed += (allowed.empty() ? "" : ", ") + c;
        return error_at(value_at, what + " is " + quote_string(s) + ", expected one of " + allowed);
      }
    }
    node.attrs.set(name, std::move(*value));
    lex_.set_pos(value_at + consumed);
    if (lex_.consume('}')) return Status::ok();
    if (!lex_.consume(',')) return expected("',' or '}' in the attributes");
  }
}

// The verifier names a failing node through describe_node(), whose text carries the node's
// line:col. The innermost node named in the message is the one to point at.
struct NamedNode {
  const Node* node = nullptr;
  size_t at = std::string::npos;
  std::string plain;  // describe_node without the location
  size_t described_size = 0;
};

void find_named_node(const Graph& g, const std::string& message, NamedNode* best) {
  std::vector<std::string> names = value_display_names(g);
  for (const Node& n : g.nodes()) {
    if (n.loc.line > 0) {
      std::string described = describe_node(g, n, names) + ": ";
      size_t at = message.rfind(described);
      if (at != std::string::npos && (best->node == nullptr || at > best->at)) {
        Node plain = n;
        plain.loc = SourceLoc{};
        *best = NamedNode{&n, at, describe_node(g, plain, names), described.size() - 2};
      }
    }
    if (n.body) find_named_node(*n.body, message, best);
  }
}

Status Parser::verify_function(const Graph& g, SourceLoc func_loc) const {
  Status s = verify(g);
  if (s.is_ok()) return s;
  const std::string& message = s.message();
  NamedNode named;
  find_named_node(g, message, &named);
  if (named.node == nullptr) return error_at(func_loc, message);
  return error_at(named.node->loc, named.plain + message.substr(named.at + named.described_size));
}

}  // namespace

Expected<Module> parse_module(std::string_view text, std::string_view filename, int first_line) {
  Parser parser(text, filename, first_line);
  return parser.parse_module();
}

Expected<Module> parse_module(std::string_view text, std::string_view filename) {
  return parse_module(text, filename, 1);
}

Expected<Graph> parse_graph(std::string_view text, std::string_view filename) {
  FUSEBOX_ASSIGN_OR_RETURN(Module m, parse_module(text, filename));
  if (m.functions.size() != 1) {
    return Status::invalid(std::string(filename) + ":1:1: expected exactly one function, found " +
                           std::to_string(m.functions.size()));
  }
  return std::move(m.functions.front());
}

}  // namespace fusebox
