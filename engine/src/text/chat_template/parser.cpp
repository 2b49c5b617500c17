#include "text/chat_template/parser.h"

#include <algorithm>

#include "text/chat_template.h"

namespace petrel::text::chat_template_detail {

bool known_filter(std::string_view name) {
  static const char* const kFilters[] = {
      "trim", "tojson", "length", "count", "lower", "upper", "first", "last", "join", "default", "d",
      "string", "int", "float", "items", "capitalize", "title", "replace", "list", "reverse", "select",
      "reject", "selectattr", "rejectattr", "map", "abs"};
  for (const char* f : kFilters)
    if (name == f) return true;
  return false;
}
bool known_test(std::string_view name) {
  static const char* const kTests[] = {
      "defined", "undefined", "none", "string", "number", "integer", "float", "boolean", "true", "false",
      "iterable", "mapping", "sequence", "equalto", "eq", "==", "ne", "!=", "odd", "even", "divisibleby",
      "lower", "upper", "in"};
  for (const char* t : kTests)
    if (name == t) return true;
  return false;
}

namespace {

constexpr int kMaxExpressionDepth = 2 * ChatTemplate::kMaxNesting;  // nodes under nodes in one expression

bool known_function(std::string_view name) { return name == "raise_exception" || name == "namespace" || name == "range"; }
bool known_method(std::string_view name) {
  static const char* const kMethods[] = {
      "strip", "lstrip", "rstrip", "split", "startswith", "endswith", "upper", "lower", "replace",
      "title", "capitalize", "get", "items", "keys", "values"};
  for (const char* m : kMethods)
    if (name == m) return true;
  return false;
}

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const std::string& source) : tokens_(tokens), source_(source) {}

  // Where the error run() returned is.
  size_t error_offset() const { return error_offset_; }

  Status run(Body& root) {
    struct Open {
      Node* node;
      Body* body;
    };
    std::vector<Open> stack;
    Body* body = &root;
    while (peek().kind != Tok::kEnd) {
      const Token& token = next();
      if (token.kind == Tok::kText) {
        auto node = std::make_unique<Node>();
        node->kind = NodeKind::kText;
        node->offset = token.offset;
        node->text = token.text;
        body->push_back(std::move(node));
        continue;
      }
      if (token.kind == Tok::kVarBegin) {
        auto node = std::make_unique<Node>();
        node->kind = NodeKind::kOutput;
        node->offset = token.offset;
        if (!parse_expression(node->expr)) return error_;
        if (!expect(Tok::kVarEnd, "'}}'")) return error_;
        body->push_back(std::move(node));
        continue;
      }
      // {% statement %}
      const Token& keyword = peek();
      if (keyword.kind != Tok::kName) return fail(keyword.offset, "expected a statement name after '{%'");
      next();
      const std::string& word = keyword.text;
      if (word == "set") {
        auto node = std::make_unique<Node>();
        node->kind = NodeKind::kSet;
        node->offset = keyword.offset;
        const Token& target = next();
        if (target.kind != Tok::kName) return fail(target.offset, "expected a variable name after 'set'");
        node->target = target.text;
        if (is_op(".")) {
          next();
          const Token& attribute = next();
          if (attribute.kind != Tok::kName) return fail(attribute.offset, "expected an attribute name after '.'");
          node->attribute = attribute.text;
        }
        if (is_op(",")) return fail(peek().offset, "'{% set a, b = ... %}' (unpacking) is not supported");
        if (!is_op("=")) return fail(peek().offset, "'{% set %}' blocks ({% endset %}) are not supported; expected '='");
        next();
        if (!parse_expression(node->expr)) return error_;
        body->push_back(std::move(node));
      } else if (word == "if") {
        auto node = std::make_unique<Node>();
        node->kind = NodeKind::kIf;
        node->offset = keyword.offset;
        ExprPtr condition;
        if (!parse_expression(condition)) return error_;
        node->branches.emplace_back(std::move(condition), Body{});
        Node* open = node.get();
        body->push_back(std::move(node));
        if (static_cast<int>(stack.size()) >= ChatTemplate::kMaxNesting)
          return fail(keyword.offset, "blocks nested more than " + std::to_string(ChatTemplate::kMaxNesting) + " deep");
        stack.push_back({open, body});
        body = &open->branches.back().second;
      } else if (word == "elif" || word == "else") {
        if (stack.empty()) return fail(keyword.offset, "'{% " + word + " %}' outside '{% if %}' / '{% for %}'");
        Node* open = stack.back().node;
        if (open->kind == NodeKind::kFor) {
          if (word == "elif" || open->in_else) return fail(keyword.offset, "unexpected '{% " + word + " %}' in '{% for %}'");
          open->in_else = true;
          body = &open->else_body;
        } else {
          if (!open->branches.back().first) return fail(keyword.offset, "'{% " + word + " %}' after '{% else %}'");
          ExprPtr condition;
          if (word == "elif" && !parse_expression(condition)) return error_;
          if (word == "else") {  // an else needs a placeholder-free branch: null condition
            open->branches.emplace_back(nullptr, Body{});
          } else {
            open->branches.emplace_back(std::move(condition), Body{});
          }
          body = &open->branches.back().second;
        }
      } else if (word == "endif" || word == "endfor") {
        const NodeKind expected = word == "endif" ? NodeKind::kIf : NodeKind::kFor;
        if (stack.empty() || stack.back().node->kind != expected)
          return fail(keyword.offset, "unexpected '{% " + word + " %}'" +
                                          (stack.empty() ? std::string() : " (the open block is '" + open_name(*stack.back().node) + "')"));
        body = stack.back().body;
        stack.pop_back();
      } else if (word == "for") {
        auto node = std::make_unique<Node>();
        node->kind = NodeKind::kFor;
        node->offset = keyword.offset;
        while (true) {
          const Token& target = next();
          if (target.kind != Tok::kName) return fail(target.offset, "expected a loop variable name after 'for'");
          node->targets.push_back(target.text);
          if (!is_op(",")) break;
          next();
        }
        if (!(peek().kind == Tok::kName && peek().text == "in")) return fail(peek().offset, "expected 'in' after the loop variables");
        next();
        if (!parse_or(node->expr)) return error_;  // no conditional expression: `if` filters the loop
        if (peek().kind == Tok::kName && peek().text == "if") {
          next();
          if (!parse_expression(node->loop_filter)) return error_;
        }
        if (peek().kind == Tok::kName && peek().text == "recursive") return fail(peek().offset, "recursive loops are not supported");
        Node* open = node.get();
        body->push_back(std::move(node));
        if (static_cast<int>(stack.size()) >= ChatTemplate::kMaxNesting)
          return fail(keyword.offset, "blocks nested more than " + std::to_string(ChatTemplate::kMaxNesting) + " deep");
        stack.push_back({open, body});
        body = &open->body;
      } else if (word == "break" || word == "continue") {
        bool in_loop = false;
        for (const Open& o : stack) in_loop = in_loop || o.node->kind == NodeKind::kFor;
        if (!in_loop) return fail(keyword.offset, "'{% " + word + " %}' outside a loop");
        auto node = std::make_unique<Node>();
        node->kind = word == "break" ? NodeKind::kBreak : NodeKind::kContinue;
        node->offset = keyword.offset;
        body->push_back(std::move(node));
      } else {
        static const char* const kKnownUnsupported[] = {
            "macro", "endmacro", "call", "endcall", "filter", "endfilter", "block", "endblock", "extends",
            "include", "import", "from", "raw", "endraw", "with", "endwith", "generation", "endgeneration",
            "endset", "do", "autoescape", "endautoescape", "trans"};
        for (const char* unsupported : kKnownUnsupported)
          if (word == unsupported) return fail(keyword.offset, "'{% " + word + " %}' is not supported");
        return fail(keyword.offset, "unknown statement '{% " + word + " %}'");
      }
      if (!expect(Tok::kBlockEnd, "'%}'")) return error_;
    }
    if (!stack.empty())
      return fail(stack.back().node->offset, "'{% " + open_name(*stack.back().node) + " %}' is never closed (no '{% end" +
                                                 open_name(*stack.back().node) + " %}')");
    return Status::ok();
  }

 private:
  static std::string open_name(const Node& node) { return node.kind == NodeKind::kIf ? "if" : "for"; }

  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(at_ + ahead, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& t = tokens_[at_];
    if (at_ + 1 < tokens_.size()) ++at_;
    return t;
  }
  bool is_op(const char* op, size_t ahead = 0) const { return peek(ahead).kind == Tok::kOp && peek(ahead).text == op; }
  bool is_name(const char* name) const { return peek().kind == Tok::kName && peek().text == name; }

  Error fail(size_t offset, const std::string& what) {
    error_ = Error{ErrorCode::kFormat, "chat template " + line_column(source_, offset) + ": " + what};
    error_offset_ = offset;
    return error_;
  }
  bool failed(size_t offset, const std::string& what) {
    fail(offset, what);
    return false;
  }
  bool expect(Tok kind, const char* what) {
    if (peek().kind == kind) {
      next();
      return true;
    }
    return failed(peek().offset, std::string("expected ") + what + describe_found());
  }
  bool expect_op(const char* op) {
    if (is_op(op)) {
      next();
      return true;
    }
    return failed(peek().offset, std::string("expected '") + op + "'" + describe_found());
  }
  std::string describe_found() const {
    const Token& t = peek();
    switch (t.kind) {
      case Tok::kEnd: return " before the end of the template";
      case Tok::kBlockEnd: return ", found '%}'";
      case Tok::kVarEnd: return ", found '}}'";
      case Tok::kName: case Tok::kOp: return ", found '" + t.text + "'";
      case Tok::kString: return ", found a string";
      default: return "";
    }
  }

  // A node over `children`: its depth is checked here, so evaluating a left-deep chain
  // (`a + b + c + ...`, parsed by loops) is bounded too.
  bool make(ExprPtr& out, ExprKind kind, size_t offset, std::vector<ExprPtr> children) {
    out = std::make_unique<Expr>();
    out->kind = kind;
    out->offset = offset;
    for (const ExprPtr& c : children)
      if (c) out->depth = std::max(out->depth, c->depth + 1);
    out->args = std::move(children);
    if (out->depth > kMaxExpressionDepth)
      return failed(offset, "expression nested more than " + std::to_string(kMaxExpressionDepth) + " deep");
    return true;
  }
  bool make2(ExprPtr& out, ExprKind kind, size_t offset, ExprPtr a, ExprPtr b) {
    std::vector<ExprPtr> children;
    children.push_back(std::move(a));
    children.push_back(std::move(b));
    return make(out, kind, offset, std::move(children));
  }

  struct DepthGuard {
    explicit DepthGuard(int& d) : depth(d) { ++depth; }
    ~DepthGuard() { --depth; }
    int& depth;
  };
  bool too_deep() {
    if (recursion_ <= kMaxExpressionDepth) return false;
    fail(peek().offset, "expression nested more than " + std::to_string(kMaxExpressionDepth) + " deep");
    return true;
  }

  bool parse_expression(ExprPtr& out) {
    DepthGuard guard(recursion_);
    if (too_deep()) return false;
    if (!parse_or(out)) return false;
    while (is_name("if")) {
      const size_t offset = next().offset;
      ExprPtr condition, otherwise;
      if (!parse_or(condition)) return false;
      if (is_name("else")) {
        next();
        if (!parse_expression(otherwise)) return false;
      }
      std::vector<ExprPtr> children;
      children.push_back(std::move(out));
      children.push_back(std::move(condition));
      children.push_back(std::move(otherwise));
      if (!make(out, ExprKind::kConditional, offset, std::move(children))) return false;
    }
    return true;
  }
  bool parse_or(ExprPtr& out) {
    if (!parse_and(out)) return false;
    while (is_name("or")) {
      const size_t offset = next().offset;
      ExprPtr right;
      if (!parse_and(right) || !make2(out, ExprKind::kOr, offset, std::move(out), std::move(right))) return false;
    }
    return true;
  }
  bool parse_and(ExprPtr& out) {
    if (!parse_not(out)) return false;
    while (is_name("and")) {
      const size_t offset = next().offset;
      ExprPtr right;
      if (!parse_not(right) || !make2(out, ExprKind::kAnd, offset, std::move(out), std::move(right))) return false;
    }
    return true;
  }
  bool parse_not(ExprPtr& out) {
    if (is_name("not")) {
      DepthGuard guard(recursion_);
      if (too_deep()) return false;
      const size_t offset = next().offset;
      ExprPtr operand;
      if (!parse_not(operand)) return false;
      return make2(out, ExprKind::kNot, offset, std::move(operand), nullptr);
    }
    return parse_compare(out);
  }
  bool parse_compare(ExprPtr& out) {
    ExprPtr first;
    if (!parse_math1(first)) return false;
    std::vector<ExprPtr> operands;
    std::vector<std::string> ops;
    const size_t offset = peek().offset;
    while (true) {
      std::string op;
      if (peek().kind == Tok::kOp && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                      peek().text == "<=" || peek().text == ">" || peek().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && peek(1).kind == Tok::kName && peek(1).text == "in") {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      ExprPtr right;
      if (!parse_math1(right)) return false;
      if (operands.empty()) operands.push_back(std::move(first));
      operands.push_back(std::move(right));
      ops.push_back(op);
    }
    if (operands.empty()) {
      out = std::move(first);
      return true;
    }
    if (!make(out, ExprKind::kCompare, offset, std::move(operands))) return false;
    out->ops = std::move(ops);
    return true;
  }
  bool parse_math1(ExprPtr& out) {
    if (!parse_concat(out)) return false;
    while (is_op("+") || is_op("-")) {
      const Token& op = next();
      ExprPtr right;
      if (!parse_concat(right) || !make2(out, ExprKind::kBinary, op.offset, std::move(out), std::move(right))) return false;
      out->name = op.text;
    }
    return true;
  }
  bool parse_concat(ExprPtr& out) {
    if (!parse_math2(out)) return false;
    while (is_op("~")) {
      const size_t offset = next().offset;
      ExprPtr right;
      if (!parse_math2(right) || !make2(out, ExprKind::kConcat, offset, std::move(out), std::move(right))) return false;
    }
    return true;
  }
  bool parse_math2(ExprPtr& out) {
    if (!parse_pow(out)) return false;
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& op = next();
      ExprPtr right;
      if (!parse_pow(right) || !make2(out, ExprKind::kBinary, op.offset, std::move(out), std::move(right))) return false;
      out->name = op.text;
    }
    return true;
  }
  bool parse_pow(ExprPtr& out) {
    if (!parse_unary(out, true)) return false;
    if (is_op("**")) return failed(peek().offset, "the '**' operator is not supported");
    return true;
  }
  bool parse_unary(ExprPtr& out, bool with_filter) {
    if (is_op("-") || is_op("+")) {
      DepthGuard guard(recursion_);
      if (too_deep()) return false;
      const Token& op = next();
      ExprPtr operand;
      if (!parse_unary(operand, false)) return false;
      if (!make2(out, op.text == "-" ? ExprKind::kNeg : ExprKind::kPos, op.offset, std::move(operand), nullptr)) return false;
    } else {
      if (!parse_primary(out) || !parse_postfix(out)) return false;
    }
    return with_filter ? parse_filters_and_tests(out) : true;
  }

  bool parse_call_args(ExprPtr& call) {  // after '(' ; the arguments go after call->args' existing ones
    if (!expect_op("(")) return false;
    while (!is_op(")")) {
      if (is_op("*") || is_op("**")) return failed(peek().offset, "'*args' / '**kwargs' in a call are not supported");
      std::string keyword;
      if (peek().kind == Tok::kName && is_op("=", 1)) {
        keyword = next().text;
        next();
      } else if (!call->keywords.empty()) {
        return failed(peek().offset, "a positional argument after a keyword argument");
      }
      ExprPtr arg;
      if (!parse_expression(arg)) return false;
      call->depth = std::max(call->depth, arg->depth + 1);
      call->args.push_back(std::move(arg));
      if (!keyword.empty()) call->keywords.push_back(keyword);
      if (is_op(",")) next();
      else if (!is_op(")")) return failed(peek().offset, "expected ',' or ')' in the arguments" + describe_found());
    }
    next();
    if (call->depth > kMaxExpressionDepth)
      return failed(call->offset, "expression nested more than " + std::to_string(kMaxExpressionDepth) + " deep");
    return true;
  }

  bool parse_postfix(ExprPtr& out) {
    while (true) {
      if (is_op(".")) {
        const size_t offset = next().offset;
        const Token& name = next();
        if (name.kind == Tok::kInt) {
          ExprPtr index = std::make_unique<Expr>();
          index->kind = ExprKind::kLiteral;
          index->literal = Value::of_int(name.integer);
          if (!make2(out, ExprKind::kItem, offset, std::move(out), std::move(index))) return false;
          continue;
        }
        if (name.kind != Tok::kName) return failed(name.offset, "expected an attribute name after '.'");
        if (is_op("(")) {
          if (!known_method(name.text)) return failed(name.offset, "unknown method '" + name.text + "()'");
          if (!make2(out, ExprKind::kMethod, name.offset, std::move(out), nullptr)) return false;
          out->args.pop_back();
          out->name = name.text;
          if (!parse_call_args(out)) return false;
        } else {
          if (!make2(out, ExprKind::kAttr, offset, std::move(out), nullptr)) return false;
          out->args.pop_back();
          out->name = name.text;
        }
      } else if (is_op("[")) {
        const size_t offset = next().offset;
        ExprPtr bounds[3];
        bool slice = false;
        for (int part = 0; part < 3; ++part) {
          if (!is_op(":") && !is_op("]")) {
            if (!parse_expression(bounds[part])) return false;
          }
          if (is_op(":") && part < 2) {
            next();
            slice = true;
          } else {
            break;
          }
        }
        if (!expect_op("]")) return false;
        if (!slice) {
          if (!bounds[0]) return failed(offset, "empty subscript '[]'");
          if (!make2(out, ExprKind::kItem, offset, std::move(out), std::move(bounds[0]))) return false;
        } else {
          std::vector<ExprPtr> children;
          children.push_back(std::move(out));
          for (ExprPtr& b : bounds) children.push_back(std::move(b));
          if (!make(out, ExprKind::kSlice, offset, std::move(children))) return false;
        }
      } else if (is_op("(")) {
        if (out->kind != ExprKind::kName)
          return failed(peek().offset, "only functions and methods can be called");
        if (!known_function(out->name)) return failed(out->offset, "unknown function '" + out->name + "()'");
        out->kind = ExprKind::kCall;
        if (!parse_call_args(out)) return false;
      } else {
        return true;
      }
    }
  }

  bool parse_filters_and_tests(ExprPtr& out) {
    while (true) {
      if (is_op("|")) {
        next();
        const Token& name = next();
        if (name.kind != Tok::kName) return failed(name.offset, "expected a filter name after '|'");
        if (!known_filter(name.text)) return failed(name.offset, "unknown filter '" + name.text + "'");
        if (!make2(out, ExprKind::kFilter, name.offset, std::move(out), nullptr)) return false;
        out->args.pop_back();
        out->name = name.text;
        if (is_op("(") && !parse_call_args(out)) return false;
      } else if (is_name("is")) {
        next();
        bool negate = false;
        if (is_name("not")) next(), negate = true;
        const Token& name = next();
        if (name.kind != Tok::kName && !(name.kind == Tok::kOp && (name.text == "==" || name.text == "!=")))
          return failed(name.offset, "expected a test name after 'is'");
        if (!known_test(name.text)) return failed(name.offset, "unknown test '" + name.text + "'");
        if (!make2(out, ExprKind::kTest, name.offset, std::move(out), nullptr)) return false;
        out->args.pop_back();
        out->name = name.text;
        out->negate = negate;
        if (is_op("(")) {
          if (!parse_call_args(out)) return false;
        } else {
          const Token& t = peek();
          const bool starts_primary = (t.kind == Tok::kName && t.text != "else" && t.text != "or" && t.text != "and" &&
                                       t.text != "if" && t.text != "is" && t.text != "not" && t.text != "in") ||
                                      t.kind == Tok::kString || t.kind == Tok::kInt || t.kind == Tok::kFloat ||
                                      (t.kind == Tok::kOp && (t.text == "[" || t.text == "{"));
          if (starts_primary) {
            ExprPtr arg;
            if (!parse_primary(arg) || !parse_postfix(arg)) return false;
            out->depth = std::max(out->depth, arg->depth + 1);
            out->args.push_back(std::move(arg));
          }
        }
      } else {
        return true;
      }
    }
  }

  bool parse_primary(ExprPtr& out) {
    DepthGuard guard(recursion_);
    if (too_deep()) return false;
    const Token& t = next();
    out = std::make_unique<Expr>();
    out->offset = t.offset;
    switch (t.kind) {
      case Tok::kString: {
        out->kind = ExprKind::kLiteral;
        std::string value = t.text;
        while (peek().kind == Tok::kString) value += next().text;  // 'a' 'b' is 'ab'
        out->literal = Value::of_string(std::move(value));
        return true;
      }
      case Tok::kInt:
        out->kind = ExprKind::kLiteral;
        out->literal = Value::of_int(t.integer);
        return true;
      case Tok::kFloat:
        out->kind = ExprKind::kLiteral;
        out->literal = Value::of_float(t.number);
        return true;
      case Tok::kName:
        out->kind = ExprKind::kLiteral;
        if (t.text == "true" || t.text == "True") out->literal = Value::of_bool(true);
        else if (t.text == "false" || t.text == "False") out->literal = Value::of_bool(false);
        else if (t.text == "none" || t.text == "None") out->literal = Value::none();
        else {
          out->kind = ExprKind::kName;
          out->name = t.text;
        }
        return true;
      case Tok::kOp:
        if (t.text == "(") {
          std::vector<ExprPtr> items;
          bool tuple = false;
          while (!is_op(")")) {
            ExprPtr item;
            if (!parse_expression(item)) return false;
            items.push_back(std::move(item));
            if (!is_op(",")) break;
            next();
            tuple = true;
          }
          if (!expect_op(")")) return false;
          if (items.empty()) tuple = true;
          if (!tuple) {
            out = std::move(items[0]);
            return true;
          }
          if (!make(out, ExprKind::kList, t.offset, std::move(items))) return false;
          out->name = "tuple";
          return true;
        }
        if (t.text == "[") {
          std::vector<ExprPtr> items;
          while (!is_op("]")) {
            ExprPtr item;
            if (!parse_expression(item)) return false;
            items.push_back(std::move(item));
            if (!is_op(",")) break;
            next();
          }
          if (!expect_op("]")) return false;
          return make(out, ExprKind::kList, t.offset, std::move(items));
        }
        if (t.text == "{") {
          std::vector<ExprPtr> items;  // key, value, key, value, ...
          while (!is_op("}")) {
            ExprPtr key, value;
            if (!parse_expression(key) || !expect_op(":") || !parse_expression(value)) return false;
            items.push_back(std::move(key));
            items.push_back(std::move(value));
            if (!is_op(",")) break;
            next();
          }
          if (!expect_op("}")) return false;
          return make(out, ExprKind::kDict, t.offset, std::move(items));
        }
        return failed(t.offset, "unexpected '" + t.text + "' in an expression");
      case Tok::kEnd: return failed(t.offset, "unexpected end of the template in an expression");
      case Tok::kBlockEnd: return failed(t.offset, "unexpected '%}' in an expression");
      case Tok::kVarEnd: return failed(t.offset, "unexpected '}}' in an expression");
      default: return failed(t.offset, "unexpected token in an expression");
    }
  }

  const std::vector<Token>& tokens_;
  const std::string& source_;
  size_t at_ = 0;
  int recursion_ = 0;
  Error error_{ErrorCode::kFormat, ""};
  size_t error_offset_ = 0;
};

}  // namespace

Status parse_tokens(const std::vector<Token>& tokens, const std::string& source, Body& root, size_t* error_offset) {
  Parser parser(tokens, source);
  Status parsed = parser.run(root);
  *error_offset = parser.error_offset();
  return parsed;
}

}  // namespace petrel::text::chat_template_detail
