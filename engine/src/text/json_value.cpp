#include "text/json_value.h"

#include <cmath>
#include <new>
#include <unordered_set>

#include "core/c_number.h"
#include "core/utf8.h"

namespace petrel::text {

namespace {

Error json_error(size_t at, const std::string& what) {
  return Error{ErrorCode::kInvalidArgument, "JSON byte " + std::to_string(at) + ": " + what};
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Reader {
 public:
  explicit Reader(std::string_view text) : t_(text) {}

  void skip_space() {
    while (at_ < t_.size() && is_space(t_[at_])) ++at_;
  }

  // A string literal starting at the opening quote; the decoded text into `out`.
  Status string(std::string& out) {
    const size_t start = at_++;
    for (;;) {
      if (at_ >= t_.size()) return json_error(start, "a string is not closed");
      const auto c = static_cast<unsigned char>(t_[at_]);
      if (c == '"') {
        ++at_;
        return Status::ok();
      }
      if (c < 0x20) return json_error(at_, "a control character in a string must be escaped");
      if (c == '\\') {
        if (at_ + 1 >= t_.size()) return json_error(at_, "a string is not closed");
        const char e = t_[at_ + 1];
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            uint32_t cp = 0;
            Status s = hex4(at_ + 2, &cp);
            if (!s) return s;
            size_t used = 6;
            if (cp >= 0xdc00 && cp <= 0xdfff) return json_error(at_, "a lone low surrogate escape");
            if (cp >= 0xd800 && cp <= 0xdbff) {
              uint32_t low = 0;
              if (at_ + 7 >= t_.size() || t_[at_ + 6] != '\\' || t_[at_ + 7] != 'u' || !hex4(at_ + 8, &low) ||
                  low < 0xdc00 || low > 0xdfff)
                return json_error(at_, "a high surrogate escape without its low surrogate");
              cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
              used = 12;
            }
            detail::append_utf8(out, static_cast<char32_t>(cp));
            at_ += used;
            continue;
          }
          default:
            return json_error(at_, "an unknown escape");
        }
        at_ += 2;
        continue;
      }
      if (c < 0x80) {
        out += static_cast<char>(c);
        ++at_;
        continue;
      }
      const size_t n = detail::utf8_sequence(t_, at_);
      if (n == 0) return json_error(at_, "text that is not UTF-8");
      out.append(t_.data() + at_, n);
      at_ += n;
    }
  }

  // A number in RFC 8259's grammar; its text into `out`.
  Status number(std::string& out) {
    const size_t start = at_;
    if (at_ < t_.size() && t_[at_] == '-') ++at_;
    const auto digits = [&]() {
      const size_t from = at_;
      while (at_ < t_.size() && t_[at_] >= '0' && t_[at_] <= '9') ++at_;
      return at_ - from;
    };
    if (at_ < t_.size() && t_[at_] == '0') {
      ++at_;
    } else if (digits() == 0) {
      return json_error(start, "a malformed number");
    }
    if (at_ < t_.size() && t_[at_] == '.') {
      ++at_;
      if (digits() == 0) return json_error(start, "a malformed number (no digit after '.')");
    }
    if (at_ < t_.size() && (t_[at_] == 'e' || t_[at_] == 'E')) {
      ++at_;
      if (at_ < t_.size() && (t_[at_] == '+' || t_[at_] == '-')) ++at_;
      if (digits() == 0) return json_error(start, "a malformed number (no digit in the exponent)");
    }
    out.assign(t_.data() + start, at_ - start);
    return Status::ok();
  }

  bool literal(std::string_view word) {
    if (t_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }

  size_t at() const { return at_; }
  bool done() const { return at_ >= t_.size(); }
  char peek() const { return t_[at_]; }
  void advance() { ++at_; }

 private:
  Status hex4(size_t from, uint32_t* value) const {
    if (from + 4 > t_.size()) return json_error(from, "a \\u escape needs four hex digits");
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) {
      const int d = hex_digit(t_[from + i]);
      if (d < 0) return json_error(from + i, "a \\u escape needs four hex digits");
      v = v << 4 | static_cast<uint32_t>(d);
    }
    *value = v;
    return Status::ok();
  }

  std::string_view t_;
  size_t at_ = 0;
};

}  // namespace

uint32_t JsonDocument::find(uint32_t i, std::string_view name) const {
  const Node& n = nodes_[i];
  if (n.kind != JsonKind::kObject) return UINT32_MAX;
  for (uint32_t k = 0; k < n.count; ++k)
    if (nodes_[keys_[n.first + k]].text == name) return children_[n.first + k];
  return UINT32_MAX;
}

double JsonDocument::number_value(uint32_t i) const { return core::parse_c_double(nodes_[i].text); }

bool JsonDocument::integer_value(uint32_t i, int64_t* value) const {
  const Node& n = nodes_[i];
  if (n.kind != JsonKind::kNumber) return false;
  const double v = number_value(i);
  constexpr double kExact = 9007199254740992.0;  // 2^53
  if (!std::isfinite(v) || v != std::floor(v) || v > kExact || v < -kExact) return false;
  *value = static_cast<int64_t>(v);
  return true;
}

Result<JsonDocument> parse_json(std::string_view text) {
  if (text.size() > kMaxJsonBytes)
    return json_error(kMaxJsonBytes, "the text is longer than the limit of " + std::to_string(kMaxJsonBytes) + " bytes");
  try {
    JsonDocument doc;
    Reader r(text);
    // The open containers (node index, where their members start in `pending`), and the
    // members read so far: key node (UINT32_MAX in an array) and value node.
    struct Open {
      uint32_t node;
      size_t begin;
      uint32_t key;  // the key whose value this container is (UINT32_MAX: none)
    };
    std::vector<Open> open;
    std::vector<uint32_t> pending_keys, pending_values;
    std::unordered_set<std::string_view> seen;
    uint32_t pending_key = UINT32_MAX;  // an object's key read, its value not yet
    bool after_separator = false;       // a ',' was the last token
    const auto new_node = [&](JsonKind kind, size_t at) -> Result<uint32_t> {
      if (doc.nodes_.size() >= kMaxJsonNodes)
        return json_error(at, "more than the limit of " + std::to_string(kMaxJsonNodes) + " values and keys");
      JsonDocument::Node n;
      n.kind = kind;
      n.offset = static_cast<uint32_t>(at);
      doc.nodes_.push_back(std::move(n));
      return static_cast<uint32_t>(doc.nodes_.size() - 1);
    };
    // Ends container open.back(): its members become one run of children_.
    const auto close = [&]() -> Status {
      const Open o = open.back();
      open.pop_back();
      JsonDocument::Node& n = doc.nodes_[o.node];
      n.first = static_cast<uint32_t>(doc.children_.size());
      n.count = static_cast<uint32_t>(pending_values.size() - o.begin);
      if (n.kind == JsonKind::kObject) {
        seen.clear();
        for (size_t k = o.begin; k < pending_keys.size(); ++k)
          if (!seen.insert(doc.nodes_[pending_keys[k]].text).second)
            return json_error(doc.nodes_[pending_keys[k]].offset, "a duplicate key");
      }
      doc.children_.insert(doc.children_.end(), pending_values.begin() + static_cast<std::ptrdiff_t>(o.begin),
                           pending_values.end());
      doc.keys_.insert(doc.keys_.end(), pending_keys.begin() + static_cast<std::ptrdiff_t>(o.begin), pending_keys.end());
      pending_values.resize(o.begin);
      pending_keys.resize(o.begin);
      return Status::ok();
    };
    // After a value: it becomes a member of the open container, or the root.
    const auto add_value = [&](uint32_t v) {
      if (open.empty()) {
        doc.root_ = v;
        return;
      }
      pending_values.push_back(v);
      pending_keys.push_back(pending_key);
      pending_key = UINT32_MAX;
    };
    bool have_root = false;
    for (;;) {
      r.skip_space();
      // Where the reader stands: expecting a value (at the start, after '[', ',' in an
      // array, or ':'), a key (after '{' or ',' in an object), or ',' / the close.
      if (r.done()) {
        if (!have_root) return json_error(text.size(), open.empty() ? "no value" : "the text ends inside a container");
        if (!open.empty()) return json_error(text.size(), "the text ends inside a container");
        return doc;
      }
      if (have_root && open.empty()) return json_error(r.at(), "text after the value");
      const size_t at = r.at();
      const char c = r.peek();
      const bool in_object = !open.empty() && doc.nodes_[open.back().node].kind == JsonKind::kObject;
      const size_t members = open.empty() ? 0 : pending_values.size() - open.back().begin;
      enum Expect { kValue, kKey, kCommaOrClose, kValueOrClose, kKeyOrClose };
      Expect expect;
      if (open.empty()) {
        expect = kValue;
      } else if (in_object) {
        if (pending_key != UINT32_MAX) expect = kValue;
        else expect = after_separator ? kKey : (members == 0 ? kKeyOrClose : kCommaOrClose);
      } else {
        expect = after_separator ? kValue : (members == 0 ? kValueOrClose : kCommaOrClose);
      }
      if ((expect == kCommaOrClose || expect == kValueOrClose || expect == kKeyOrClose) && (c == '}' || c == ']')) {
        if ((c == '}') != in_object) return json_error(at, std::string("a '") + c + "' that closes nothing open");
        r.advance();
        const uint32_t done = open.back().node;
        pending_key = open.back().key;
        Status s = close();
        if (!s) return s.error();
        after_separator = false;
        add_value(done);
        if (open.empty()) have_root = true;
        continue;
      }
      if (expect == kCommaOrClose) {
        if (c != ',') return json_error(at, in_object ? "expected ',' or '}'" : "expected ',' or ']'");
        r.advance();
        after_separator = true;
        continue;
      }
      if (expect == kKey || expect == kKeyOrClose) {
        if (c != '"') return json_error(at, "expected a key (a string)");
        auto k = new_node(JsonKind::kString, at);
        if (!k) return k.error();
        std::string s;
        Status st = r.string(s);
        if (!st) return st.error();
        doc.nodes_[k.value()].text = std::move(s);
        r.skip_space();
        if (r.done() || r.peek() != ':') return json_error(r.at(), "expected ':' after a key");
        r.advance();
        pending_key = k.value();
        after_separator = false;
        continue;
      }
      // A value.
      after_separator = false;
      if (c == '{' || c == '[') {
        if (open.size() >= kMaxJsonDepth)
          return json_error(at, "containers nested deeper than the limit of " + std::to_string(kMaxJsonDepth));
        auto n = new_node(c == '{' ? JsonKind::kObject : JsonKind::kArray, at);
        if (!n) return n.error();
        r.advance();
        open.push_back({n.value(), pending_values.size(), pending_key});
        pending_key = UINT32_MAX;
        continue;
      }
      uint32_t v;
      if (c == '"') {
        auto n = new_node(JsonKind::kString, at);
        if (!n) return n.error();
        std::string s;
        Status st = r.string(s);
        if (!st) return st.error();
        doc.nodes_[n.value()].text = std::move(s);
        v = n.value();
      } else if (c == '-' || (c >= '0' && c <= '9')) {
        auto n = new_node(JsonKind::kNumber, at);
        if (!n) return n.error();
        std::string s;
        Status st = r.number(s);
        if (!st) return st.error();
        doc.nodes_[n.value()].text = std::move(s);
        v = n.value();
      } else if (r.literal("true") || r.literal("false")) {
        auto n = new_node(JsonKind::kBool, at);
        if (!n) return n.error();
        doc.nodes_[n.value()].boolean = c == 't';
        v = n.value();
      } else if (r.literal("null")) {
        auto n = new_node(JsonKind::kNull, at);
        if (!n) return n.error();
        v = n.value();
      } else {
        return json_error(at, "expected a value");
      }
      add_value(v);
      if (open.empty()) have_root = true;
    }
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kOutOfMemory, "JSON: out of memory"};
  }
}

std::string json_quote(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

}  // namespace petrel::text
