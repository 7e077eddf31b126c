#include "runtime/npy.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "ir/size.h"
#include "runtime/file_io.h"

namespace fusebox {

// The data is copied as is: NPY files store little-endian values.
static_assert(std::endian::native == std::endian::little, "npy.cpp assumes a little-endian host");

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr size_t kPreludeV1 = 10;  // magic, 2 version bytes, u16 header length
constexpr size_t kPreludeV2 = 12;  // ... u32 header length
constexpr size_t kAlign = 64;      // numpy pads the header so the data starts 64-byte aligned
constexpr size_t kMaxRank = 64;    // numpy's own limit
constexpr const char* kSupported = "<f4 <f8 <f2 |u1 |i1 <i2 <u2 <i4 <u4 <i8 <u8 |b1";

struct NpyType {
  const char* code;  // without the byte-order character
  DType dtype;
};
constexpr NpyType kTypes[] = {
    {"f4", DType::F32}, {"f8", DType::F64}, {"f2", DType::F16}, {"u1", DType::U8},
    {"i1", DType::I8},  {"i4", DType::I32}, {"i8", DType::I64}, {"b1", DType::Bool},
    {"i2", DType::I16}, {"u2", DType::U16}, {"u4", DType::U32}, {"u8", DType::U64},
};

// What the header dict holds, for the three keys numpy writes.
struct Header {
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<std::vector<int64_t>> shape;
};

// A reader for the Python literal numpy writes as the header: a dict with string keys whose
// values are strings, True/False or tuples of ints. Anything else is an error naming the offset.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view name) : text_(text), name_(name) {}

  Expected<Header> parse() {
    skip_space();
    if (!eat('{')) return fail("header is not a dict (it does not start with '{')");
    Header h;
    skip_space();
    while (!eat('}')) {
      std::string key;
      if (!read_string(&key)) return fail("header dict keys must be quoted strings");
      skip_space();
      if (!eat(':')) return fail("expected ':' after '" + key + "'");
      skip_space();
      if (key == "descr") {
        if (h.descr) return fail("'descr' appears twice");
        if (peek() == '[') return fail("structured dtypes (descr is a list) are not supported");
        std::string d;
        if (!read_string(&d)) return fail("'descr' must be a string such as '<f4'");
        h.descr = d;
      } else if (key == "fortran_order") {
        if (h.fortran_order) return fail("'fortran_order' appears twice");
        if (eat_word("True")) h.fortran_order = true;
        else if (eat_word("False")) h.fortran_order = false;
        else return fail("'fortran_order' must be True or False");
      } else if (key == "shape") {
        if (h.shape) return fail("'shape' appears twice");
        FUSEBOX_ASSIGN_OR_RETURN(std::vector<int64_t> dims, read_shape());
        h.shape = std::move(dims);
      } else {
        return fail("unexpected key '" + key + "' (a .npy header has descr, fortran_order, shape)");
      }
      skip_space();
      if (eat(',')) {
        skip_space();
        continue;
      }
      skip_space();
      if (!eat('}')) return fail("expected ',' or '}' in the header dict");
      break;
    }
    skip_space();
    if (pos_ != text_.size()) return fail("unexpected text after the header dict");
    if (!h.descr) return missing("descr");
    if (!h.fortran_order) return missing("fortran_order");
    if (!h.shape) return missing("shape");
    return h;
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  bool eat_word(std::string_view w) {
    if (text_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool read_string(std::string* out) {
    char quote = peek();
    if (quote != '\'' && quote != '"') return false;
    size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) return false;
    *out = std::string(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return true;
  }

  // "(2, 3)", "(3,)" or "()". Python 2 numpy wrote "3L": the suffix is accepted, as numpy does.
  Expected<std::vector<int64_t>> read_shape() {
    if (!eat('(')) return fail("'shape' must be a tuple such as (2, 3)");
    std::vector<int64_t> dims;
    skip_space();
    while (!eat(')')) {
      bool negative = eat('-');
      if (peek() < '0' || peek() > '9') return fail("'shape' must hold integers");
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, peek() - '0', &v)) {
          return fail("a dim of 'shape' does not fit in 64 bits");
        }
        ++pos_;
      }
      eat('L');
      if (negative) return fail("'shape' has a negative dim -" + std::to_string(v));
      if (dims.size() == kMaxRank) return fail("'shape' has more than 64 dims");
      dims.push_back(v);
      skip_space();
      if (eat(',')) {
        skip_space();
        continue;
      }
      if (!eat(')')) return fail("expected ',' or ')' in 'shape'");
      break;
    }
    return dims;
  }

  Status fail(const std::string& what) const {
    return Status::invalid(std::string(name_) + ": bad .npy header at offset " + std::to_string(pos_) +
                           ": " + what);
  }
  Status missing(const char* key) const {
    return Status::invalid(std::string(name_) + ": bad .npy header: it has no '" + key + "' entry");
  }

  std::string_view text_;
  std::string_view name_;
  size_t pos_ = 0;
};

Expected<DType> dtype_from_descr(const std::string& descr, std::string_view name) {
  auto fail = [&](const std::string& why) { return Status::invalid(std::string(name) + ": " + why); };
  if (descr.size() == 3) {
    const char order = descr[0];
    const std::string_view code = std::string_view(descr).substr(1);
    for (const NpyType& t : kTypes) {
      if (code != t.code) continue;
      // Byte order does not apply to one-byte types; numpy writes '|' but '<' and '>' mean the same.
      if (dtype_size(t.dtype) == 1 && (order == '|' || order == '<' || order == '>' || order == '=')) {
        return t.dtype;
      }
      if (order == '<') return t.dtype;
      if (order == '>') {
        return fail("big-endian data ('" + descr + "') is not supported; save it little-endian, e.g. "
                    "arr.astype('<" + std::string(code) + "')");
      }
    }
  }
  return fail("unsupported dtype '" + descr + "' (supported: " + kSupported + ")");
}

std::string npy_descr(DType t) {
  for (const NpyType& n : kTypes) {
    if (n.dtype != t) continue;
    std::string descr(1, dtype_size(t) == 1 ? '|' : '<');
    return descr + n.code;
  }
  return {};
}

std::string shape_tuple(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

uint32_t read_le(std::string_view bytes, size_t at, size_t width) {
  uint32_t v = 0;
  for (size_t i = 0; i < width; ++i) v |= uint32_t(uint8_t(bytes[at + i])) << (8 * i);
  return v;
}


// What the prelude and header say: enough to know how many data bytes follow.
struct Layout {
  DType dtype;
  std::string descr;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  size_t data_offset = 0;
  int64_t data_bytes = 0;
};

// Parses the prelude and header; `bytes` may end right after the header.
Expected<Layout> parse_layout(std::string_view bytes, std::string_view name) {
  auto fail = [&](const std::string& why) { return Status::invalid(std::string(name) + ": " + why); };
  if (bytes.size() < kMagic.size() || bytes.substr(0, kMagic.size()) != kMagic) {
    return fail("not a .npy file (it does not start with the magic bytes \\x93NUMPY)");
  }
  if (bytes.size() < kPreludeV1) return fail("truncated .npy file: it ends inside the version and header length");
  const int major = uint8_t(bytes[6]), minor = uint8_t(bytes[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    return fail("unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor) +
                " (1.0, 2.0 and 3.0 are read)");
  }
  const size_t prelude = major == 1 ? kPreludeV1 : kPreludeV2;
  if (bytes.size() < prelude) return fail("truncated .npy file: it ends inside the header length");
  const size_t header_len = read_le(bytes, 8, prelude - 8);
  if (bytes.size() - prelude < header_len) {
    return fail("truncated .npy file: the header says " + std::to_string(header_len) + " bytes but the file has " +
                std::to_string(bytes.size() - prelude) + " after the prelude");
  }
  FUSEBOX_ASSIGN_OR_RETURN(Header h, HeaderParser(bytes.substr(prelude, header_len), name).parse());
  FUSEBOX_ASSIGN_OR_RETURN(DType dtype, dtype_from_descr(*h.descr, name));
  if (*h.fortran_order) {
    return fail("fortran_order True (column-major data) is not supported; save a C-ordered array, e.g. "
                "np.ascontiguousarray(arr)");
  }
  std::optional<int64_t> count = checked_num_elements(*h.shape);
  if (!count) {
    return fail("shape " + shape_tuple(*h.shape) +
                " has too many elements (the limit is 2^48 per dim and per tensor, zero-element tensors included)");
  }
  int64_t numel = *count;
  int64_t need = numel * int64_t(dtype_size(dtype));  // at most 2^48 * 8: no overflow
  return Layout{dtype, *h.descr, *h.shape, numel, prelude + header_len, need};
}

// The prelude and header length, once `bytes` holds the prelude; 0 when it is not a .npy
// prelude (parse_layout then says what is wrong).
size_t header_end(std::string_view bytes) {
  if (bytes.size() < kPreludeV1 || bytes.substr(0, kMagic.size()) != kMagic) return 0;
  const int major = uint8_t(bytes[6]);
  const size_t prelude = major == 1 ? kPreludeV1 : kPreludeV2;
  if (bytes.size() < prelude) return 0;
  return prelude + read_le(bytes, 8, prelude - 8);
}

}  // namespace

Expected<Array> parse_npy(std::string_view bytes, std::string_view name) {
  auto fail = [&](const std::string& why) { return Status::invalid(std::string(name) + ": " + why); };
  FUSEBOX_ASSIGN_OR_RETURN(Layout layout, parse_layout(bytes, name));
  const std::vector<int64_t>& shape = layout.shape;
  const DType dtype = layout.dtype;
  const int64_t numel = layout.numel, need = layout.data_bytes;
  const std::string_view data = bytes.substr(layout.data_offset);
  if (uint64_t(need) > data.size()) {
    return fail("data is truncated: shape " + shape_tuple(shape) + " of '" + layout.descr + "' needs " +
                std::to_string(need) + " bytes but the file has " + std::to_string(data.size()));
  }
  Array a(dtype, shape);
  if (need) std::memcpy(a.raw(), data.data(), size_t(need));
  // A bool byte other than 0 or 1 is not a valid C++ bool: normalise it as numpy reads it.
  if (dtype == DType::Bool) {
    auto* p = static_cast<uint8_t*>(a.raw());
    for (int64_t i = 0; i < numel; ++i) p[i] = p[i] != 0;
  }
  return a;
}

// Reads only what the header says the file holds, so /dev/zero or a huge shape is a message
// rather than a read that never ends.
Expected<Array> read_npy(const std::string& path) {
  constexpr uint64_t kMaxHeader = uint64_t(1) << 20;  // numpy writes a few hundred bytes
  FUSEBOX_ASSIGN_OR_RETURN(InputFile f, open_for_read(path));
  std::string bytes;
  FUSEBOX_RETURN_IF_ERROR(read_some(f.get(), path, kPreludeV2, &bytes));
  size_t end = header_end(bytes);
  if (end == 0) return parse_npy(bytes, path);
  if (end - kPreludeV1 > kMaxHeader) {
    return Status::invalid(path + ": the header says " + std::to_string(end - kPreludeV1) + " bytes, over the " +
                           format_byte_size(kMaxHeader) + " limit for a .npy header");
  }
  if (end > bytes.size()) FUSEBOX_RETURN_IF_ERROR(read_some(f.get(), path, end - bytes.size(), &bytes));
  if (bytes.size() < end) return parse_npy(bytes, path);
  FUSEBOX_ASSIGN_OR_RETURN(Layout layout, parse_layout(bytes, path));
  const uint64_t limit = max_tensor_bytes();
  if (uint64_t(layout.data_bytes) > limit) {
    return Status::invalid(path + ": shape " + shape_tuple(layout.shape) + " of '" + layout.descr +
                           "' needs " + format_byte_size(uint64_t(layout.data_bytes)) + ", over the " +
                           format_byte_size(limit) + " limit for a tensor (half the physical memory)");
  }
  FUSEBOX_RETURN_IF_ERROR(read_some(f.get(), path, uint64_t(layout.data_bytes) + end - bytes.size(), &bytes));
  return parse_npy(bytes, path);
}

Expected<std::string> format_npy(const Array& array) {
  const std::string descr = npy_descr(array.dtype());
  if (descr.empty()) {
    return Status::invalid(std::string(dtype_name(array.dtype())) +
                           " has no numpy dtype and cannot be written to .npy; cast it to f32 first");
  }
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape_tuple(array.shape()) + ", }";
  size_t prelude = kPreludeV1;
  // Pad with spaces and end with '\n' so that prelude + header is a multiple of 64.
  size_t padded = (prelude + header.size() + 1 + kAlign - 1) / kAlign * kAlign - prelude;
  if (padded > 0xffff) {
    prelude = kPreludeV2;
    padded = (prelude + header.size() + 1 + kAlign - 1) / kAlign * kAlign - prelude;
  }
  header.append(padded - header.size() - 1, ' ');
  header += '\n';
  std::string out(kMagic);
  out += char(prelude == kPreludeV1 ? 1 : 2);
  out += char(0);
  for (size_t i = 0; i < prelude - 8; ++i) out += char((header.size() >> (8 * i)) & 0xff);
  out += header;
  if (array.nbytes()) out.append(static_cast<const char*>(array.raw()), array.nbytes());
  return out;
}

Status write_npy(const std::string& path, const Array& array) {
  Expected<std::string> bytes = format_npy(array);
  if (!bytes) return bytes.status().with_context("cannot write '" + path + "'");
  return write_file(path, *bytes);
}

}  // namespace fusebox
