#include "text/chat_template/lexer.h"

#include <cstring>

#include "core/c_number.h"
#include "core/utf8.h"
#include "text/chat_template.h"
#include "text/chat_template/python_text.h"

namespace petrel::text::chat_template_detail {

std::string line_column(std::string_view source, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < source.size(); ++i) {
    if (source[i] == '\n') ++line, column = 1;
    else if ((static_cast<uint8_t>(source[i]) & 0xc0) != 0x80) ++column;
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

// Jinja's lexer: only \r\n, \r and \n are line breaks (all become \n), and one
// trailing newline is dropped (keep_trailing_newline=False).
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

namespace {

bool is_ascii_alnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

class Lexer {
 public:
  explicit Lexer(const std::string& src) : src_(src) {}

  Status run(std::vector<Token>& tokens) {
    size_t pos = 0;
    bool line_starting = true;  // the text ahead starts a line (lstrip_blocks applies at its start)
    while (pos <= src_.size()) {
      if (tokens.size() >= ChatTemplate::kMaxTokens) {
        stopped_at_ = pos;
        break;
      }
      size_t tag = src_.find('{', pos);
      while (tag != std::string::npos &&
             !(tag + 1 < src_.size() && (src_[tag + 1] == '{' || src_[tag + 1] == '%' || src_[tag + 1] == '#')))
        tag = src_.find('{', tag + 1);
      std::string_view text(src_.data() + pos, (tag == std::string::npos ? src_.size() : tag) - pos);
      if (tag == std::string::npos) {
        if (!text.empty()) tokens.push_back({Tok::kText, std::string(text), pos});
        break;
      }
      const char type = src_[tag + 1];
      const char marker = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (marker == '-') {
        text = rstrip_space(text);
      } else if (marker != '+' && type != '{') {  // lstrip_blocks: not for {{ }}
        const size_t line_start = text.rfind('\n') == std::string_view::npos ? 0 : text.rfind('\n') + 1;
        if (line_start > 0 || line_starting) {
          if (lstrip_space(text.substr(line_start)).empty()) text = text.substr(0, line_start);
        }
      }
      if (!text.empty()) tokens.push_back({Tok::kText, std::string(text), pos});
      size_t inner = tag + 2 + ((marker == '-' || marker == '+') ? 1 : 0);
      size_t after = 0;
      if (type == '#') {
        const size_t end = src_.find("#}", inner);
        if (end == std::string::npos) return fail(tag, "unterminated comment '{#' (no '#}')");
        const char end_marker = end > inner && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
        after = skip_after(end + 2, end_marker, true);
      } else {
        tokens.push_back({type == '{' ? Tok::kVarBegin : Tok::kBlockBegin, "", tag});
        Status s = lex_tag(tokens, tag, inner, type == '{', &after);
        if (!s) return s;
        if (stopped_at_ != std::string::npos) break;
      }
      line_starting = after > 0 && src_[after - 1] == '\n';
      pos = after;
      if (pos == src_.size()) break;
    }
    tokens.push_back({Tok::kEnd, "", stopped_at_ != std::string::npos ? stopped_at_ : src_.size()});
    return Status::ok();
  }

  // Where lexing stopped at kMaxTokens tokens (their kEnd is there), or npos.
  size_t stopped_at() const { return stopped_at_; }

 private:
  Status fail(size_t offset, const std::string& what) {
    return Error{ErrorCode::kFormat, "chat template " + line_column(src_, offset) + ": " + what};
  }

  // After a closing tag: `-` strips all whitespace, `+` nothing, else trim_blocks
  // drops one newline after a block or comment.
  size_t skip_after(size_t after, char marker, bool is_block) {
    if (marker == '-') {
      size_t length = 0;
      while (after < src_.size() && is_python_space_at(src_, after, &length)) after += length;
    } else if (marker != '+' && is_block && after < src_.size() && src_[after] == '\n') {
      ++after;
    }
    return after;
  }

  Status lex_tag(std::vector<Token>& tokens, size_t tag, size_t pos, bool variable, size_t* after) {
    std::vector<char> brackets;
    const char* close = variable ? "}}" : "%}";
    while (true) {
      while (pos < src_.size() && (src_[pos] == ' ' || src_[pos] == '\t' || src_[pos] == '\n' || src_[pos] == '\r' ||
                                   src_[pos] == '\f' || src_[pos] == '\v'))
        ++pos;
      if (tokens.size() >= ChatTemplate::kMaxTokens) {
        stopped_at_ = pos;
        return Status::ok();
      }
      if (pos >= src_.size()) return fail(tag, std::string("unterminated tag (no '") + close + "')");
      if (brackets.empty()) {
        char marker = '\0';
        size_t at = pos;
        if ((src_[at] == '-' || src_[at] == '+') && src_.compare(at + 1, 2, close) == 0) marker = src_[at], ++at;
        if (src_.compare(at, 2, close) == 0) {
          tokens.push_back({variable ? Tok::kVarEnd : Tok::kBlockEnd, "", pos});
          *after = skip_after(at + 2, marker, !variable);
          return Status::ok();
        }
      }
      const char c = src_[pos];
      const size_t start = pos;
      if (c == '\'' || c == '"') {
        std::string value;
        ++pos;
        while (pos < src_.size() && src_[pos] != c) {
          if (src_[pos] == '\\' && pos + 1 < src_.size()) {
            Status s = unescape(pos, value);
            if (!s) return s;
          } else {
            value += src_[pos++];
          }
        }
        if (pos >= src_.size()) return fail(start, "unterminated string literal");
        ++pos;
        tokens.push_back({Tok::kString, std::move(value), start});
      } else if (c >= '0' && c <= '9') {
        while (pos < src_.size() && ((src_[pos] >= '0' && src_[pos] <= '9') || src_[pos] == '_')) ++pos;
        bool is_float = false;
        if (pos + 1 < src_.size() && src_[pos] == '.' && src_[pos + 1] >= '0' && src_[pos + 1] <= '9') {
          is_float = true;
          ++pos;
          while (pos < src_.size() && ((src_[pos] >= '0' && src_[pos] <= '9') || src_[pos] == '_')) ++pos;
        }
        if (pos < src_.size() && (src_[pos] == 'e' || src_[pos] == 'E')) {
          size_t e = pos + 1;
          if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
          if (e < src_.size() && src_[e] >= '0' && src_[e] <= '9') {
            is_float = true;
            pos = e;
            while (pos < src_.size() && src_[pos] >= '0' && src_[pos] <= '9') ++pos;
          }
        }
        std::string digits;
        for (size_t i = start; i < pos; ++i)
          if (src_[i] != '_') digits += src_[i];
        Token token{is_float ? Tok::kFloat : Tok::kInt, digits, start};
        if (is_float) {
          token.number = core::parse_c_double(digits);
        } else {
          int64_t v = 0;
          for (char d : digits)
            if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, d - '0', &v))
              return fail(start, "integer literal out of range");
          token.integer = v;
        }
        tokens.push_back(std::move(token));
      } else if (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
        while (pos < src_.size() && (src_[pos] == '_' || is_ascii_alnum(src_[pos]))) ++pos;
        tokens.push_back({Tok::kName, src_.substr(start, pos - start), start});
      } else {
        static const char* const kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (const char* two : kTwo)
          if (src_.compare(pos, 2, two) == 0) op = two;
        if (op.empty()) {
          if (!std::strchr("+-*/%~<>=()[]{},.:|", c) || c == '\0') {
            const detail::CodePoint cp = detail::utf8_decode(src_, pos);
            return fail(start, "unexpected character '" + src_.substr(pos, cp.length) + "' in a tag");
          }
          op = std::string(1, c);
        }
        pos += op.size();
        if (op == "(" || op == "[" || op == "{") {
          brackets.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
        } else if (op == ")" || op == "]" || op == "}") {
          if (brackets.empty() || brackets.back() != op[0]) return fail(start, "unbalanced '" + op + "'");
          brackets.pop_back();
        }
        tokens.push_back({Tok::kOp, std::move(op), start});
      }
    }
  }

  // Python's unicode-escape for a string literal's backslash at src_[pos].
  Status unescape(size_t& pos, std::string& value) {
    const size_t start = pos;
    const char e = src_[pos + 1];
    pos += 2;
    switch (e) {
      case 'n': value += '\n'; return Status::ok();
      case 't': value += '\t'; return Status::ok();
      case 'r': value += '\r'; return Status::ok();
      case '\\': value += '\\'; return Status::ok();
      case '\'': value += '\''; return Status::ok();
      case '"': value += '"'; return Status::ok();
      case 'a': value += '\a'; return Status::ok();
      case 'b': value += '\b'; return Status::ok();
      case 'f': value += '\f'; return Status::ok();
      case 'v': value += '\v'; return Status::ok();
      case '\n': return Status::ok();  // a continued line
      case 'x': case 'u': case 'U': {
        const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        char32_t c = 0;
        for (size_t i = 0; i < digits; ++i, ++pos) {
          const char h = pos < src_.size() ? src_[pos] : '\0';
          const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
          if (d < 0) return fail(start, std::string("truncated \\") + e + " escape in a string literal");
          c = c * 16 + static_cast<char32_t>(d);
        }
        if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return fail(start, "escape out of Unicode's range");
        detail::append_utf8(value, c);
        return Status::ok();
      }
      default:
        if (e >= '0' && e <= '7') {  // octal, up to 3 digits
          char32_t c = static_cast<char32_t>(e - '0');
          for (int i = 0; i < 2 && pos < src_.size() && src_[pos] >= '0' && src_[pos] <= '7'; ++i) c = c * 8 + static_cast<char32_t>(src_[pos++] - '0');
          detail::append_utf8(value, c);
          return Status::ok();
        }
        value += '\\';  // Python keeps an unknown escape as written
        --pos;
        return Status::ok();
    }
  }

  const std::string& src_;
  size_t stopped_at_ = std::string::npos;
};

}  // namespace

Status lex(const std::string& source, std::vector<Token>& tokens, size_t* stopped_at) {
  Lexer lexer(source);
  Status lexed = lexer.run(tokens);
  *stopped_at = lexer.stopped_at();
  return lexed;
}

}  // namespace petrel::text::chat_template_detail
