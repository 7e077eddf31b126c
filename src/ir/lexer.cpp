#include "ir/lexer.h"

#include <algorithm>

namespace fusebox {

namespace {

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c) || c == '.'; }

}  // namespace

std::string blank_comments(std::string_view text) {
  std::string out(text);
  bool in_string = false;
  for (size_t i = 0; i < out.size(); ++i) {
    char c = out[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '/' && i + 1 < out.size() && out[i + 1] == '/') {
      while (i < out.size() && out[i] != '\n') out[i++] = ' ';
    }
  }
  return out;
}

std::string printable_char(char c) {
  if (c >= 0x20 && c < 0x7f) return std::string(1, c);
  static const char kHex[] = "0123456789abcdef";
  unsigned char u = static_cast<unsigned char>(c);
  return std::string("\\x") + kHex[u >> 4] + kHex[u & 15];
}

Lexer::Lexer(std::string_view text, int first_line) : text_(text), first_line_(first_line) {
  line_starts_.push_back(0);
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') line_starts_.push_back(i + 1);
}

size_t Lexer::skip_blanks() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    ++pos_;
  }
  return pos_;
}

bool Lexer::consume(char c) {
  if (peek() != c) return false;
  ++pos_;
  return true;
}

bool Lexer::consume(std::string_view s) {
  skip_blanks();
  if (text_.substr(pos_, s.size()) != s) return false;
  pos_ += s.size();
  return true;
}

bool Lexer::consume_word(std::string_view word) {
  skip_blanks();
  if (text_.substr(pos_, word.size()) != word) return false;
  size_t end = pos_ + word.size();
  if (end < text_.size() && is_name_char(text_[end])) return false;
  pos_ = end;
  return true;
}

std::string_view Lexer::identifier() {
  skip_blanks();
  if (!is_name_start(peek_raw())) return {};
  size_t start = pos_;
  while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
  return text_.substr(start, pos_ - start);
}

std::string_view Lexer::name() {
  size_t start = pos_;
  while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
  return text_.substr(start, pos_ - start);
}

bool Lexer::integer(int64_t* value, bool* overflow) {
  if (!is_digit(peek_raw())) return false;
  *value = 0;
  *overflow = false;
  while (pos_ < text_.size() && is_digit(text_[pos_])) {
    int digit = text_[pos_] - '0';
    if (*value > (INT64_MAX - digit) / 10) *overflow = true;
    if (!*overflow) *value = *value * 10 + digit;
    ++pos_;
  }
  return true;
}

std::string Lexer::describe_next() {
  size_t start = skip_blanks();
  if (start >= text_.size()) return "end of file";
  if (is_name_char(text_[start])) {
    size_t end = start;
    while (end < text_.size() && end - start < 24 && is_name_char(text_[end])) ++end;
    return "'" + std::string(text_.substr(start, end - start)) + "'";
  }
  if ((text_[start] == '%' || text_[start] == '@') && start + 1 < text_.size() &&
      is_name_char(text_[start + 1])) {
    size_t end = start + 1;
    while (end < text_.size() && end - start < 24 && is_name_char(text_[end])) ++end;
    return "'" + std::string(text_.substr(start, end - start)) + "'";
  }
  if (text_.substr(start, 2) == "->") return "'->'";
  return "'" + printable_char(text_[start]) + "'";
}

SourceLoc Lexer::loc(size_t offset) const {
  offset = std::min(offset, text_.size());
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
  size_t line = static_cast<size_t>(it - line_starts_.begin()) - 1;
  return SourceLoc{first_line_ + static_cast<int>(line), static_cast<int>(offset - line_starts_[line]) + 1};
}

}  // namespace fusebox
