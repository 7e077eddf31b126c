#include "ir/attr_text.h"

#include "ir/size.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace fusebox {

namespace {

bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9') || c == '.'; }

template <typename F>
std::string format_float(F v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// A cursor over the text with the helpers each value kind needs.
class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}

  size_t pos() const { return pos_; }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  void skip_space() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r'))
      ++pos_;
  }
  bool consume(char c) {
    skip_space();
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  bool consume_word(std::string_view w) {
    skip_space();
    if (text_.substr(pos_, w.size()) != w) return false;
    size_t end = pos_ + w.size();
    if (end < text_.size() && is_ident_char(text_[end])) return false;
    pos_ = end;
    return true;
  }
  std::string_view ident() {
    skip_space();
    size_t start = pos_;
    if (!is_ident_start(peek())) return {};
    while (!at_end() && is_ident_char(peek())) ++pos_;
    return text_.substr(start, pos_ - start);
  }
  // The longest run that can form a number literal.
  std::string_view number_token() {
    skip_space();
    size_t start = pos_;
    if (peek() == '-' || peek() == '+') ++pos_;
    while (!at_end()) {
      char c = peek();
      bool exp_sign = (c == '-' || c == '+') && pos_ > start &&
                      (text_[pos_ - 1] == 'e' || text_[pos_ - 1] == 'E');
      if ((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || exp_sign) {
        ++pos_;
      } else {
        break;
      }
    }
    return text_.substr(start, pos_ - start);
  }
  std::string_view rest() const { return text_.substr(pos_, 16); }
  size_t remaining() const { return text_.size() - pos_; }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

struct ParseError {
  size_t offset;
  std::string message;
};

using ErrorOr = std::optional<ParseError>;

ErrorOr err(const Scanner& s, std::string what) {
  std::string got = std::string(s.rest());
  return ParseError{s.pos(), "expected " + what + (got.empty() ? " at end of text" : " at '" + got + "'")};
}

ErrorOr parse_i64(Scanner& s, int64_t* out) {
  s.skip_space();
  size_t start = s.pos();
  std::string_view tok = s.number_token();
  if (tok.empty()) return err(s, "an integer");
  const char* b = tok.data() + (tok[0] == '+' ? 1 : 0);
  auto res = std::from_chars(b, tok.data() + tok.size(), *out);
  if (res.ec == std::errc::result_out_of_range) {
    return ParseError{start, "integer '" + std::string(tok) + "' is out of range for i64"};
  }
  if (res.ec != std::errc() || res.ptr != tok.data() + tok.size()) {
    return ParseError{start, "expected an integer, got '" + std::string(tok) + "'"};
  }
  return std::nullopt;
}

ErrorOr parse_f64(Scanner& s, double* out) {
  s.skip_space();
  size_t start = s.pos();
  if (s.consume_word("inf")) {
    *out = INFINITY;
    return std::nullopt;
  }
  if (s.consume_word("nan")) {
    *out = NAN;
    return std::nullopt;
  }
  if (s.peek() == '-') {
    Scanner probe = s;
    probe.consume('-');
    if (probe.consume_word("inf")) {
      s = probe;
      *out = -INFINITY;
      return std::nullopt;
    }
  }
  std::string_view tok = s.number_token();
  if (tok.empty()) return err(s, "a number");
  const char* b = tok.data() + (tok[0] == '+' ? 1 : 0);
  auto res = std::from_chars(b, tok.data() + tok.size(), *out);
  if (res.ec == std::errc::result_out_of_range) {
    // Overflow/underflow: fall back to strtod's saturating result (inf or 0).
    *out = std::strtod(std::string(tok).c_str(), nullptr);
    return std::nullopt;
  }
  if (res.ec != std::errc() || res.ptr != tok.data() + tok.size()) {
    return ParseError{start, "expected a number, got '" + std::string(tok) + "'"};
  }
  return std::nullopt;
}

ErrorOr parse_string(Scanner& s, std::string* out) {
  s.skip_space();
  if (!s.consume('"')) return err(s, "a quoted string");
  out->clear();
  while (true) {
    if (s.at_end()) return ParseError{s.pos(), "unterminated string"};
    char c = s.peek();
    s.consume(c);  // never skips space: c is the next char
    if (c == '"') return std::nullopt;
    if (c == '\\') {
      if (s.at_end()) return ParseError{s.pos(), "unterminated string"};
      char e = s.peek();
      s.consume(e);
      switch (e) {
        case 'n': out->push_back('\n'); break;
        case 't': out->push_back('\t'); break;
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        default: return ParseError{s.pos() - 1, std::string("unknown escape '\\") + e + "' in string"};
      }
      continue;
    }
    out->push_back(c);
  }
}

template <typename T, typename F>
ErrorOr parse_list(Scanner& s, std::vector<T>* out, F&& element) {
  if (!s.consume('[')) return err(s, "'['");
  out->clear();
  if (s.consume(']')) return std::nullopt;
  while (true) {
    T v{};
    if (ErrorOr e = element(s, &v)) return e;
    out->push_back(std::move(v));
    if (s.consume(']')) return std::nullopt;
    if (!s.consume(',')) return err(s, "',' or ']'");
  }
}

ErrorOr parse_dim(Scanner& s, Dim* out) {
  s.skip_space();
  if (s.consume('?')) {
    *out = Dim::dynamic();
    return std::nullopt;
  }
  if (is_ident_start(s.peek())) {
    *out = Dim::symbol(std::string(s.ident()));
    return std::nullopt;
  }
  int64_t v = 0;
  if (ErrorOr e = parse_i64(s, &v)) return e;
  if (v < -1) return ParseError{s.pos(), "dim " + std::to_string(v) + " is negative"};
  // In a dims attribute -1 and '?' both mean "not given here" (reshape infers it).
  *out = v == -1 ? Dim::dynamic() : Dim(v);
  return std::nullopt;
}

ErrorOr parse_dense(Scanner& s, std::shared_ptr<const Array>* out) {
  if (!s.consume_word("dense")) return err(s, "'dense<'");
  if (!s.consume('<')) return err(s, "'<' after dense");
  std::string_view dt_name = s.ident();
  std::optional<DType> dt = parse_dtype(dt_name);
  if (!dt) return err(s, "a dtype in dense<...>");
  std::vector<int64_t> shape;
  if (ErrorOr e = parse_list(s, &shape, [](Scanner& sc, int64_t* v) -> ErrorOr {
        size_t at = sc.pos();
        if (ErrorOr e2 = parse_i64(sc, v)) return e2;
        if (*v < 0) return ParseError{at, "dense shape dims must be >= 0"};
        return std::nullopt;
      }))
    return e;
  std::optional<int64_t> elements = checked_num_elements(shape);
  if (!elements) return ParseError{s.pos(), "dense array shape " + check_size(shape).message()};
  int64_t n = *elements;
  if (!s.consume(':')) return err(s, "':' after the dense type");
  // Every value takes at least one character: checking before allocating keeps a huge declared
  // shape from allocating (or failing to allocate) memory the text cannot fill.
  if (n > static_cast<int64_t>(s.remaining())) {
    return ParseError{s.pos(), "dense array of " + std::to_string(n) + " elements is longer than its text"};
  }
  auto array = std::make_shared<Array>(*dt, shape);
  if (!s.consume('[')) return err(s, "'['");
  int64_t count = 0;
  if (!s.consume(']')) {
    while (true) {
      if (count >= n) return ParseError{s.pos(), "dense array has more than " + std::to_string(n) + " values"};
      if (*dt == DType::Bool) {
        if (s.consume_word("true")) {
          array->set_i64(count, 1);
        } else if (s.consume_word("false")) {
          array->set_i64(count, 0);
        } else {
          return err(s, "true or false");
        }
      } else if (is_float(*dt)) {
        double v = 0;
        if (ErrorOr e = parse_f64(s, &v)) return e;
        array->set_f64(count, v);
      } else {
        int64_t v = 0;
        if (ErrorOr e = parse_i64(s, &v)) return e;
        array->set_i64(count, v);
      }
      ++count;
      if (s.consume(']')) break;
      if (!s.consume(',')) return err(s, "',' or ']'");
    }
  }
  if (count != n) {
    return ParseError{s.pos(), "dense array of " + std::to_string(n) + " elements has " +
                                   std::to_string(count) + " values"};
  }
  if (!s.consume('>')) return err(s, "'>' closing dense<...>");
  *out = std::move(array);
  return std::nullopt;
}

std::string print_dense(const Array& a) {
  std::string s = "dense<" + a.type_string() + ": [";
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (i) s += ", ";
    switch (a.dtype()) {
      case DType::Bool: s += a.get_i64(i) ? "true" : "false"; break;
      case DType::F64: s += format_f64(a.get_f64(i)); break;
      case DType::F32:
      case DType::F16:
      case DType::BF16: s += format_f32(float(a.get_f64(i))); break;
      default: s += std::to_string(a.get_i64(i)); break;
    }
  }
  return s + "]>";
}

}  // namespace

std::string format_f64(double v) { return format_float(v); }
std::string format_f32(float v) { return format_float(v); }

std::string quote_string(std::string_view in) {
  std::string s = "\"";
  for (char c : in) {
    switch (c) {
      case '"': s += "\\\""; break;
      case '\\': s += "\\\\"; break;
      case '\n': s += "\\n"; break;
      case '\t': s += "\\t"; break;
      default: s += c;
    }
  }
  return s + "\"";
}

std::string print_attr_value(const AttrValue& v) {
  struct Printer {
    std::string operator()(int64_t x) const { return std::to_string(x); }
    std::string operator()(double x) const { return format_f64(x); }
    std::string operator()(bool x) const { return x ? "true" : "false"; }
    std::string operator()(const std::string& x) const { return quote_string(x); }
    std::string operator()(const std::vector<int64_t>& x) const {
      std::string s = "[";
      for (size_t i = 0; i < x.size(); ++i) s += (i ? ", " : "") + std::to_string(x[i]);
      return s + "]";
    }
    std::string operator()(const std::vector<double>& x) const {
      std::string s = "[";
      for (size_t i = 0; i < x.size(); ++i) s += (i ? ", " : "") + format_f64(x[i]);
      return s + "]";
    }
    std::string operator()(const Shape& x) const {
      std::string s = "[";
      for (size_t i = 0; i < x.size(); ++i) {
        s += (i ? ", " : "") + (x[i].is_dynamic() ? std::string("-1") : x[i].to_string());
      }
      return s + "]";
    }
    std::string operator()(DType x) const { return std::string(dtype_name(x)); }
    std::string operator()(const std::shared_ptr<const Array>& x) const {
      return x ? print_dense(*x) : "dense<>";
    }
  };
  return std::visit(Printer{}, v);
}

Expected<AttrValue> parse_attr_value(std::string_view text, AttrType type, size_t* consumed,
                                     size_t* error_offset) {
  Scanner s(text);
  AttrValue value;
  ErrorOr e;
  switch (type) {
    case AttrType::I64: {
      int64_t v = 0;
      e = parse_i64(s, &v);
      value = v;
      break;
    }
    case AttrType::F64: {
      double v = 0;
      e = parse_f64(s, &v);
      value = v;
      break;
    }
    case AttrType::Bool: {
      if (s.consume_word("true")) {
        value = true;
      } else if (s.consume_word("false")) {
        value = false;
      } else {
        e = err(s, "true or false");
      }
      break;
    }
    case AttrType::Str: {
      std::string v;
      e = parse_string(s, &v);
      value = std::move(v);
      break;
    }
    case AttrType::I64s: {
      std::vector<int64_t> v;
      e = parse_list(s, &v, parse_i64);
      value = std::move(v);
      break;
    }
    case AttrType::F64s: {
      std::vector<double> v;
      e = parse_list(s, &v, parse_f64);
      value = std::move(v);
      break;
    }
    case AttrType::Dims: {
      Shape v;
      e = parse_list(s, &v, parse_dim);
      value = std::move(v);
      break;
    }
    case AttrType::DType: {
      std::string_view name = s.ident();
      std::optional<DType> dt = parse_dtype(name);
      if (!dt) {
        e = name.empty() ? err(s, "a dtype")
                         : ParseError{s.pos() - name.size(), "unknown dtype '" + std::string(name) + "'"};
      } else {
        value = *dt;
      }
      break;
    }
    case AttrType::Array: {
      std::shared_ptr<const Array> v;
      e = parse_dense(s, &v);
      value = std::move(v);
      break;
    }
  }
  if (e) {
    if (error_offset) *error_offset = e->offset;
    return Status::invalid(e->message);
  }
  if (consumed) *consumed = s.pos();
  return value;
}

}  // namespace fusebox
