// The lexer of chat templates: a template's source as tokens (the texts between tags,
// and each tag's names, operators and literals) under Jinja's whitespace rules
// (trim_blocks, lstrip_blocks, `-`/`+` markers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "petrel/status.h"

namespace petrel::text::chat_template_detail {

enum class Tok : uint8_t { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEnd };
struct Token {
  Tok kind;
  std::string text;  // text, name, string value or operator
  size_t offset;     // into the normalized source
  int64_t integer = 0;
  double number = 0;
};

// The source as the lexer reads it: Jinja's line breaks made \n, one trailing newline dropped.
std::string normalize_newlines(std::string_view source);

// "line:column" of a byte offset into the normalized source, for errors.
std::string line_column(std::string_view source, size_t offset);

// The tokens of the normalized `source`, a kEnd last. Past ChatTemplate::kMaxTokens
// tokens lexing stops: *stopped_at is where (the kEnd's offset), else std::string::npos.
// Errors are kFormat with "chat template line:column: ...".
Status lex(const std::string& source, std::vector<Token>& tokens, size_t* stopped_at);

}  // namespace petrel::text::chat_template_detail
