#include "text/html_markup.h"

#include <algorithm>
#include <new>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/c_number.h"

namespace petrel::text {

namespace html_detail {

using Tag = HtmlMarkup::Tag;
using Node = HtmlMarkup::Node;
using Span = HtmlMarkup::Span;
using Piece = HtmlMarkup::Piece;

// bergamot's HTML::Options defaults (html.h), which Firefox never changes.
constexpr std::string_view kVoidTags[] = {"area",  "base",  "basefont", "bgsound", "br",    "col",
                                          "embed", "frame", "hr",       "img",     "input", "keygen",
                                          "link",  "meta",  "param",    "source",  "track", "wbr"};
constexpr std::string_view kInlineTags[] = {"abbr",   "a", "b",    "em",    "i",    "kbd",    "mark", "math",
                                            "output", "q", "ruby", "small", "span", "strong", "sub",  "sup",
                                            "time",   "u", "var",  "wbr",   "ins",  "del",    "img"};
constexpr std::string_view kInWordTags[] = {"wbr"};
constexpr std::string_view kIgnoredTags[] = {"code", "kbd", "samp", "var", "dir", "acronym", "math"};
// xh_scanner.cpp's Scanner::scanAttribute: elements whose content is not markup.
constexpr std::string_view kRawTextTags[] = {"script",  "style",    "textarea", "iframe",
                                             "noembed", "noscript", "noframes"};
constexpr std::string_view kContinuationDelimiters = "\n ,.(){}[]";

template <size_t N>
bool in_set(const std::string_view (&set)[N], std::string_view lower_name) {
  for (std::string_view s : set)
    if (s == lower_name) return true;
  return false;
}

char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
// Scanner::isWhitespace (no \v).
bool is_scanner_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }
// std::isspace in the C locale, on bytes (>= 0x80 never space).
bool is_c_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = ascii_lower(c);
  return out;
}

bool equals_lowercase(std::string_view s, std::string_view lower) {
  if (s.size() != lower.size()) return false;
  for (size_t i = 0; i < s.size(); ++i)
    if (ascii_lower(s[i]) != lower[i]) return false;
  return true;
}

// HTML::isContinuation: does `str` go on the word `prev` ends?
bool is_continuation(std::string_view prev, std::string_view str) {
  if (prev.empty() || str.empty()) return false;
  return kContinuationDelimiters.find(str[0]) == std::string_view::npos &&
         kContinuationDelimiters.find(prev.back()) == std::string_view::npos;
}

Error html_error(size_t offset, const std::string& what) {
  return Error{ErrorCode::kInvalidArgument, "HTML markup byte " + std::to_string(offset) + ": " + what};
}

Error restore_error(const std::string& what) { return Error{ErrorCode::kInvalidArgument, "HTML restore: " + what}; }

// bergamot's markup::Scanner (xh_scanner.cpp), token for token, but for the repairs
// html_markup.h lists where it returns TT_ERROR, reads past the input or loops forever.
class Scanner {
 public:
  enum class Token {
    kEof,
    kTagStart,   // <name  (tag_name())
    kTagEnd,     // </name> or the "/>" of <name/>
    kAttribute,  // attribute(), value()
    kText,       // value(): a run of text, or one entity (decoded or not)
    kData,       // value(): a comment's, a <?...?>'s or a raw-text element's content
    kCommentStart,
    kCommentEnd,
    kPiStart,
    kPiEnd,
  };

  Scanner(std::string_view in, size_t& repairs) : in_(in), repairs_(repairs) {}

  Token next() {
    switch (mode_) {
      case Mode::kBody:
        return scan_body();
      case Mode::kAttributes:
        return scan_attribute();
      case Mode::kComment:
        return scan_until("-->", Token::kCommentEnd);
      case Mode::kProcessingInstruction:
        return scan_until("?>", Token::kPiEnd);
      case Mode::kBogusComment:
        return scan_until(">", Token::kCommentEnd);
      case Mode::kRawText:
        return scan_raw_text();
    }
    return Token::kEof;
  }

  std::string_view value() const { return value_; }
  std::string_view attribute() const { return attribute_; }
  std::string_view tag_name() const { return tag_name_; }
  size_t start() const { return start_; }                // where the last token began
  size_t open_tag_end() const { return open_tag_end_; }  // just past the last start tag's '>'
  bool self_closed() const { return self_closed_; }      // the last kTagEnd was a "/>"

 private:
  enum class Mode { kBody, kAttributes, kComment, kProcessingInstruction, kBogusComment, kRawText };

  bool at_end() const { return pos_ >= in_.size(); }
  char peek() const { return at_end() ? '\0' : in_[pos_]; }
  void skip_space() {
    while (!at_end() && is_scanner_space(in_[pos_])) ++pos_;
  }

  // Does the '<' at `at` start markup? (A browser's rule: a letter, '/', '!' or '?'.)
  bool starts_markup(size_t at) const {
    if (at + 1 >= in_.size()) return false;
    const char c = in_[at + 1];
    return is_ascii_letter(c) || c == '/' || c == '!' || c == '?';
  }

  Token scan_body() {
    start_ = pos_;
    value_ = std::string_view();
    if (at_end()) return Token::kEof;
    if (in_[pos_] == '<') {
      if (pos_ + 1 == in_.size()) {  // bergamot's scanTag meets the end: the '<' is dropped
        ++pos_;
        return Token::kEof;
      }
      if (starts_markup(pos_)) return scan_tag();
    }
    if (in_[pos_] == '&') return scan_entity();
    const size_t begin = pos_;
    ++pos_;  // a '<' that is text
    while (!at_end()) {
      const char c = in_[pos_];
      if (c == '&') break;
      if (c == '<' && (starts_markup(pos_) || pos_ + 1 == in_.size())) break;
      ++pos_;
    }
    value_ = in_.substr(begin, pos_ - begin);
    return Token::kText;
  }

  Token scan_entity() {
    start_ = pos_;
    const size_t begin = pos_++;
    bool has_end = false;
    while (!at_end()) {
      const char c = in_[pos_];
      if (c == ';') {
        ++pos_;
        has_end = true;
        break;
      }
      if (!is_ascii_letter(c)) break;
      ++pos_;
    }
    const std::string_view entity = in_.substr(begin, pos_ - begin);
    value_ = entity;
    if (has_end) {
      static constexpr std::pair<std::string_view, std::string_view> kEntities[] = {
          {"&lt;", "<"},    {"&gt;", ">"},   {"&amp;", "&"},
          {"&quot;", "\""}, {"&apos;", "'"}, {"&nbsp;", " "}};  // nbsp: a plain space, as bergamot
      for (const auto& [name, decoded] : kEntities)
        if (entity == name) value_ = decoded;
    }
    return Token::kText;
  }

  // At a '<' that starts markup (scanTag).
  Token scan_tag() {
    start_ = pos_;
    ++pos_;
    const bool end_tag = peek() == '/';
    if (end_tag) ++pos_;
    // bergamot tests the name read so far after every byte, so these win at once.
    if (peek() == '?') {
      ++pos_;
      mode_ = Mode::kProcessingInstruction;
      return Token::kPiStart;
    }
    if (in_.substr(pos_, 3) == "!--") {
      pos_ += 3;
      mode_ = Mode::kComment;
      return Token::kCommentStart;
    }
    if (!is_ascii_letter(peek())) {
      // "<!x": a bogus comment to the next '>' (kept as a comment); "</>", "</ x", "</1":
      // a bogus end tag, dropped. bergamot would open or close an element of that name.
      const size_t close = in_.find('>', pos_);
      ++repairs_;
      if (end_tag || close == std::string_view::npos) {
        pos_ = close == std::string_view::npos ? in_.size() : close + 1;
        return scan_body();
      }
      ++pos_;  // the '!'
      mode_ = Mode::kBogusComment;
      return Token::kCommentStart;
    }
    const size_t name_begin = pos_;
    while (!at_end() && !is_scanner_space(in_[pos_]) && in_[pos_] != '/' && in_[pos_] != '>') ++pos_;
    tag_name_ = in_.substr(name_begin, pos_ - name_begin);
    skip_space();
    if (at_end()) return Token::kEof;
    if (end_tag) {
      self_closed_ = false;
      if (in_[pos_] == '>') {
        ++pos_;
        return Token::kTagEnd;
      }
      // "</b x>" (TT_ERROR in bergamot): a browser reads and drops the attributes.
      ++repairs_;
      return skip_end_tag_attributes();
    }
    mode_ = Mode::kAttributes;
    return Token::kTagStart;
  }

  // Reads one attribute at pos_ (after skipped whitespace, not at '>' or '/'): returns
  // kAttribute, or kEof when the input ends inside it.
  Token read_attribute() {
    const size_t name_begin = pos_;
    value_ = std::string_view();
    while (true) {
      if (at_end()) return Token::kEof;
      const char c = in_[pos_];
      if (c == '=') {
        attribute_ = in_.substr(name_begin, pos_ - name_begin);
        break;
      }
      if (c == '>') {  // a name without a value ends the tag
        attribute_ = in_.substr(name_begin, pos_ - name_begin);
        return Token::kAttribute;
      }
      if (is_scanner_space(c)) {
        attribute_ = in_.substr(name_begin, pos_ - name_begin);
        skip_space();
        if (peek() == '=') break;
        return Token::kAttribute;
      }
      if (c == '<') ++repairs_;  // TT_ERROR in bergamot; a browser keeps it in the name
      ++pos_;
    }
    ++pos_;  // '='
    skip_space();
    if (at_end()) {  // bergamot loops forever here
      ++repairs_;
      return Token::kEof;
    }
    const char quote = in_[pos_];
    if (quote == '"' || quote == '\'') {
      const size_t close = in_.find(quote, pos_ + 1);
      if (close == std::string_view::npos) {  // TT_ERROR in bergamot
        ++repairs_;
        pos_ = in_.size();
        return Token::kEof;
      }
      value_ = in_.substr(pos_ + 1, close - pos_ - 1);
      pos_ = close + 1;
      return Token::kAttribute;
    }
    const size_t value_begin = pos_;
    while (!at_end() && !is_scanner_space(in_[pos_]) && in_[pos_] != '>') ++pos_;
    if (at_end()) {  // bergamot loops forever here
      ++repairs_;
      return Token::kEof;
    }
    value_ = in_.substr(value_begin, pos_ - value_begin);
    return Token::kAttribute;
  }

  Token scan_attribute() {
    while (true) {
      skip_space();
      if (at_end()) return Token::kEof;
      const char c = in_[pos_];
      if (c == '>') {
        ++pos_;
        open_tag_end_ = pos_;
        if (is_raw_text(tag_name_)) {
          mode_ = Mode::kRawText;
          return scan_raw_text();
        }
        mode_ = Mode::kBody;
        return scan_body();
      }
      if (c == '/') {
        ++pos_;
        if (peek() == '>') {
          ++pos_;
          mode_ = Mode::kBody;
          self_closed_ = true;
          return Token::kTagEnd;
        }
        ++repairs_;  // TT_ERROR in bergamot; a browser ignores the '/'
        continue;
      }
      return read_attribute();
    }
  }

  Token skip_end_tag_attributes() {
    while (true) {
      skip_space();
      if (at_end()) return Token::kEof;
      if (in_[pos_] == '>') {
        ++pos_;
        mode_ = Mode::kBody;
        return Token::kTagEnd;
      }
      if (in_[pos_] == '/') {
        ++pos_;
        continue;
      }
      if (read_attribute() == Token::kEof) return Token::kEof;
    }
  }

  static bool is_raw_text(std::string_view name) {
    for (std::string_view s : kRawTextTags)
      if (equals_lowercase(name, s)) return true;
    return false;
  }

  // A comment's, <?...?>'s or bogus comment's content up to `tail`, then `end_token`.
  // Unterminated: kEof (bergamot's comment is then put back empty; so is ours).
  Token scan_until(std::string_view tail, Token end_token) {
    if (got_tail_) {
      got_tail_ = false;
      start_ = pos_ - tail.size();
      mode_ = Mode::kBody;
      return end_token;
    }
    start_ = pos_;
    const size_t close = in_.find(tail, pos_);
    if (close == std::string_view::npos) {
      pos_ = in_.size();
      return Token::kEof;
    }
    value_ = in_.substr(pos_, close - pos_);
    pos_ = close + tail.size();
    got_tail_ = true;
    return Token::kData;
  }

  // A raw-text element's content up to the first "</name>" (any case, no space inside),
  // then its kTagEnd. Unterminated (bergamot aborts): the content runs to the end and
  // the element is closed there.
  Token scan_raw_text() {
    if (got_tail_) {
      got_tail_ = false;
      start_ = pos_ - std::min(pos_, tag_name_.size() + 3);
      mode_ = Mode::kBody;
      self_closed_ = false;
      return Token::kTagEnd;
    }
    start_ = pos_;
    const size_t need = tag_name_.size() + 3;
    size_t at = pos_;
    while (true) {
      const size_t gt = in_.find('>', at);
      if (gt == std::string_view::npos) {
        ++repairs_;
        value_ = in_.substr(pos_);
        pos_ = in_.size();
        got_tail_ = true;
        return Token::kData;
      }
      at = gt + 1;
      if (gt + 1 - pos_ < need) continue;
      const size_t open = gt + 1 - need;
      if (in_[open] != '<' || in_[open + 1] != '/') continue;
      const std::string_view name = in_.substr(open + 2, tag_name_.size());
      bool same = true;
      for (size_t i = 0; i < name.size() && same; ++i) same = ascii_lower(name[i]) == ascii_lower(tag_name_[i]);
      if (!same) continue;
      value_ = in_.substr(pos_, open - pos_);
      pos_ = gt + 1;
      got_tail_ = true;
      return Token::kData;
    }
  }

  std::string_view in_;
  size_t& repairs_;
  size_t pos_ = 0;
  Mode mode_ = Mode::kBody;
  std::string_view value_, attribute_, tag_name_;
  size_t start_ = 0;
  size_t open_tag_end_ = 0;
  bool self_closed_ = false;
  bool got_tail_ = false;
};

// bergamot's HTML::HTML: builds text(), the spans and their tag stacks.
class HtmlParser {
 public:
  HtmlParser(std::string_view html, HtmlMarkup& m) : html_(html), m_(m), scanner_(html, m.repairs_) {}

  Status run() {
    m_.nodes_.push_back(Node{0, 0, 0, 0});  // the empty stack
    push_span(0, 0, 0);
    while (true) {
      const Scanner::Token token = scanner_.next();
      Status status;
      switch (token) {
        case Scanner::Token::kEof:
          return finish();
        case Scanner::Token::kText:
          status = on_text(scanner_.value());
          break;
        case Scanner::Token::kTagStart:
          status = on_tag_start();
          break;
        case Scanner::Token::kTagEnd:
          on_tag_end();
          break;
        case Scanner::Token::kAttribute:
          status = add_attribute();
          break;
        case Scanner::Token::kCommentStart:
        case Scanner::Token::kPiStart: {
          const auto kind =
              token == Scanner::Token::kCommentStart ? HtmlNodeKind::kComment : HtmlNodeKind::kProcessingInstruction;
          current_tag_ = add_tag(kind, std::string_view());
          push_span(text_size(), text_size(), add_node(top(), current_tag_));
        } break;
        case Scanner::Token::kData:
          if (current_tag_ != kNoTag) m_.tags_[current_tag_].data = add_piece(scanner_.value());
          break;
        case Scanner::Token::kCommentEnd:
        case Scanner::Token::kPiEnd:
          current_tag_ = kNoTag;
          break;
      }
      if (!status) return status;
    }
  }

 private:
  static constexpr uint32_t kNoTag = UINT32_MAX;

  struct Open {
    uint32_t node;
    size_t spans_at_open;  // a span made since holds this element
  };

  uint32_t text_size() const { return static_cast<uint32_t>(m_.text_.size()); }
  uint32_t top() const { return stack_.empty() ? 0 : stack_.back().node; }

  Piece add_piece(std::string_view bytes) {
    Piece p{static_cast<uint32_t>(m_.pool_.size()), static_cast<uint32_t>(bytes.size())};
    m_.pool_.append(bytes);
    return p;
  }

  uint32_t add_tag(HtmlNodeKind kind, std::string_view name) {
    Tag tag;
    tag.kind = kind;
    tag.name = add_piece(name);
    tag.attributes = Piece{static_cast<uint32_t>(m_.pool_.size()), 0};
    m_.tags_.push_back(tag);
    return static_cast<uint32_t>(m_.tags_.size() - 1);
  }

  // A stack: `tag` on `parent`. Nodes are made in document order, so a node's
  // extensions are the nodes made while it is open: [node, subtree_end).
  uint32_t add_node(uint32_t parent, uint32_t tag) {
    const auto id = static_cast<uint32_t>(m_.nodes_.size());
    m_.nodes_.push_back(Node{parent, tag, m_.nodes_[parent].depth + 1, id + 1});
    return id;
  }

  void push_span(uint32_t begin, uint32_t end, uint32_t node) { m_.spans_.push_back(Span{begin, end, node}); }

  Status on_text(std::string_view value) {
    if (add_sentence_break_) {
      const std::string& text = m_.text_;
      if (text.size() >= 2 && text.compare(text.size() - 2, 2, "\n\n") != 0) {
        // An empty span under a paragraph-break "tag", before the "\n\n": restore()
        // takes the "\n\n" out again where that tag is put back.
        const uint32_t tag = add_tag(HtmlNodeKind::kParagraphBreak, std::string_view());
        push_span(text_size(), text_size(), add_node(top(), tag));
        m_.paragraph_breaks_.push_back(m_.text_.size());
        m_.text_ += "\n\n";
      }
      add_sentence_break_ = false;
    }
    if (add_word_break_) {
      if (is_continuation(m_.text_, value)) m_.text_ += ' ';
      add_word_break_ = false;
    }
    const uint32_t begin = text_size();
    m_.text_.append(value);
    push_span(begin, text_size(), top());
    return Status::ok();
  }

  void set_breaks(std::string_view lower_name) {
    if (!in_set(kInlineTags, lower_name)) {
      add_sentence_break_ = true;
    } else if (!in_set(kInWordTags, lower_name)) {
      add_word_break_ = true;
    }
  }

  Status on_tag_start() {
    const std::string_view name = scanner_.tag_name();
    const std::string lower = lowercase(name);
    const bool is_void = in_set(kVoidTags, lower);
    const size_t at = scanner_.start();
    current_tag_ = add_tag(is_void ? HtmlNodeKind::kVoidElement : HtmlNodeKind::kElement, name);
    if (is_void) {
      // Void elements apply to no text: an empty span holds them.
      push_span(text_size(), text_size(), add_node(top(), current_tag_));
    } else if (in_set(kIgnoredTags, lower)) {
      // Copied whole, like a void element.
      const uint32_t node = add_node(top(), current_tag_);
      Status status = consume_ignored(lower);
      if (!status) return status;
      push_span(text_size(), text_size(), node);
    } else {
      if (stack_.size() >= m_.options_.max_nesting)
        return html_error(at, "elements nested deeper than " + std::to_string(m_.options_.max_nesting) + " (<" +
                                  std::string(name.substr(0, 64)) + ">)");
      stack_.push_back(Open{add_node(top(), current_tag_), m_.spans_.size()});
      ++open_names_[lower];
    }
    set_breaks(lower);
    return Status::ok();
  }

  Status add_attribute() {
    if (current_tag_ == kNoTag) return Status::ok();
    Tag& tag = m_.tags_[current_tag_];
    if (tag.attributes.begin + tag.attributes.size != m_.pool_.size())
      return Error{ErrorCode::kInternal, "HTML markup: attributes out of place"};
    const size_t before = m_.pool_.size();
    m_.pool_ += ' ';
    m_.pool_.append(scanner_.attribute());
    m_.pool_ += "=\"";
    m_.pool_.append(scanner_.value());
    m_.pool_ += '"';
    tag.attributes.size += static_cast<uint32_t>(m_.pool_.size() - before);
    return Status::ok();
  }

  // consumeIgnoredTag: the element's attributes, then its content up to the end tag
  // matching it (same-named elements inside counted), kept as data.
  Status consume_ignored(const std::string& lower) {
    Scanner::Token token;
    while ((token = scanner_.next()) == Scanner::Token::kAttribute) {
      Status status = add_attribute();
      if (!status) return status;
    }
    if (token == Scanner::Token::kEof) {  // bergamot: "Did not find closing tag"
      ++m_.repairs_;
      return Status::ok();
    }
    if (token == Scanner::Token::kTagEnd && scanner_.self_closed()) return Status::ok();  // <code/>
    const size_t data_begin = scanner_.open_tag_end();
    size_t inside = 1;
    while (true) {
      if (token == Scanner::Token::kTagStart && equals_lowercase(scanner_.tag_name(), lower)) {
        ++inside;
      } else if (token == Scanner::Token::kTagEnd && equals_lowercase(scanner_.tag_name(), lower)) {
        if (--inside == 0) break;
      } else if (token == Scanner::Token::kEof) {  // bergamot aborts; the content runs to the end
        ++m_.repairs_;
        m_.tags_[current_tag_].data = add_piece(html_.substr(data_begin));
        return Status::ok();
      }
      token = scanner_.next();
    }
    const size_t data_end = std::max(scanner_.start(), data_begin);
    m_.tags_[current_tag_].data = add_piece(html_.substr(data_begin, data_end - data_begin));
    return Status::ok();
  }

  void close_top() {
    const Open open = stack_.back();
    // "<u></u>": the element holds no text, so no span holds it yet; an empty one does.
    if (m_.spans_.size() <= open.spans_at_open) push_span(text_size(), text_size(), open.node);
    m_.nodes_[open.node].subtree_end = static_cast<uint32_t>(m_.nodes_.size());
    auto it = open_names_.find(lowercase(m_.piece(m_.tags_[m_.nodes_[open.node].tag].name)));
    if (it != open_names_.end() && --it->second == 0) open_names_.erase(it);
    stack_.pop_back();
  }

  bool top_is(const std::string& lower) const {
    return !stack_.empty() && equals_lowercase(m_.piece(m_.tags_[m_.nodes_[top()].tag].name), lower);
  }

  void on_tag_end() {
    const std::string lower = lowercase(scanner_.tag_name());
    if (in_set(kVoidTags, lower)) return;  // "</br>", the "/>" of "<img/>"
    if (!top_is(lower)) {
      if (open_names_.find(lower) == open_names_.end()) {  // stray: bergamot aborts, a browser ignores it
        ++m_.repairs_;
        return;
      }
      // Closes what is open inside it (bergamot aborts on the mismatch).
      ++m_.repairs_;
      while (!top_is(lower)) close_top();
    }
    close_top();
    set_breaks(lower);
  }

  Status finish() {
    if (!stack_.empty()) ++m_.repairs_;  // bergamot: "Not all tags were closed"
    while (!stack_.empty()) close_top();
    m_.nodes_[0].subtree_end = static_cast<uint32_t>(m_.nodes_.size());
    push_span(text_size(), text_size(), 0);  // all closed
    return Status::ok();
  }

  std::string_view html_;
  HtmlMarkup& m_;
  Scanner scanner_;
  std::vector<Open> stack_;
  std::unordered_map<std::string, uint32_t> open_names_;  // lowercase name -> elements open
  uint32_t current_tag_ = kNoTag;
  bool add_sentence_break_ = false;
  bool add_word_break_ = false;
};

}  // namespace html_detail

Result<HtmlMarkup> HtmlMarkup::parse(std::string_view html, const HtmlOptions& options) {
  const size_t max_bytes = std::min(options.max_input_bytes, HtmlOptions::kMaxInputBytes);
  if (html.size() > max_bytes)
    return html_detail::html_error(max_bytes, "input of " + std::to_string(html.size()) +
                                                  " bytes is over the limit of " + std::to_string(max_bytes));
  const size_t nul = html.find('\0');
  if (nul != std::string_view::npos) return html_detail::html_error(nul, "a NUL byte");
  try {
    HtmlMarkup m;
    m.options_ = options;
    m.html_bytes_ = html.size();
    m.text_.reserve(html.size() + 16);
    html_detail::HtmlParser parser(html, m);
    Status status = parser.run();
    if (!status) return status.error();
    return m;
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kOutOfMemory,
                 "HTML markup: out of memory parsing " + std::to_string(html.size()) + " bytes"};
  } catch (const std::length_error&) {
    return Error{ErrorCode::kOutOfMemory,
                 "HTML markup: out of memory parsing " + std::to_string(html.size()) + " bytes"};
  }
}

namespace html_detail {

// A text as bergamot's Annotation holds it: tokens that follow each other without holes,
// gap 0, sentence 0's tokens, gap 1, ..., gap S. Token i is [begin[i], begin[i + 1]).
struct TokenLayout {
  std::vector<size_t> begin;  // one per token, then the text's size
  std::vector<size_t> gap;    // index of gap s, s = 0..S
  size_t tokens() const { return begin.size() - 1; }
  std::string_view token(const std::string& text, size_t i) const {
    return std::string_view(text).substr(begin[i], begin[i + 1] - begin[i]);
  }
};

Result<TokenLayout> token_layout(const AnnotatedText& t, const char* which) {
  TokenLayout layout;
  size_t count = 1;
  for (const auto& sentence : t.sentences) count += sentence.size() + 1;
  layout.begin.reserve(count + 1);
  layout.gap.reserve(t.sentences.size() + 1);
  size_t at = 0;  // where the next token may begin
  auto add = [&](size_t begin, size_t s, size_t k) -> Status {
    if (begin < at || begin > t.text.size())
      return restore_error(std::string(which) + " sentence " + std::to_string(s) + " token " + std::to_string(k) +
                           " begins at byte " + std::to_string(begin) + ", before byte " + std::to_string(at) +
                           " or past the text's " + std::to_string(t.text.size()));
    layout.begin.push_back(begin);
    at = begin;
    return Status::ok();
  };
  for (size_t s = 0; s < t.sentences.size(); ++s) {
    const auto& sentence = t.sentences[s];
    if (sentence.empty())
      return restore_error(std::string(which) + " sentence " + std::to_string(s) + " has no tokens (not even EOS)");
    layout.gap.push_back(layout.begin.size());
    layout.begin.push_back(at);  // the gap begins where the last sentence ended
    for (size_t k = 0; k < sentence.size(); ++k) {
      Status status = add(sentence[k].begin, s, k);
      if (!status) return status.error();
    }
    const TextRange& last = sentence.back();
    if (last.end < last.begin || last.end > t.text.size())
      return restore_error(std::string(which) + " sentence " + std::to_string(s) + " ends at byte " +
                           std::to_string(last.end) + ", outside its last token or the text");
    at = last.end;
  }
  layout.gap.push_back(layout.begin.size());
  layout.begin.push_back(at);
  layout.begin.push_back(t.text.size());
  return layout;
}

// Stacks and tags of a parse, and the <font> tags and stacks restore() adds above them.
class StackTable {
 public:
  StackTable(const std::vector<Node>& nodes, const std::vector<Tag>& tags, const std::string& pool)
      : nodes_(nodes), tags_(tags), pool_(pool) {}

  const Node& node(uint32_t id) const { return id < nodes_.size() ? nodes_[id] : extra_nodes_[id - nodes_.size()]; }
  const Tag& tag(uint32_t id) const { return id < tags_.size() ? tags_[id] : extra_tags_[id - tags_.size()]; }
  std::string_view piece(uint32_t tag_id, Piece p) const {
    const std::string& pool = tag_id < tags_.size() ? pool_ : extra_pool_;
    return std::string_view(pool).substr(p.begin, p.size);
  }

  uint32_t add_font(const std::string& attributes) {
    Tag tag;
    tag.kind = HtmlNodeKind::kElement;
    tag.name = Piece{0, 4};  // "font", first in extra_pool_
    if (extra_pool_.empty()) extra_pool_ = "font";
    tag.attributes = Piece{static_cast<uint32_t>(extra_pool_.size()), static_cast<uint32_t>(attributes.size())};
    extra_pool_ += attributes;
    extra_tags_.push_back(tag);
    return static_cast<uint32_t>(tags_.size() + extra_tags_.size() - 1);
  }

  // The stack `tag` on `parent`, one node per distinct stack (bergamot compares stacks
  // tag by tag; equal stacks must be one node here).
  uint32_t push(uint32_t parent, uint32_t tag) {
    const uint64_t key = uint64_t{parent} << 32 | tag;
    auto it = interned_.find(key);
    if (it != interned_.end()) return it->second;
    const auto id = static_cast<uint32_t>(nodes_.size() + extra_nodes_.size());
    extra_nodes_.push_back(Node{parent, tag, node(parent).depth + 1, id + 1});
    interned_.emplace(key, id);
    return id;
  }

 private:
  const std::vector<Node>& nodes_;
  const std::vector<Tag>& tags_;
  const std::string& pool_;
  std::vector<Node> extra_nodes_;
  std::vector<Tag> extra_tags_;
  std::string extra_pool_;
  std::unordered_map<uint64_t, uint32_t> interned_;
};

// bergamot's TokenFormatter, in linear time: a token becomes
//   [end tags put before its leading whitespace] [that whitespace, less the "\n\n" of
//   paragraph breaks put back] [tags after it] [the token's other bytes, & < > escaped].
class TokenWriter {
 public:
  TokenWriter(const StackTable& table, size_t limit) : table_(table), limit_(limit) {}

  void start(std::string_view token) {
    token_ = token;
    space_ = 0;
    while (space_ < token.size() && is_c_space(token[space_])) ++space_;
    before_space_.clear();
    after_space_.clear();
    kept_space_.clear();
    space_read_ = 0;
    space_edited_ = false;
    close_left_ = true;
  }

  // The tags that take the stack `from` to `to` (diffTags + TokenFormatter::append):
  // end tags innermost first, then start tags outermost first.
  Status transition(uint32_t from, uint32_t to) {
    if (from == to) return Status::ok();
    opening_.clear();
    uint32_t a = from, b = to;
    while (table_.node(a).depth > table_.node(b).depth) {
      close(a);
      a = table_.node(a).parent;
    }
    while (table_.node(b).depth > table_.node(a).depth) {
      opening_.push_back(b);
      b = table_.node(b).parent;
    }
    while (a != b) {
      close(a);
      a = table_.node(a).parent;
      opening_.push_back(b);
      b = table_.node(b).parent;
    }
    for (auto it = opening_.rbegin(); it != opening_.rend(); ++it) open(*it);
    if (written_ > limit_)
      return Error{ErrorCode::kOutOfMemory,
                   "HTML restore: the markup put back would pass " + std::to_string(limit_) + " bytes"};
    return Status::ok();
  }

  void finish(std::string& out) {
    out += before_space_;
    if (space_edited_) {
      out += kept_space_;
      out.append(token_.substr(space_read_, space_ - space_read_));
    } else {
      out.append(token_.substr(0, space_));
    }
    out += after_space_;
    for (size_t i = space_; i < token_.size(); ++i) {  // encodeEntities
      const char c = token_[i];
      if (c == '&') {
        out += "&amp;";
      } else if (c == '<') {
        out += "&lt;";
      } else if (c == '>') {
        out += "&gt;";
      } else {
        out += c;
      }
    }
  }

  size_t written() const { return written_; }
  void charge(size_t bytes) { written_ += bytes; }

 private:
  void close(uint32_t node_id) {
    const uint32_t tag_id = table_.node(node_id).tag;
    const Tag& tag = table_.tag(tag_id);
    if (tag.kind != HtmlNodeKind::kElement) return;  // only elements have end tags
    std::string& out = close_left_ ? before_space_ : after_space_;
    const std::string_view name = table_.piece(tag_id, tag.name);
    out += "</";
    out.append(name);
    out += '>';
    written_ += name.size() + 3;
  }

  void open(uint32_t node_id) {
    const uint32_t tag_id = table_.node(node_id).tag;
    const Tag& tag = table_.tag(tag_id);
    const size_t before = after_space_.size();
    switch (tag.kind) {
      case HtmlNodeKind::kElement:
      case HtmlNodeKind::kVoidElement:
        after_space_ += '<';
        after_space_.append(table_.piece(tag_id, tag.name));
        after_space_.append(table_.piece(tag_id, tag.attributes));
        after_space_ += '>';
        after_space_.append(table_.piece(tag_id, tag.data));
        break;
      case HtmlNodeKind::kComment:
        after_space_ += "<!--";
        after_space_.append(table_.piece(tag_id, tag.data));
        after_space_ += "-->";
        break;
      case HtmlNodeKind::kProcessingInstruction:
        after_space_ += "<?";
        after_space_.append(table_.piece(tag_id, tag.data));
        after_space_ += "?>";
        break;
      case HtmlNodeKind::kParagraphBreak:
        take_paragraph_break();
        return;  // writes nothing: end tags still go before the whitespace
    }
    written_ += after_space_.size() - before;
    close_left_ = false;
  }

  // Takes the first "\n\n" out of the leading whitespace (as it stands after earlier
  // ones were taken out). kept_space_ never holds "\n\n" itself, so the first one either
  // straddles its end or lies in the part not read yet.
  void take_paragraph_break() {
    space_edited_ = true;
    while (space_read_ < space_) {
      const char c = token_[space_read_];
      if (c == '\n' && !kept_space_.empty() && kept_space_.back() == '\n') {
        kept_space_.pop_back();
        ++space_read_;
        return;
      }
      kept_space_ += c;
      ++space_read_;
    }
  }

  const StackTable& table_;
  size_t limit_;
  size_t written_ = 0;
  std::string_view token_;
  size_t space_ = 0;
  std::string before_space_, after_space_, kept_space_;
  size_t space_read_ = 0;
  bool space_edited_ = false;
  bool close_left_ = true;
  std::vector<uint32_t> opening_;
};

// The restored text and each token's range in it.
struct Rewritten {
  std::string text;
  std::vector<TextRange> tokens;
};

void set_annotation(AnnotatedText& t, const TokenLayout& layout, Rewritten& out) {
  for (size_t s = 0; s < t.sentences.size(); ++s) {
    auto& sentence = t.sentences[s];
    for (size_t k = 0; k < sentence.size(); ++k) sentence[k] = out.tokens[layout.gap[s] + 1 + k];
  }
  t.text = std::move(out.text);
}

std::string font_attributes(const char* what, size_t index, float score) {
  // bergamot formats with operator<<: a float as printf's %g (6 digits), '.' as the radix.
  return std::string(" x-bergamot-") + what + "-index=\"" + std::to_string(index) + "\" x-bergamot-" + what +
         "-score=\"" + core::format_c_double("%.*g", 6, static_cast<double>(score)) + "\"";
}

}  // namespace html_detail

Status HtmlMarkup::restore(AnnotatedText& source, AnnotatedText& target,
                           const std::vector<std::vector<std::vector<float>>>& soft_alignments,
                           const QualityMarkup* quality) const {
  const size_t sentences = source.sentences.size();
  if (source.text != text_)
    return html_detail::restore_error("the source text is not the text this markup was parsed into");
  if (target.sentences.size() != sentences || soft_alignments.size() != sentences)
    return html_detail::restore_error("the source has " + std::to_string(sentences) + " sentences, the target " +
                                      std::to_string(target.sentences.size()) + ", the alignments " +
                                      std::to_string(soft_alignments.size()));
  for (size_t s = 0; s < sentences; ++s) {
    if (soft_alignments[s].size() != target.sentences[s].size())
      return html_detail::restore_error("sentence " + std::to_string(s) + ": " +
                                        std::to_string(soft_alignments[s].size()) + " alignment rows for " +
                                        std::to_string(target.sentences[s].size()) + " target tokens");
    for (size_t t = 0; t < soft_alignments[s].size(); ++t)
      if (soft_alignments[s][t].size() != source.sentences[s].size())
        return html_detail::restore_error("sentence " + std::to_string(s) + " target token " + std::to_string(t) +
                                          ": " + std::to_string(soft_alignments[s][t].size()) +
                                          " alignment scores for " + std::to_string(source.sentences[s].size()) +
                                          " source tokens");
  }
  if (quality != nullptr) {
    if (quality->size() != sentences)
      return html_detail::restore_error(std::to_string(quality->size()) + " quality scores for " +
                                        std::to_string(sentences) + " sentences");
    for (size_t s = 0; s < sentences; ++s) {
      const WordQuality& q = (*quality)[s];
      if (q.word_scores.size() != q.word_tokens.size())
        return html_detail::restore_error("sentence " + std::to_string(s) + ": " +
                                          std::to_string(q.word_scores.size()) + " word scores for " +
                                          std::to_string(q.word_tokens.size()) + " words");
      size_t at = 0;
      for (size_t w = 0; w < q.word_tokens.size(); ++w) {
        const TextRange& r = q.word_tokens[w];
        if (r.begin < at || r.end < r.begin || r.end > target.sentences[s].size())
          return html_detail::restore_error("sentence " + std::to_string(s) + " word " + std::to_string(w) +
                                            ": tokens [" + std::to_string(r.begin) + ", " + std::to_string(r.end) +
                                            ") overlap the word before or lie outside the sentence's " +
                                            std::to_string(target.sentences[s].size()) + " tokens");
        at = r.end;
      }
    }
  }

  try {
    Result<html_detail::TokenLayout> source_layout = html_detail::token_layout(source, "source");
    if (!source_layout) return source_layout.error();
    Result<html_detail::TokenLayout> target_layout = html_detail::token_layout(target, "target");
    if (!target_layout) return target_layout.error();
    const html_detail::TokenLayout& src = source_layout.value();
    const html_detail::TokenLayout& tgt = target_layout.value();

    size_t limit = options_.max_output_bytes;
    if (limit == 0) {
      const double automatic = 32.0 * (static_cast<double>(html_bytes_) + static_cast<double>(source.text.size()) +
                                       static_cast<double>(target.text.size())) +
                               double(1 << 20);
      limit = automatic < static_cast<double>(HtmlOptions::kMaxOutputBytes) ? static_cast<size_t>(automatic)
                                                                            : HtmlOptions::kMaxOutputBytes;
    }

    html_detail::StackTable table(nodes_, tags_, pool_);
    html_detail::TokenWriter writer(table, limit);

    // 1. The source, and the span each source token ends in (restoreSource).
    html_detail::Rewritten new_source;
    new_source.tokens.resize(src.tokens());
    std::vector<uint32_t> source_span(src.tokens());
    size_t span = 0;
    for (size_t i = 0; i < src.tokens(); ++i) {
      const bool last = i + 1 == src.tokens();
      const size_t token_end = src.begin[i + 1];
      writer.start(src.token(source.text, i));
      while (span + 1 < spans_.size() && (spans_[span + 1].begin < token_end || last)) {
        Status status = writer.transition(spans_[span].node, spans_[span + 1].node);
        if (!status) return status;
        ++span;
      }
      source_span[i] = static_cast<uint32_t>(span);
      const size_t begin = new_source.text.size();
      writer.finish(new_source.text);
      writer.charge(new_source.text.size() - begin);
      new_source.tokens[i] = TextRange{begin, new_source.text.size()};
    }

    // 2. One source token per target token (hardAlignments), its span (copyTagStack).
    std::vector<uint32_t> target_span(tgt.tokens());
    std::vector<size_t> hard;
    for (size_t s = 0; s < sentences; ++s) {
      const size_t source_gap = src.gap[s];
      const size_t target_gap = tgt.gap[s];
      const size_t n = target.sentences[s].size();
      const auto& rows = soft_alignments[s];
      hard.assign(n, 0);
      for (size_t t = 0; t + 1 < n; ++t) {  // std::max_element: the first maximum
        const auto& row = rows[t];
        size_t best = 0;
        for (size_t j = 1; j < row.size(); ++j)
          if (row[best] < row[j]) best = j;
        hard[t] = best;
      }
      // The tokens of a target word share the source token the word settles on: scanning
      // the word, the next token's choice wins when it has the same markup and more
      // (its stack extends the word's) or a score at least the word's.
      auto node_of = [&](size_t j) { return spans_[source_span[source_gap + 1 + j]].node; };
      auto word = [&](size_t t) { return tgt.token(target.text, target_gap + 1 + t); };
      if (n >= 2) {
        size_t run_start = 0, run = hard[0];
        for (size_t t = 1; t + 1 < n; ++t) {
          if (html_detail::is_continuation(word(t - 1), word(t))) {
            const size_t curr = hard[t];
            const uint32_t curr_node = node_of(curr), prev_node = node_of(run);
            const bool extends = prev_node <= curr_node && curr_node < nodes_[prev_node].subtree_end;
            if (extends || rows[t][curr] >= rows[t - 1][run]) run = curr;
          } else {
            std::fill(hard.begin() + static_cast<std::ptrdiff_t>(run_start),
                      hard.begin() + static_cast<std::ptrdiff_t>(t), run);
            run_start = t;
            run = hard[t];
          }
        }
        std::fill(hard.begin() + static_cast<std::ptrdiff_t>(run_start),
                  hard.begin() + static_cast<std::ptrdiff_t>(n - 1), run);
      }
      if (n >= 1) hard[n - 1] = source.sentences[s].size() - 1;  // EOS to EOS
      target_span[target_gap] = source_span[source_gap];
      for (size_t t = 0; t < n; ++t) target_span[target_gap + 1 + t] = source_span[source_gap + 1 + hard[t]];
    }
    target_span[tgt.gap[sentences]] = source_span[src.gap[sentences]];

    // 3. Each target token's stack: its span's, quality <font>s on top (annotateTagStack).
    std::vector<uint32_t> target_node(tgt.tokens());
    for (size_t i = 0; i < tgt.tokens(); ++i) target_node[i] = spans_[target_span[i]].node;
    if (quality != nullptr) {
      for (size_t s = 0; s < sentences; ++s) {
        const WordQuality& q = (*quality)[s];
        const size_t first = tgt.gap[s] + 1;
        const uint32_t sentence_tag = table.add_font(html_detail::font_attributes("sentence", s, q.sentence_score));
        for (size_t t = 0; t < target.sentences[s].size(); ++t)
          target_node[first + t] = table.push(target_node[first + t], sentence_tag);
        for (size_t w = 0; w < q.word_tokens.size(); ++w) {
          const uint32_t word_tag = table.add_font(html_detail::font_attributes("word", w, q.word_scores[w]));
          for (size_t t = q.word_tokens[w].begin; t < q.word_tokens[w].end; ++t)
            target_node[first + t] = table.push(target_node[first + t], word_tag);
        }
      }
    }

    // 4. The target (restoreTarget): before each token, the spans passed over that no
    // token took (empty ones: void elements, comments, paragraph breaks, "<u></u>";
    // markup whose words were not translated) are put back in order.
    std::vector<bool> referenced(spans_.size(), false);
    for (uint32_t sp : target_span) referenced[sp] = true;
    html_detail::Rewritten new_target;
    new_target.tokens.resize(tgt.tokens());
    uint32_t previous = spans_[0].node;
    size_t straggler = 0;
    for (size_t i = 0; i < tgt.tokens(); ++i) {
      writer.start(tgt.token(target.text, i));
      for (; straggler < target_span[i]; ++straggler) {
        const HtmlMarkup::Span& sp = spans_[straggler];
        if (sp.end != sp.begin && referenced[straggler]) continue;
        Status status = writer.transition(previous, sp.node);
        if (!status) return status;
        previous = sp.node;
      }
      Status status = writer.transition(previous, target_node[i]);
      if (!status) return status;
      if (i + 1 == tgt.tokens()) {
        status = writer.transition(target_node[i], 0);
        if (!status) return status;
      }
      previous = target_node[i];
      const size_t begin = new_target.text.size();
      writer.finish(new_target.text);
      writer.charge(new_target.text.size() - begin);
      if (writer.written() > limit)
        return Error{ErrorCode::kOutOfMemory,
                     "HTML restore: the markup put back would pass " + std::to_string(limit) + " bytes"};
      new_target.tokens[i] = TextRange{begin, new_target.text.size()};
    }

    html_detail::set_annotation(source, src, new_source);
    html_detail::set_annotation(target, tgt, new_target);
    return Status::ok();
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kOutOfMemory, "HTML restore: out of memory"};
  } catch (const std::length_error&) {
    return Error{ErrorCode::kOutOfMemory, "HTML restore: out of memory"};
  }
}

}  // namespace petrel::text
