#include "ir/bind_symbols.h"

#include <algorithm>
#include <optional>

#include "ir/size.h"

namespace fusebox {

Expected<std::vector<int64_t>> symbol_values(const Node& bind, const Array& values,
                                             std::span<const int64_t> x_dims) {
  const Shape& symbols = bind.attr_dims("symbols");
  const std::string& rule = bind.attr_str("rule");
  auto fail = [&](const std::string& what) {
    return Status::execution("bind_symbols (rule " + rule + "): " + what);
  };
  if (rule == "count_nonzero") return std::vector<int64_t>{count_nonzero(values)};
  if (values.numel() != int64_t(symbols.size())) {
    return fail(std::to_string(values.numel()) + " values for " + std::to_string(symbols.size()) +
                " symbols [" + shape_to_string(symbols) + "]");
  }
  std::vector<int64_t> out;
  for (int64_t k = 0; k < values.numel(); ++k) out.push_back(values.get_i64(k));
  auto listed = [&] {
    std::string s = "[";
    for (size_t k = 0; k < out.size(); ++k) s += (k ? "," : "") + std::to_string(out[k]);
    return s + "]";
  };
  if (rule == "values") {
    for (size_t k = 0; k < out.size(); ++k) {
      if (out[k] < 0)
        return fail(symbols[k].symbol_name() + " would be " + std::to_string(out[k]) + ", a negative size");
    }
    return out;
  }
  // A reshape target for x: 0 keeps x's size on that axis (unless allowzero), -1 takes the rest.
  const bool keep_zero = rule == "reshape";
  int64_t x_count = 1, known = 1;
  for (int64_t d : x_dims) x_count *= d;
  int infer = -1;
  for (size_t k = 0; k < out.size(); ++k) {
    if (out[k] == 0 && keep_zero) {
      if (k >= x_dims.size())
        return fail("target " + listed() + " keeps axis " + std::to_string(k) + " of a rank " +
                    std::to_string(x_dims.size()) + " operand");
      out[k] = x_dims[k];
    }
    if (out[k] == -1) {
      if (infer >= 0) return fail("target " + listed() + " has more than one -1");
      infer = int(k);
      continue;
    }
    if (out[k] < 0) return fail("target " + listed() + " has a negative size");
    std::optional<int64_t> product = size_mul(known, out[k]);
    if (!product) return fail("target " + listed() + " has more than 2^48 elements");
    known = *product;
  }
  if (infer >= 0) {
    if (known == 0 || x_count % known != 0)
      return fail("target " + listed() + " does not fit " + std::to_string(x_count) + " elements");
    out[size_t(infer)] = x_count / known;
  }
  return out;
}

Status bind_symbol_values(const Node& bind, std::span<const int64_t> v, SymbolBindings& bindings) {
  const Shape& symbols = bind.attr_dims("symbols");
  for (size_t k = 0; k < v.size(); ++k) {
    const std::string& name = symbols[k].symbol_name();
    auto [pos, inserted] = bindings.emplace(name, v[k]);
    if (!inserted && pos->second != v[k]) {
      return Status::execution("bind_symbols: " + name + " is already " + std::to_string(pos->second) +
                               ", the values give " + std::to_string(v[k]));
    }
  }
  return Status::ok();
}

bool has_bind_symbols(const Graph& g) {
  return std::any_of(g.nodes().begin(), g.nodes().end(),
                     [](const Node& n) { return n.op == Op::BindSymbols; });
}

bool nonzero_at(const Array& a, int64_t i) {
  // A bool is read as its byte: any non-zero byte is true (a user's buffer may hold other bytes).
  if (dtype_size(a.dtype()) == 1) return a.data<uint8_t>()[i] != 0;
  return is_float(a.dtype()) ? a.get_f64(i) != 0.0 : a.get_i64(i) != 0;  // NaN != 0
}

namespace {

template <typename T>
int64_t count_nonzero_as(const Array& a) {
  const T* p = a.data<T>();
  int64_t n = 0;
  for (int64_t i = 0; i < a.numel(); ++i) n += p[i] != T(0);
  return n;
}

}  // namespace

int64_t count_nonzero(const Array& a) {
  if (dtype_size(a.dtype()) == 1) return count_nonzero_as<uint8_t>(a);
  switch (a.dtype()) {
    case DType::F32:
      return count_nonzero_as<float>(a);
    case DType::F64:
      return count_nonzero_as<double>(a);
    case DType::I32:
      return count_nonzero_as<int32_t>(a);
    case DType::I64:
      return count_nonzero_as<int64_t>(a);
    default:
      break;
  }
  int64_t n = 0;
  for (int64_t i = 0; i < a.numel(); ++i) n += nonzero_at(a, i);
  return n;
}

int64_t write_nonzero_coordinates(const Array& a, int64_t* out, int64_t columns) {
  const std::vector<int64_t> dims = a.rank() == 0 ? std::vector<int64_t>{1} : a.shape();
  const int64_t rank = int64_t(dims.size());
  int64_t k = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (!nonzero_at(a, i)) continue;
    for (int64_t d = rank - 1, rest = i; d >= 0 && k < columns; --d) {
      out[d * columns + k] = rest % dims[size_t(d)];
      rest /= dims[size_t(d)];
    }
    ++k;
  }
  return k;
}

Array nonzero_coordinates(const Array& a) {
  const int64_t count = count_nonzero(a);
  Array out(DType::I64, {std::max<int64_t>(a.rank(), 1), count});
  write_nonzero_coordinates(a, out.data<int64_t>(), count);
  return out;
}

}  // namespace fusebox
