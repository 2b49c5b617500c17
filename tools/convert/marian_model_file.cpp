#include "convert/marian_model_file.h"

#include "core/utf8.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cctype>
#include <cstring>
#include <locale>
#include <set>
#include <sstream>

#include "convert/mapped_file.h"
#include "convert/zip_reader.h"
#include "core/bytes.h"
#include "core/checked.h"
#include "core/quoted.h"
#include "kernels/half.h"

namespace petrel::convert {
namespace {

using detail::checked_add;
using detail::checked_mul;
using detail::load_le16;
using detail::load_le32;
using detail::load_le64;

// marian-dev src/common/binary.h: BINARY_FILE_VERSION.
constexpr uint64_t kBinaryVersion = 1;
// marian-dev src/common/types.h, Type: class bits | element size.
constexpr uint64_t kInt8 = 0x0101, kFloat16 = 0x0402, kFloat32 = 0x0404, kIntgemm8 = 0x4101,
                   kIntgemm16 = 0x4102;
constexpr uint64_t kPackedClass = 0x0800;
constexpr size_t kItemHeaderBytes = 32;  // four u64 per item

const std::string kModelYml = "special:model.yml";

// Far beyond real models (a Firefox model has ~150 items with names under 60 bytes,
// and a model.yml of ~5 KB); each keeps hostile sizes from costing time or memory.
constexpr uint64_t kMaxItems = 1u << 20;
constexpr uint64_t kMaxNameBytes = 4096;  // including the NUL
constexpr size_t kMaxYamlBytes = 1u << 20;
constexpr size_t kMaxYamlLine = 64u << 10;
constexpr size_t kMaxYamlKeys = 10000;
constexpr size_t kMaxYamlListItems = 100000;  // all lists together
// A vocabulary (vocab.yml: `token: id` per line) is a bigger map of quoted keys.
constexpr size_t kMaxVocabularyYamlBytes = 256u << 20;
constexpr size_t kMaxVocabularyKeys = 1u << 24;
constexpr uint64_t kMaxNpyHeader = 64u << 10;

std::string type_name(uint64_t type) {
  switch (type) {
    case kInt8: return "int8";
    case kFloat16: return "float16";
    case kFloat32: return "float32";
    case kIntgemm8: return "intgemm8";
    case kIntgemm16: return "intgemm16";
    case 0x0102: return "int16";
    case 0x0104: return "int32";
    case 0x0108: return "int64";
    case 0x0201: return "uint8";
    case 0x0202: return "uint16";
    case 0x0204: return "uint32";
    case 0x0208: return "uint64";
    case 0x0408: return "float64";
    case 0x0802: return "packed16";
    case 0x1801: return "packed8avx2";
    case 0x2801: return "packed8avx512";
    default: break;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(type));
  return std::string("unknown type ") + buf;
}

// Marian's test for an embedding table (binary.cpp loadItems, expression_graph_packable.h
// packAndSave): intgemm keeps these untransposed and Marian dequantizes them at load.
bool is_embedding(const std::string& name) { return name.find("Wemb") != std::string::npos; }

struct Item : TensorInfo {
  uint64_t type = 0;            // Marian's type code (npz: the one its dtype maps to)
  uint64_t offset = 0;          // first data byte, within the file (npz: within its record)
  uint64_t elements = 0;
  const ZipRecord* record = nullptr;  // npz: CRC-checked before the first read
};

// ---------------------------------------------------------------- YAML subset

bool is_space(char c) { return c == ' ' || c == '\t'; }

size_t skip_spaces(std::string_view s, size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

// The rest of a line, from i, holds nothing but spaces and perhaps a comment.
bool only_comment(std::string_view s, size_t i) {
  i = skip_spaces(s, i);
  return i == s.size() || s[i] == '#';
}

class YamlParser {
 public:
  // `vocabulary`: a map of tokens to ids (Marian's vocab.yml), whose keys yaml-cpp
  // quotes when they need it; no lists.
  YamlParser(std::string_view text, MarianOptions& out, bool vocabulary = false)
      : text_(text), out_(out), vocabulary_(vocabulary) {}

  void parse() {
    const size_t max_bytes = vocabulary_ ? kMaxVocabularyYamlBytes : kMaxYamlBytes;
    if (text_.size() > max_bytes)
      throw ConvertError(out_.name + ": " + std::to_string(text_.size()) + " bytes, more than the limit of " +
                         std::to_string(max_bytes));
    size_t pos = 0;
    while (pos < text_.size()) {
      size_t end = text_.find('\n', pos);
      if (end == std::string_view::npos) end = text_.size();
      std::string_view line = text_.substr(pos, end - pos);
      pos = end + 1;
      ++line_no_;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.size() > kMaxYamlLine)
        fail("line is " + std::to_string(line.size()) + " bytes long, more than the limit of " +
             std::to_string(kMaxYamlLine));
      parse_line(line);
    }
    close_key();
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw ConvertError(out_.name + ": line " + std::to_string(line_no_) + ": " + what);
  }
  [[noreturn]] void fail_key(const std::string& key, const std::string& what) const {
    fail("key " + detail::quoted(key) + " " + what);
  }

  void parse_line(std::string_view line) {
    size_t indent = 0;
    while (indent < line.size() && line[indent] == ' ') ++indent;
    if (indent < line.size() && line[indent] == '\t' && !only_comment(line, indent))
      fail("a tab in the indentation (YAML allows only spaces)");
    if (only_comment(line, indent)) return;
    if (ended_) fail("text after the document end marker '...'");
    std::string_view content = line.substr(indent);
    if (indent == 0 && is_marker(content, "---")) {
      if (seen_key_) fail("a second YAML document ('---'); Marian writes one");
      return;
    }
    if (indent == 0 && is_marker(content, "...")) {
      ended_ = true;
      return;
    }
    const bool dash = content[0] == '-' && (content.size() == 1 || is_space(content[1]));
    if (dash) {
      // A block list item belongs to the open `key:` (yaml-cpp indents it; at column 0
      // it is YAML's compact form).
      if (open_key_.empty()) fail("a list item ('- ...') that belongs to no key");
      if (open_flow_) fail_key(open_key_, "has a flow list '[...]' followed by more items");
      if (open_items_ == 0) list_indent_ = indent;
      else if (indent != list_indent_) fail_key(open_key_, "has list items at different indentations");
      list_item(line, indent + 1);
      return;
    }
    if (indent > 0) {
      if (open_key_.empty())
        fail("unexpected indentation (a value continued on the next line, or a nested map?)");
      if (content[0] == '[' && open_items_ == 0 && !open_flow_) {
        flow_list(line, indent, open_key_);
        open_flow_ = true;
        return;
      }
      fail_key(open_key_, looks_like_key(content) ? "holds a nested map, which Marian's options never are"
                                                  : "is followed by indented text that is not a list item");
    }
    close_key();
    key_line(line);
  }

  static bool is_marker(std::string_view content, std::string_view marker) {
    return content.substr(0, 3) == marker && (content.size() == 3 || is_space(content[3])) &&
           only_comment(content, 3);
  }

  static bool looks_like_key(std::string_view content) {
    const size_t colon = find_key_colon(content);
    return colon != std::string_view::npos && colon > 0;
  }

  // The ':' that ends a plain key: the first one followed by a space or the line's end.
  static size_t find_key_colon(std::string_view s) {
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == ':' && (i + 1 == s.size() || is_space(s[i + 1]))) return i;
      if (s[i] == '#' && i > 0 && is_space(s[i - 1])) return std::string_view::npos;  // a comment
    }
    return std::string_view::npos;
  }

  void key_line(std::string_view line) {
    const char first = line[0];
    if (vocabulary_ && (first == '"' || first == '\'')) return quoted_key_line(line);
    if (first == '"' || first == '\'' || first == '?' || first == '{' || first == '[' || first == '&' ||
        first == '*' || first == '!' || first == '%' || first == '@' || first == '`' || first == '|' ||
        first == '>')
      fail("expected 'key: value' (quoted, complex or flow keys, directives, anchors and tags are not "
           "Marian's options)");
    const size_t colon = find_key_colon(line);
    if (colon == std::string_view::npos || colon == 0) fail("expected 'key: value'");
    std::string key(line.substr(0, colon));
    while (!key.empty() && is_space(key.back())) key.pop_back();
    value_of(std::move(key), line, colon + 1);
  }

  // A vocabulary's `"key": value` or `'key': value`.
  void quoted_key_line(std::string_view line) {
    std::string key;
    size_t i = scalar(line, 0, false, "(a quoted key)", key);
    i = skip_spaces(line, i);
    if (i == line.size() || line[i] != ':') fail("expected ':' after the quoted key " + detail::quoted(key));
    value_of(std::move(key), line, i + 1);
  }

  // The value after `key:` at line[i].
  void value_of(std::string key, std::string_view line, size_t i) {
    if (!seen_.insert(key).second) fail_key(key, "appears twice");
    const size_t max_keys = vocabulary_ ? kMaxVocabularyKeys : kMaxYamlKeys;
    if (seen_.size() > max_keys) fail("more than " + std::to_string(max_keys) + " keys");
    seen_key_ = true;
    i = skip_spaces(line, i);
    if (vocabulary_ && only_comment(line, i)) fail_key(key, "has no id");
    if (only_comment(line, i)) {  // `key:` alone: a list may follow, else its value is null
      open_key_ = key;
      open_items_ = 0;
      open_flow_ = false;
      return;
    }
    const char c = line[i];
    if (vocabulary_ && (c == '[' || c == '{')) fail_key(key, "holds a list or map; a vocabulary maps tokens to ids");
    if (c == '[') {
      flow_list(line, i, key);
      return;
    }
    if (c == '{') fail_key(key, "holds a nested map, which Marian's options never are");
    if (c == '|' || c == '>') fail_key(key, "holds a block scalar ('|' or '>'), which Marian does not write");
    if (c == '&' || c == '*' || c == '!') fail_key(key, "uses an anchor, alias or tag, which Marian does not write");
    std::string value;
    i = scalar(line, i, false, key, value);
    if (!only_comment(line, i)) fail_key(key, "has text after its value");
    out_.scalars.emplace(key, std::move(value));
  }

  void list_item(std::string_view line, size_t i) {
    i = skip_spaces(line, i);
    std::string value;
    if (!only_comment(line, i)) {
      const char c = line[i];
      if (c == '-' && (i + 1 == line.size() || is_space(line[i + 1])))
        fail_key(open_key_, "holds a list of lists, which Marian's options never are");
      if (c == '[' || c == '{') fail_key(open_key_, "holds nested lists or maps, which Marian's options never are");
      if (c == '|' || c == '>' || c == '&' || c == '*' || c == '!')
        fail_key(open_key_, "has a list item with a block scalar, anchor, alias or tag");
      i = scalar(line, i, false, open_key_, value);
      if (!only_comment(line, i)) fail_key(open_key_, "has text after a list item");
    }
    if (open_items_++ == 0) open_list_ = &out_.lists[open_key_];
    add_item(*open_list_, std::move(value));
  }

  // `[a, "b", c]` from line[i] == '[' to its ']', on one line.
  void flow_list(std::string_view line, size_t i, const std::string& key) {
    std::vector<std::string>& items = out_.lists[key];  // `[]` is an empty list, not an absent key
    ++i;
    i = skip_spaces(line, i);
    if (i < line.size() && line[i] == ']') {
      ++i;
    } else {
      for (;;) {
        i = skip_spaces(line, i);
        if (i == line.size()) fail_key(key, "has a flow list '[' that does not close on its line");
        const char c = line[i];
        if (c == '[' || c == '{') fail_key(key, "holds nested lists or maps, which Marian's options never are");
        if (c == '&' || c == '*' || c == '!' || c == '|' || c == '>')
          fail_key(key, "has a list item with an anchor, alias, tag or block scalar");
        if (c == ',' || c == ']') fail_key(key, "has an empty item in its flow list");
        std::string value;
        i = scalar(line, i, true, key, value);
        add_item(items, std::move(value));
        i = skip_spaces(line, i);
        if (i == line.size()) fail_key(key, "has a flow list '[' that does not close on its line");
        if (line[i] == ']') {
          ++i;
          break;
        }
        if (line[i] != ',') fail_key(key, "has a flow list with text after an item");
        ++i;
        i = skip_spaces(line, i);
        if (i < line.size() && line[i] == ']') {  // a trailing comma
          ++i;
          break;
        }
      }
    }
    if (!only_comment(line, i)) fail_key(key, "has text after its flow list");
  }

  // Into a list found once per key: a long key is not compared again for every item.
  void add_item(std::vector<std::string>& list, std::string value) {
    if (++list_items_ > kMaxYamlListItems)
      fail("more than " + std::to_string(kMaxYamlListItems) + " list items");
    list.push_back(std::move(value));
  }

  void close_key() {
    if (!open_key_.empty() && open_items_ == 0 && !open_flow_)
      out_.scalars.emplace(open_key_, std::string());  // YAML null
    open_key_.clear();
    open_items_ = 0;
    open_flow_ = false;
  }

  // A scalar from line[i]: "double-quoted", 'single-quoted' or plain (up to a comment,
  // the line's end, or in a flow list ',' or ']'). Returns the index after it.
  size_t scalar(std::string_view line, size_t i, bool in_flow, const std::string& key, std::string& out) const {
    const char q = line[i];
    if (q == '"') return double_quoted(line, i + 1, key, out);
    if (q == '\'') {
      for (++i;; ++i) {
        if (i == line.size()) fail_key(key, "has a quoted value that does not close on its line");
        if (line[i] == '\'') {
          if (i + 1 < line.size() && line[i + 1] == '\'') {
            out += '\'';
            ++i;
          } else {
            return i + 1;
          }
        } else {
          out += line[i];
        }
      }
    }
    size_t end = i;
    while (end < line.size()) {
      const char c = line[end];
      if (c == '#' && (end == i || is_space(line[end - 1]))) break;
      if (in_flow && (c == ',' || c == ']')) break;
      if (in_flow && (c == '[' || c == '{' || c == '}'))
        fail_key(key, "holds nested lists or maps, which Marian's options never are");
      if (c == ':' && (end + 1 == line.size() || is_space(line[end + 1]) ||
                       (in_flow && (line[end + 1] == ',' || line[end + 1] == ']'))))
        fail_key(key, "holds a nested map ('a: b' inside a value), which Marian's options never are");
      ++end;
    }
    size_t last = end;
    while (last > i && is_space(line[last - 1])) --last;
    out.assign(line.substr(i, last - i));
    return end;
  }

  size_t double_quoted(std::string_view line, size_t i, const std::string& key, std::string& out) const {
    auto hex = [&](size_t at, int digits) {
      uint32_t v = 0;
      for (int d = 0; d < digits; ++d) {
        if (at + d >= line.size()) fail_key(key, "has a cut escape sequence");
        const char c = line[at + d];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
        else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
        else fail_key(key, "has a bad hexadecimal escape");
      }
      return v;
    };
    for (;; ++i) {
      if (i == line.size()) fail_key(key, "has a quoted value that does not close on its line");
      const char c = line[i];
      if (c == '"') return i + 1;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (++i == line.size()) fail_key(key, "has a quoted value that does not close on its line");
      switch (line[i]) {
        case '0': out += '\0'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 't': case '\t': out += '\t'; break;
        case 'n': out += '\n'; break;
        case 'v': out += '\v'; break;
        case 'f': out += '\f'; break;
        case 'r': out += '\r'; break;
        case 'e': out += '\x1b'; break;
        case ' ': out += ' '; break;
        case '"': out += '"'; break;
        case '/': out += '/'; break;
        case '\\': out += '\\'; break;
        case 'x': detail::append_utf8(out, hex(i + 1, 2)); i += 2; break;
        case 'u':
        case 'U': {
          const int digits = line[i] == 'u' ? 4 : 8;
          const uint32_t cp = hex(i + 1, digits);
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail_key(key, "has an escape that is no code point");
          detail::append_utf8(out, cp);
          i += digits;
          break;
        }
        default: fail_key(key, "has an unknown escape sequence \\" + std::string(1, line[i]));
      }
    }
  }

  std::string_view text_;
  MarianOptions& out_;
  bool vocabulary_ = false;
  size_t line_no_ = 0;
  std::set<std::string> seen_;
  bool seen_key_ = false, ended_ = false;
  std::string open_key_;  // a `key:` with nothing after it, whose list may follow
  std::vector<std::string>* open_list_ = nullptr;  // its block list, once the first item came
  size_t open_items_ = 0, list_indent_ = 0, list_items_ = 0;
  bool open_flow_ = false;
};

// --------------------------------------------------------------- .npy headers

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<uint64_t> shape;
  uint64_t data_offset = 0;  // within the record
};

// numpy's header: magic, version, length, then a Python dict literal
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces and '\n'.
NpyHeader parse_npy_header(const uint8_t* p, uint64_t size, const std::string& where) {
  auto bad = [&](const std::string& what) { return ConvertError(where + ": " + what); };
  if (size < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0) throw bad("not a .npy array (no \\x93NUMPY magic)");
  const uint8_t major = p[6];
  uint64_t length = 0, start = 0;
  if (major == 1) {
    length = load_le16(p + 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) throw bad(".npy header is cut");
    length = load_le32(p + 8);
    start = 12;
  } else {
    throw bad(".npy format version " + std::to_string(major) + " (1, 2 and 3 exist)");
  }
  if (length > kMaxNpyHeader || length > size - start)
    throw bad(".npy header length " + std::to_string(length) + " runs past the record (" + std::to_string(size) +
              " bytes) or the limit of " + std::to_string(kMaxNpyHeader));
  const std::string_view h(reinterpret_cast<const char*>(p + start), length);
  NpyHeader out;
  out.data_offset = start + length;
  size_t i = 0;
  auto skip = [&] {
    while (i < h.size() && (h[i] == ' ' || h[i] == '\t' || h[i] == '\n' || h[i] == '\r')) ++i;
  };
  auto expect = [&](char c) {
    skip();
    if (i == h.size() || h[i] != c) throw bad(".npy header: expected '" + std::string(1, c) + "' at byte " +
                                              std::to_string(i) + " of " + detail::quoted(h, 120));
    ++i;
  };
  auto string = [&] {
    skip();
    if (i == h.size() || (h[i] != '\'' && h[i] != '"')) throw bad(".npy header: expected a string in " + detail::quoted(h, 120));
    const char q = h[i++];
    const size_t close = h.find(q, i);
    if (close == std::string_view::npos) throw bad(".npy header: unterminated string");
    std::string s(h.substr(i, close - i));
    i = close + 1;
    return s;
  };
  bool has_descr = false, has_order = false, has_shape = false;
  expect('{');
  for (;;) {
    skip();
    if (i < h.size() && h[i] == '}') {
      ++i;
      break;
    }
    const std::string key = string();
    expect(':');
    skip();
    if (key == "descr" && !has_descr) {
      has_descr = true;
      out.descr = string();
    } else if (key == "fortran_order" && !has_order) {
      has_order = true;
      if (h.substr(i, 4) == "True") {
        out.fortran_order = true;
        i += 4;
      } else if (h.substr(i, 5) == "False") {
        i += 5;
      } else {
        throw bad(".npy header: fortran_order is neither True nor False");
      }
    } else if (key == "shape" && !has_shape) {
      has_shape = true;
      expect('(');
      for (;;) {
        skip();
        if (i < h.size() && h[i] == ')') {
          ++i;
          break;
        }
        if (i == h.size() || h[i] < '0' || h[i] > '9') throw bad(".npy header: bad shape in " + detail::quoted(h, 120));
        uint64_t dim = 0;
        while (i < h.size() && h[i] >= '0' && h[i] <= '9') {
          if (!checked_mul(dim, 10, &dim) || !checked_add(dim, static_cast<uint64_t>(h[i] - '0'), &dim))
            throw bad(".npy header: a dimension overflows");
          ++i;
        }
        if (out.shape.size() == kMaxTensorDims)
          throw bad("shape has more than the limit of " + std::to_string(kMaxTensorDims) + " dimensions");
        out.shape.push_back(dim);
        skip();
        if (i < h.size() && h[i] == ',') ++i;
        else if (i == h.size() || h[i] != ')') throw bad(".npy header: bad shape in " + detail::quoted(h, 120));
      }
    } else {
      throw bad(".npy header: unexpected or repeated key " + detail::quoted(key));
    }
    skip();
    if (i < h.size() && h[i] == ',') ++i;
    else if (i == h.size() || h[i] != '}') throw bad(".npy header: expected ',' or '}' in " + detail::quoted(h, 120));
  }
  skip();
  if (i != h.size()) throw bad(".npy header: text after the dictionary");
  if (!has_descr || !has_order || !has_shape) throw bad(".npy header lacks descr, fortran_order or shape");
  return out;
}

// ------------------------------------------------------------------- the file

class MarianFile final : public MarianModelFile {
 public:
  MarianFile(std::unique_ptr<MappedFile> mapped, std::vector<uint8_t> owned, std::string path)
      : mapped_(std::move(mapped)), owned_(std::move(owned)), path_(std::move(path)) {
    bytes_ = mapped_ ? mapped_->data() : owned_.data();
    size_ = mapped_ ? mapped_->size() : owned_.size();
    if (ZipArchive::looks_like_zip(bytes_, size_)) {
      npz_ = true;
      parse_npz();
    } else {
      parse_binary();
    }
  }

  const std::string& path() const override { return path_; }
  std::string format() const override { return npz_ ? ".npz" : "binary (.bin)"; }  // callers say "Marian ..."

  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    out.reserve(items_.size());
    for (const auto& [name, item] : items_) out.push_back(name);
    return out;
  }

  const TensorInfo* find(const std::string& name) const override {
    auto it = items_.find(name);
    return it == items_.end() ? nullptr : &it->second;
  }

  const MarianOptions& options() const override { return options_; }

  std::vector<float> read_f32(const std::string& name) const override {
    const Item& item = item_named(name);
    std::vector<float> out(item.elements);
    if (item.type == kIntgemm8) {
      const Intgemm8Matrix m = read_intgemm8(name);
      const float inverse = 1.0f / m.multiplier;  // as marian's unquantizeWemb: q * (1/quantMult)
      if (is_embedding(name)) {
        for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(m.values[i]) * inverse;
      } else {
        // Stored [out][in] (x·W's W transposed); the logical shape is [in, out].
        for (uint64_t o = 0; o < m.rows; ++o)
          for (uint64_t i = 0; i < m.cols; ++i)
            out[i * m.rows + o] = static_cast<float>(m.values[o * m.cols + i]) * inverse;
      }
    } else {
      const uint8_t* p = data(item);
      if (item.type == kFloat32) {
        for (size_t i = 0; i < out.size(); ++i) std::memcpy(&out[i], p + 4 * i, 4);
      } else {
        for (size_t i = 0; i < out.size(); ++i) out[i] = kernels::half_to_float(load_le16(p + 2 * i));
      }
    }
    for (size_t i = 0; i < out.size(); ++i)
      if (!std::isfinite(out[i]))
        throw ConvertError(path_ + ": item " + detail::quoted(name) + " holds a non-finite value (NaN or Inf) at element " +
                           std::to_string(i));
    return out;
  }

  Intgemm8Matrix read_intgemm8(const std::string& name) const override {
    const Item& item = item_named(name);
    if (item.type != kIntgemm8)
      throw ConvertError(path_ + ": item " + detail::quoted(name) + " is " + type_name(item.type) + ", not intgemm8");
    const uint8_t* p = data(item);
    Intgemm8Matrix m;
    const uint64_t last = item.shape.back();  // nonzero: checked when parsed
    if (is_embedding(name)) {
      m.rows = item.elements / last;
      m.cols = last;
    } else {
      m.rows = last;
      m.cols = item.elements / last;
    }
    m.values.resize(item.elements);
    std::memcpy(m.values.data(), p, item.elements);
    std::memcpy(&m.multiplier, p + item.elements, 4);
    if (!(m.multiplier > 0) || !std::isfinite(m.multiplier) || !std::isfinite(1.0f / m.multiplier))
      throw ConvertError(path_ + ": item " + detail::quoted(name) + ": quantization multiplier " +
                         std::to_string(m.multiplier) + " is not a positive number with a finite inverse");
    return m;
  }

 private:
  const Item& item_named(const std::string& name) const {
    auto it = items_.find(name);
    if (it == items_.end()) throw ConvertError(path_ + ": missing tensor " + detail::quoted(name));
    return it->second;
  }

  const uint8_t* data(const Item& item) const {
    if (item.record) return zip_->verified_data(*item.record) + item.offset;
    return bytes_ + item.offset;
  }

  [[noreturn]] void fail(const std::string& what) const { throw ConvertError(path_ + ": " + what); }

  void parse_binary() {
    if (size_ < 16)
      fail("too small for a Marian model file (" + std::to_string(size_) + " bytes; .bin or .npz expected)");
    const uint64_t version = load_le64(bytes_);
    if (version != kBinaryVersion)
      fail("Marian binary format version " + std::to_string(version) + " (only version 1 exists; not a Marian .bin?)");
    const uint64_t count = load_le64(bytes_ + 8);
    uint64_t pos = 16;
    if (count > (size_ - pos) / kItemHeaderBytes)
      fail("declares " + std::to_string(count) + " items, whose headers alone need more than the file's " +
           std::to_string(size_) + " bytes (truncated, or not a Marian .bin?)");
    if (count > kMaxItems)
      fail("declares " + std::to_string(count) + " items, more than the limit of " + std::to_string(kMaxItems) +
           " items");
    struct Header {
      uint64_t name_length, type, shape_length, data_length;
    };
    std::vector<Header> headers(count);
    for (auto& h : headers) {
      h = {load_le64(bytes_ + pos), load_le64(bytes_ + pos + 8), load_le64(bytes_ + pos + 16),
           load_le64(bytes_ + pos + 24)};
      pos += kItemHeaderBytes;
    }
    std::vector<std::string> names(count);
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t length = headers[i].name_length;
      const std::string where = "item " + std::to_string(i);
      if (length == 0 || length > kMaxNameBytes)
        fail(where + ": name length " + std::to_string(length) + " outside 1.." + std::to_string(kMaxNameBytes) +
             " (with its NUL)");
      if (length > size_ - pos) fail(where + ": name runs past the end of the file (truncated?)");
      const char* s = reinterpret_cast<const char*>(bytes_ + pos);
      if (s[length - 1] != '\0') fail(where + ": name " + detail::quoted(std::string_view(s, length)) + " lacks its NUL");
      names[i].assign(s, length - 1);
      if (names[i].find('\0') != std::string::npos || names[i].empty())
        fail(where + ": name " + detail::quoted(names[i]) + " is empty or holds a NUL");
      pos += length;
    }
    std::vector<Item> items(count);
    for (uint64_t i = 0; i < count; ++i) {
      const std::string where = "item " + detail::quoted(names[i]);
      const uint64_t dims = headers[i].shape_length;
      if (dims > kMaxTensorDims)
        fail(where + ": shape has " + std::to_string(dims) + " dimensions, more than the limit of " +
             std::to_string(kMaxTensorDims));
      if (4 * dims > size_ - pos) fail(where + ": shape runs past the end of the file (truncated?)");
      for (uint64_t d = 0; d < dims; ++d) {
        const auto dim = static_cast<int32_t>(load_le32(bytes_ + pos));
        if (dim < 0) fail(where + ": shape has a negative dimension " + std::to_string(dim));
        items[i].shape.push_back(static_cast<uint64_t>(dim));
        pos += 4;
      }
    }
    if (size_ - pos < 8) fail("the file ends before the padding length that follows the shapes (truncated?)");
    const uint64_t padding = load_le64(bytes_ + pos);
    pos += 8;
    if (padding > size_ - pos)
      fail("padding of " + std::to_string(padding) + " bytes before the data runs past the end of the file");
    pos += padding;
    for (uint64_t i = 0; i < count; ++i) {
      Item& item = items[i];
      const std::string& name = names[i];
      const std::string where = "item " + detail::quoted(name);
      item.type = headers[i].type;
      const uint64_t length = headers[i].data_length;
      if (length > size_ - pos)
        fail(where + ": its " + std::to_string(length) + " bytes at offset " + std::to_string(pos) +
             " run past the end of the file (" + std::to_string(size_) + " bytes; truncated?)");
      item.offset = pos;
      pos += length;
      detail::CheckedSize required(1);
      for (uint64_t d : item.shape) required *= d;
      item.elements = required.value();
      if (name == kModelYml) {
        if (item.type != kInt8) fail(where + " has type " + type_name(item.type) + ", expected int8 (text)");
      } else if (item.type == kFloat32 || item.type == kFloat16) {
        item.dtype = item.type == kFloat32 ? "F32" : "F16";
        required *= item.type == kFloat32 ? 4 : 2;
      } else if (item.type == kIntgemm8) {
        item.dtype = "INTGEMM8";
        if (item.shape.empty() || item.elements == 0)
          fail(where + ": an intgemm8 matrix needs a shape with at least one element");
        required += detail::CheckedSize(4);  // the int8 values, then the float32 quantization multiplier
      } else if (item.type == kIntgemm16) {
        fail(where + " has type intgemm16 (int16 intgemm weights), which is not supported; use the float32 or "
                     "intgemm8 model");
      } else if ((item.type & kPackedClass) != 0) {
        fail(where + " has type " + type_name(item.type) +
             " (FBGEMM's CPU-specific packing), which cannot be read; use the float32 or intgemm8 model");
      } else {
        fail(where + " has type " + type_name(item.type) + ", not float32, float16 or intgemm8");
      }
      if (!required.ok() || length < required.value())
        fail(where + ": holds " + std::to_string(length) + " bytes but its shape and type need " +
             (required.ok() ? std::to_string(required.value()) : std::string("more than 2^64")));
      add_item(name, std::move(item));
    }
    if (pos != size_)
      fail(std::to_string(size_ - pos) + " bytes after the last item's data (a damaged or concatenated file?)");
    finish();
  }

  void parse_npz() {
    try {
      zip_ = std::make_unique<ZipArchive>(bytes_, size_, path_);
    } catch (const ConvertError& e) {
      const std::string what = e.what();
      if (what.find(" is compressed (method ") != std::string::npos)
        throw ConvertError(what + "; Marian (cnpy) reads only stored .npz records, as numpy.savez writes them "
                                  "(not savez_compressed)");
      throw;
    }
    for (const ZipRecord& r : zip_->records()) {
      const std::string where = "record " + detail::quoted(r.name);
      if (r.name.size() <= 4 || r.name.compare(r.name.size() - 4, 4, ".npy") != 0)
        fail(where + " is not a .npy array (Marian's .npz holds <item>.npy records)");
      const std::string name = r.name.substr(0, r.name.size() - 4);
      const uint8_t* p = bytes_ + r.data_offset;
      if (name == kModelYml) p = zip_->verified_data(r);  // read now: check its CRC first
      const NpyHeader h = parse_npy_header(p, r.size, path_ + ": " + where);
      Item item;
      item.record = &r;
      item.offset = h.data_offset;
      const std::string item_where = "item " + detail::quoted(name);
      if (h.fortran_order) fail(item_where + " is stored in Fortran order; Marian reads C order only");
      if (h.shape.empty()) fail(item_where + " is a 0-dimensional array; Marian's items have a shape");
      // Marian reads a 1-D array of n values as [1, n] (io.cpp loadItemsFromNpz).
      item.shape = h.shape.size() == 1 ? std::vector<uint64_t>{1, h.shape[0]} : h.shape;
      detail::CheckedSize bytes(1);
      for (uint64_t d : item.shape) bytes *= d;
      item.elements = bytes.value();
      uint64_t element_size = 0;
      if (name == kModelYml) {
        if (h.descr != "<i1" && h.descr != "|i1" && h.descr != "<u1" && h.descr != "|u1")
          fail(item_where + " has dtype " + detail::quoted(h.descr) + ", expected bytes ('|i1', as Marian writes text)");
        item.type = kInt8;
        element_size = 1;
      } else if (h.descr == "<f4") {
        item.type = kFloat32;
        item.dtype = "F32";
        element_size = 4;
      } else if (h.descr == "<f2") {
        item.type = kFloat16;
        item.dtype = "F16";
        element_size = 2;
      } else {
        fail(item_where + " has dtype " + detail::quoted(h.descr) + "; Marian's .npz weights are float32 ('<f4')" +
             " (float16 '<f2' is read too)");
      }
      bytes *= element_size;
      if (!bytes.ok() || bytes.value() != r.size - h.data_offset)
        fail(item_where + ": holds " + std::to_string(r.size - h.data_offset) +
             " bytes of data but its shape and dtype need " +
             (bytes.ok() ? std::to_string(bytes.value()) : std::string("more than 2^64")));
      add_item(name, std::move(item));
    }
    finish();
  }

  void add_item(const std::string& name, Item item) {
    if (name == kModelYml) {
      if (has_yaml_) fail("item " + detail::quoted(name) + " appears twice");
      has_yaml_ = true;
      yaml_ = std::move(item);
      return;
    }
    if (!items_.emplace(name, std::move(item)).second) fail("item " + detail::quoted(name) + " appears twice");
  }

  void finish() {
    if (!has_yaml_) fail("no special:model.yml item (Marian's options); not a Marian model file?");
    const auto* text = reinterpret_cast<const char*>(data(yaml_));
    const size_t length = std::find(text, text + yaml_.elements, '\0') - text;
    if (length == yaml_.elements)
      fail("special:model.yml is not NUL-terminated (Marian reads it as a C string)");
    options_ = parse_marian_yaml(std::string_view(text, length), path_ + ": " + kModelYml);
  }

  std::unique_ptr<MappedFile> mapped_;
  std::vector<uint8_t> owned_;
  std::string path_;
  const uint8_t* bytes_ = nullptr;
  size_t size_ = 0;
  bool npz_ = false;
  std::unique_ptr<ZipArchive> zip_;
  std::map<std::string, Item> items_;
  bool has_yaml_ = false;
  Item yaml_;
  MarianOptions options_;
};

// ------------------------------------------------------------ typed options

bool is_flexible_case(const std::string& s) {  // yaml-cpp's IsFlexibleCase
  auto all = [&](size_t from, bool upper) {
    for (size_t i = from; i < s.size(); ++i)
      if (upper ? !(s[i] >= 'A' && s[i] <= 'Z') : !(s[i] >= 'a' && s[i] <= 'z')) return false;
    return true;
  };
  if (s.empty() || all(0, false)) return true;
  return s[0] >= 'A' && s[0] <= 'Z' && (all(1, false) || all(1, true));
}

}  // namespace

MarianOptions parse_marian_yaml(std::string_view text, const std::string& name) {
  MarianOptions out;
  out.name = name;
  YamlParser(text, out).parse();
  return out;
}

std::vector<std::string> parse_marian_yaml_vocabulary(std::string_view text, const std::string& name) {
  MarianOptions map;
  map.name = name;
  YamlParser(text, map, /*vocabulary=*/true).parse();
  std::vector<std::string> id_to_token;
  std::vector<bool> given;
  for (const auto& [token, id_text] : map.scalars) {
    if (id_text.empty() || id_text.size() > 8 || id_text.find_first_not_of("0123456789") != std::string::npos)
      throw ConvertError(name + ": token " + detail::quoted(token) + " has id " + detail::quoted(id_text) +
                         ", not an integer below 2^24");
    const size_t id = std::stoul(id_text);
    // Gaps are allowed, a few: a tiny file must not declare a 2^24-entry table.
    const size_t limit = std::min(kMaxVocabularyKeys, 2 * map.scalars.size() + 1024);
    if (id >= limit)
      throw ConvertError(name + ": token " + detail::quoted(token) + " has id " + id_text + ", not below " +
                         std::to_string(limit) + " (twice the vocabulary's " + std::to_string(map.scalars.size()) +
                         " tokens + 1024)");
    if (id >= id_to_token.size()) {  // ids a map leaves out are empty tokens, as in Marian
      id_to_token.resize(id + 1);
      given.resize(id + 1);
    }
    if (given[id]) throw ConvertError(name + ": id " + id_text + " is given to two tokens (" + detail::quoted(token) + ")");
    given[id] = true;
    id_to_token[id] = token;
  }
  if (id_to_token.empty()) throw ConvertError(name + ": an empty vocabulary");
  return id_to_token;
}

bool MarianOptions::has(const std::string& key) const { return scalars.count(key) || lists.count(key); }

std::string MarianOptions::text(const std::string& key, const std::string& fallback) const {
  if (lists.count(key)) throw ConvertError(name + ": key " + detail::quoted(key) + " is a list, expected a single value");
  auto it = scalars.find(key);
  return it == scalars.end() ? fallback : it->second;
}

int64_t MarianOptions::integer(const std::string& key, int64_t fallback, int64_t min, int64_t max) const {
  if (!has(key)) return fallback;
  const std::string v = text(key, "");
  auto bad = [&] {
    return ConvertError(name + ": key " + detail::quoted(key) + " must be an integer in [" + std::to_string(min) + ", " +
                        std::to_string(max) + "], got " + detail::quoted(v));
  };
  const char* begin = v.data();
  const char* end = v.data() + v.size();
  if (begin != end && *begin == '+') ++begin;
  int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (begin == end || ec != std::errc() || ptr != end || value < min || value > max) throw bad();
  return value;
}

double MarianOptions::number(const std::string& key, double fallback) const {
  if (!has(key)) return fallback;
  const std::string v = text(key, "");
  const char* begin = v.data();
  const char* end = v.data() + v.size();
  if (begin != end && *begin == '+') ++begin;
  // A stream in the classic locale, not std::from_chars: libc++ (emscripten's) has no
  // floating-point from_chars, and strtod follows the app's locale.
  double value = 0;
  std::istringstream in(std::string(begin, end));
  in.imbue(std::locale::classic());
  in >> value;
  const bool whole = !in.fail() && in.peek() == std::char_traits<char>::eof();
  if (begin == end || std::isspace(static_cast<unsigned char>(*begin)) || !whole || !std::isfinite(value))
    throw ConvertError(name + ": key " + detail::quoted(key) + " must be a finite number, got " + detail::quoted(v));
  return value;
}

bool MarianOptions::flag(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const std::string v = text(key, "");
  if (is_flexible_case(v)) {
    std::string lower = v;
    for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    if (lower == "true" || lower == "yes" || lower == "y" || lower == "on") return true;
    if (lower == "false" || lower == "no" || lower == "n" || lower == "off") return false;
  }
  throw ConvertError(name + ": key " + detail::quoted(key) + " must be true or false, got " + detail::quoted(v));
}

std::vector<std::string> MarianOptions::list(const std::string& key) const {
  if (scalars.count(key)) throw ConvertError(name + ": key " + detail::quoted(key) + " is a single value, expected a list");
  auto it = lists.find(key);
  return it == lists.end() ? std::vector<std::string>{} : it->second;
}

std::unique_ptr<MarianModelFile> open_marian_model(const std::string& path) {
  return std::make_unique<MarianFile>(std::make_unique<MappedFile>(path), std::vector<uint8_t>{}, path);
}

std::unique_ptr<MarianModelFile> open_marian_model_bytes(std::vector<uint8_t> bytes, const std::string& name) {
  return std::make_unique<MarianFile>(nullptr, std::move(bytes), name);
}

}  // namespace petrel::convert
