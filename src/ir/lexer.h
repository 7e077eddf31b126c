// The character-level side of the .fbir parser: a cursor over the text that skips blanks,
// reads names and numbers, and turns offsets into line:column for messages.
//
// Comments are blanked before lexing (blank_comments) rather than skipped here, so that attribute
// values, which attr_text.h parses straight from the text, see them as blanks too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace fusebox {

// `text` with every `//` comment (outside string literals) replaced by spaces: the same length,
// the same line breaks, so offsets, lines and columns stay those of the original.
std::string blank_comments(std::string_view text);

// One character as it should appear in a message: itself when printable, else \xNN.
std::string printable_char(char c);

class Lexer {
 public:
  // `first_line` is the line number of the text's first line (split files keep whole-file lines).
  Lexer(std::string_view text, int first_line);

  std::string_view text() const { return text_; }
  size_t pos() const { return pos_; }
  void set_pos(size_t pos) { pos_ = pos < text_.size() ? pos : text_.size(); }

  // Skips blanks and returns the offset of the next character.
  size_t skip_blanks();
  bool at_end() { return skip_blanks() >= text_.size(); }
  char peek() { return at_end() ? '\0' : text_[pos_]; }
  // The character right at the cursor, without skipping blanks.
  char peek_raw() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool consume(char c);
  bool consume(std::string_view s);
  // A keyword: `word` not followed by a name character.
  bool consume_word(std::string_view word);

  // [A-Za-z_][A-Za-z0-9_.]* after blanks; empty when the next character cannot start one.
  std::string_view identifier();
  // [A-Za-z0-9_.]+ at the cursor, no blanks skipped (the part after '%' or '@').
  std::string_view name();
  // Decimal digits at the cursor, no blanks skipped. False (cursor unmoved) when there are none;
  // *overflow is set when the number does not fit in int64.
  bool integer(int64_t* value, bool* overflow);

  // What the next token looks like, for "expected X, found Y" messages.
  std::string describe_next();

  SourceLoc loc(size_t offset) const;

 private:
  std::string_view text_;
  size_t pos_ = 0;
  int first_line_ = 1;
  std::vector<size_t> line_starts_;
};

}  // namespace fusebox
