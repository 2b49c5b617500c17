// A small JSON reader (RFC 8259) for untrusted text such as a JSON Schema: the whole text
// becomes a JsonDocument, a flat arena of nodes (a container's children are a run of
// indices), so neither parsing nor destroying a deep value recurses.
//
// Checked: UTF-8 (well-formed, no surrogates), \u escapes (a surrogate pair is one code
// point; a lone surrogate is an error), numbers in RFC 8259's grammar, no duplicate key
// in an object, nothing after the value but whitespace. Limits, each an error naming it:
// kMaxJsonBytes of text, kMaxJsonDepth open containers, kMaxJsonNodes values and keys.
// Errors (kInvalidArgument) say "JSON byte N: what" (N: the 0-based offset).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "petrel/status.h"

namespace petrel::text {

constexpr size_t kMaxJsonBytes = size_t{16} << 20;
constexpr size_t kMaxJsonDepth = 128;
constexpr size_t kMaxJsonNodes = size_t{1} << 22;

enum class JsonKind : uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };

class JsonDocument {
 public:
  struct Node {
    JsonKind kind = JsonKind::kNull;
    bool boolean = false;
    uint32_t offset = 0;  // where the value starts in the text
    uint32_t first = 0;   // kArray / kObject: children [first, first + count) of children()
    uint32_t count = 0;
    std::string text;     // kString: the decoded UTF-8; kNumber: its text as written
  };

  const Node& node(uint32_t i) const { return nodes_[i]; }
  uint32_t root() const { return root_; }
  size_t size() const { return nodes_.size(); }

  // Array element k of node i (kArray), or the value of member k (kObject).
  uint32_t child(uint32_t i, uint32_t k) const { return children_[nodes_[i].first + k]; }
  // Member k's key of object i (a kString node).
  uint32_t key(uint32_t i, uint32_t k) const { return keys_[nodes_[i].first + k]; }
  const std::string& key_text(uint32_t i, uint32_t k) const { return nodes_[key(i, k)].text; }
  // The member of object i named `name`, or UINT32_MAX (linear in the members).
  uint32_t find(uint32_t i, std::string_view name) const;

  // kNumber: whether it is a whole number (1, -20, 1.0, 1e3) and its value within
  // +-2^53 (integers of that size are exact); false otherwise.
  bool integer_value(uint32_t i, int64_t* value) const;
  double number_value(uint32_t i) const;

 private:
  friend Result<JsonDocument> parse_json(std::string_view text);
  std::vector<Node> nodes_;
  std::vector<uint32_t> children_;  // values, by container, each container's run contiguous
  std::vector<uint32_t> keys_;      // parallel to children_: the key node of an object's member
  uint32_t root_ = 0;
};

Result<JsonDocument> parse_json(std::string_view text);

// `s` as a JSON string literal (quotes included): '"', '\' and control characters escaped
// (\n \r \t \b \f or \u00XX), everything else as is. `s` must be valid UTF-8.
std::string json_quote(std::string_view s);

}  // namespace petrel::text
