#include "ir/layout.h"

#include <cstring>
#include <string_view>

#include "ir/check.h"

namespace fusebox {

namespace {

// One slab: channels [cb*b, cb*b+b) of image n. `to_blocked` picks the direction. Elements are
// moved as fixed-size words, so every dtype of one width shares the loop.
template <typename Word>
void move_slab(const uint8_t* src, uint8_t* dst, int64_t hw, int64_t b, bool to_blocked) {
  const Word* s = reinterpret_cast<const Word*>(src);
  Word* d = reinterpret_cast<Word*>(dst);
  for (int64_t i = 0; i < hw; ++i) {
    for (int64_t lane = 0; lane < b; ++lane) {
      if (to_blocked) d[i * b + lane] = s[lane * hw + i];
      else d[lane * hw + i] = s[i * b + lane];
    }
  }
}

void move(const Array& from, Array& to, const std::vector<int64_t>& plain, int64_t b, bool to_blocked) {
  const int64_t n = plain[0], c = plain[1], hw = plain[2] * plain[3];
  const size_t esize = size_t(dtype_size(from.dtype()));
  const size_t slab = size_t(b * hw) * esize;
  const uint8_t* src = static_cast<const uint8_t*>(from.raw());
  uint8_t* dst = static_cast<uint8_t*>(to.raw());
  for (int64_t s = 0; s < n * (c / b); ++s) {
    const uint8_t* in = src + size_t(s) * slab;
    uint8_t* out = dst + size_t(s) * slab;
    switch (esize) {
      case 1: move_slab<uint8_t>(in, out, hw, b, to_blocked); break;
      case 2: move_slab<uint16_t>(in, out, hw, b, to_blocked); break;
      case 4: move_slab<uint32_t>(in, out, hw, b, to_blocked); break;
      case 8: move_slab<uint64_t>(in, out, hw, b, to_blocked); break;
      default: FUSEBOX_CHECK(false) << "layout: element size " << esize;
    }
  }
}

}  // namespace

namespace {

bool layout_is(const Node& n, std::string_view name) {
  const AttrValue* v = n.attrs.find("layout");
  return v && std::holds_alternative<std::string>(*v) && std::get<std::string>(*v) == name;
}

}  // namespace

bool has_nchwc_layout(const Node& n) { return layout_is(n, "nchwc") || layout_is(n, "nhwc"); }

bool has_nhwc_layout(const Node& n) { return layout_is(n, "nhwc"); }

std::optional<Shape> nchwc_shape(const Shape& plain, int64_t block) {
  if (plain.size() != 4 || block < 1 || block > kMaxNchwcBlock) return std::nullopt;
  const Dim& c = plain[1];
  if (!c.is_static() || c.value() % block != 0) return std::nullopt;
  return Shape{plain[0], Dim(c.value() / block), plain[2], plain[3], Dim(block)};
}

std::optional<Shape> nchw_shape(const Shape& blocked) {
  if (blocked.size() != 5 || !blocked[4].is_static() || blocked[4].value() < 1) return std::nullopt;
  Dim c = blocked[1].is_static() ? Dim(blocked[1].value() * blocked[4].value()) : Dim::dynamic();
  return Shape{blocked[0], c, blocked[2], blocked[3]};
}

void copy_to_nchwc(const Array& plain, Array& out) {
  const auto& p = plain.shape();
  FUSEBOX_CHECK(p.size() == 4 && out.rank() == 5 && out.dtype() == plain.dtype()) << "to_nchwc: bad shapes";
  const int64_t b = out.shape()[4];
  FUSEBOX_CHECK(b > 0 && p[1] % b == 0 && out.shape()[1] == p[1] / b && out.numel() == plain.numel())
      << "to_nchwc: " << plain.type_string() << " -> " << out.type_string();
  move(plain, out, p, b, true);
}

void copy_to_nchw(const Array& blocked, Array& out) {
  const auto& p = out.shape();
  FUSEBOX_CHECK(blocked.rank() == 5 && p.size() == 4 && out.dtype() == blocked.dtype()) << "to_nchw: bad shapes";
  const int64_t b = blocked.shape()[4];
  FUSEBOX_CHECK(b > 0 && p[1] == blocked.shape()[1] * b && out.numel() == blocked.numel())
      << "to_nchw: " << blocked.type_string() << " -> " << out.type_string();
  move(blocked, out, p, b, false);
}

Array to_nchwc(const Array& plain, int64_t block) {
  const auto& p = plain.shape();
  Array out(plain.dtype(), {p[0], p[1] / block, p[2], p[3], block});
  copy_to_nchwc(plain, out);
  return out;
}

Array to_nchw(const Array& blocked) {
  const auto& s = blocked.shape();
  Array out(blocked.dtype(), {s[0], s[1] * s[4], s[2], s[3]});
  copy_to_nchw(blocked, out);
  return out;
}

}  // namespace fusebox
