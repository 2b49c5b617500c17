// The parser of chat templates: tokens as a tree of statements and expressions. Open
// blocks are kept on an explicit stack (at most ChatTemplate::kMaxNesting deep), and an
// expression is parsed by recursion bounded at twice that depth.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "petrel/status.h"
#include "text/chat_template/lexer.h"
#include "text/chat_template/value.h"

namespace petrel::text::chat_template_detail {

enum class ExprKind : uint8_t {
  kLiteral, kName, kList, kDict, kAttr, kItem, kSlice, kCall, kMethod, kFilter, kTest,
  kNeg, kPos, kNot, kBinary, kAnd, kOr, kCompare, kConditional, kConcat,
};
struct Expr {
  ExprKind kind;
  bool negate = false;  // kTest
  int depth = 1;
  size_t offset = 0;
  Value literal;
  std::string name;                  // name, attribute, function, method, filter, test, operator
  std::vector<std::unique_ptr<Expr>> args;        // children (may hold null for slice bounds / no else)
  std::vector<std::string> ops;      // kCompare: one per pair
  std::vector<std::string> keywords;  // calls: names of the last keywords.size() args
};
using ExprPtr = std::unique_ptr<Expr>;

enum class NodeKind : uint8_t { kText, kOutput, kIf, kFor, kSet, kBreak, kContinue };
struct Node;
using Body = std::vector<std::unique_ptr<Node>>;
struct Node {
  NodeKind kind;
  size_t offset = 0;
  std::string text;                                 // kText
  ExprPtr expr;                                     // kOutput, kSet value, kFor iterable
  std::vector<std::pair<ExprPtr, Body>> branches;   // kIf; an else has no condition
  std::vector<std::string> targets;                 // kFor
  ExprPtr loop_filter;                              // kFor ... if cond
  Body body, else_body;                             // kFor
  bool in_else = false;                             // kFor while parsing
  std::string target, attribute;                    // kSet: name or ns.attribute
};

struct Program {
  std::string source;  // normalized (for line:column in errors)
  Body body;
};

// The filters and tests of the subset: the parser refuses other names, as do map() and
// select() / reject() for the names they are given.
bool known_filter(std::string_view name);
bool known_test(std::string_view name);

// The statements of lex()'s `tokens` into `root`. Errors are kFormat with "chat template
// line:column: ..."; *error_offset is where the error is.
Status parse_tokens(const std::vector<Token>& tokens, const std::string& source, Body& root, size_t* error_offset);

}  // namespace petrel::text::chat_template_detail
