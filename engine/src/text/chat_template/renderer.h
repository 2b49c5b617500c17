// The renderer of chat templates: a parsed template walked with Python's value semantics
// (str(), truthiness, slicing by code point) under the work, value and output budgets.
// The Renderer is one class over five files, by what its methods do:
//   renderer.cpp      its state: the budgets, strings, lists, dicts, output, variables; the statements
//   conversions.cpp   iteration as a list, str(), repr(), tojson; ==, < and `in`
//   expressions.cpp   expressions: names, literals, operators, subscripts, slices, the functions
//   methods.cpp       the string and dict methods
//   filters.cpp       the filters and tests
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/string_hash.h"
#include "petrel/status.h"
#include "text/chat_template.h"
#include "text/chat_template/parser.h"
#include "text/chat_template/value.h"

namespace petrel::text::chat_template_detail {

// The work budget (kMaxSteps). The rule: a step is at most ~50 ns of work on this
// machine (release build; each kind of operation run in a loop until a budget stopped
// it took 1-38 ns per step), so the whole budget is at most a second. Real templates
// take 0.5-0.9 M steps for a 1 MB, 200-message conversation. A step is
// one statement or expression node, one value copied, compared or looked up (a variable
// or a key: hashed), or the bytes below; a loop turn's bookkeeping is 8. Every operation
// is charged before it runs for the most its operands' sizes let it do (strip(), which
// may stop early, for the whole string); a non-ASCII strip() test, charged one by one,
// is charged before it is made.
constexpr uint64_t kBytesPerStep = 16;           // copied, compared, searched or hashed
constexpr uint64_t kDecodedBytesPerStep = 8;     // walked code point by code point
constexpr uint64_t kAccountedBytesPerStep = 32;  // allocated (the value budget's bytes): the allocation, first use and free
constexpr uint64_t kOutputBytesPerStep = 8;      // written to the output: fresh memory, grown by copies
constexpr uint64_t kStepsPerFloatTry = 16;       // repr(float): a printf and a strtod per precision tried

// The value budget (kMaxAllocatedBytes) counts the real bytes of everything a render
// allocates, before it is allocated, freed or not (so what it holds at once is below
// it): a Value in a list, make_shared's block of a string, list or dict (the object
// beside its control block), a string's heap past its small-string buffer, a dict's
// entries and index, a vector's whole capacity, malloc's header. These are libstdc++'s
// layouts; elsewhere they are estimates of the same order.
constexpr uint64_t kMallocBytes = 16;
constexpr uint64_t shared_block_bytes(uint64_t object_bytes) {
  return object_bytes + 16 + kMallocBytes;  // vtable pointer and use counts, then the object
}
inline uint64_t heap_bytes(uint64_t capacity) {  // a std::string's buffer, past the 15 bytes it holds inside
  return capacity > 15 ? capacity + 1 + kMallocBytes : 0;
}
inline uint64_t string_bytes(uint64_t size) { return shared_block_bytes(kStringBytes) + heap_bytes(size); }

constexpr size_t kMaxStringBytes = ChatTemplate::kMaxOutputBytes;  // the longest string a render builds
constexpr size_t kMaxListItems = ChatTemplate::kMaxOutputBytes;    // the longest list
constexpr size_t kNowhere = SIZE_MAX;                              // an error with no place in the template

enum class Flow : uint8_t { kNormal, kBreak, kContinue };

inline Value list_value(std::shared_ptr<const ListData> list) {
  Value v;
  v.kind = Kind::kList;
  v.object = std::move(list);
  return v;
}
inline Value dict_value(std::shared_ptr<DictData> dict) {
  Value v;
  v.kind = Kind::kDict;
  v.object = std::move(dict);
  return v;
}

class Renderer {
 public:
  explicit Renderer(const Program& program) : program_(program) {}
  ~Renderer();

  Result<std::string> run(const ChatTemplateInputs& inputs);

  // After std::bad_alloc or std::length_error: what the render held is let go first.
  Error out_of_memory();

 private:
  struct Binding {
    size_t scope;
    Value value;
  };

  inline static const std::string kMessages = "messages", kAddGenerationPrompt = "add_generation_prompt",
                                  kTools = "tools", kDocuments = "documents", kLoop = "loop";

  // -- errors and budgets
  std::string where(size_t offset) const;
  bool fail(size_t offset, const std::string& what, ErrorCode code = ErrorCode::kInvalidArgument);
  bool too_long(size_t offset);
  bool charge(uint64_t steps);
  bool account(size_t offset, uint64_t bytes);

  // -- strings: every one is built here, its bytes accounted before they are taken
  bool reserve_text(size_t offset, std::string& s, uint64_t more);
  bool append(size_t offset, std::string& s, std::string_view piece);
  bool new_string(size_t offset, std::string_view text, Value& out);
  bool finish_string(size_t offset, std::string&& built, Value& out);

  // -- lists
  bool reserve_values(size_t offset, std::vector<Value>& items, uint64_t more);
  bool push_value(size_t offset, std::vector<Value>& items, Value v);
  bool make_list(size_t offset, std::vector<Value>&& items, Value& out, bool is_tuple = false);

  // -- dicts
  bool new_dict(size_t offset, size_t count, bool is_ns, std::shared_ptr<DictData>& out);
  bool dict_set(size_t offset, DictData& dict, std::string_view key, Value value);

  // -- output
  bool emit(size_t offset, std::string_view text);

  // -- variables: one hash map from a name to its bindings, innermost last; each open
  // scope (the template's, then one per for loop, at most kMaxNesting) lists the names
  // it bound. A binding is made by a {% set %} or a loop's names, so there are at most as
  // many as the template has of those, whatever the render does.
  bool set_variable(const std::string& name, Value value);
  bool lookup(const std::string& name, const Value*& out);
  void pop_scope();
  bool new_messages(const std::vector<ChatMessage>& messages, Value& out);

  // -- statements
  bool render_body(const Body& body, Flow& flow);
  bool render_set(const Node& node);
  bool render_for(const Node& node);
  bool bind_targets(const Node& node, const Value& item);

  // -- conversions (conversions.cpp)
  bool as_list(size_t offset, const Value& v, Value& out);
  bool to_text(size_t offset, const Value& v, std::string& out);
  bool text_of(size_t offset, const Value& v, std::string& scratch, std::string_view& text);
  bool repr(size_t offset, const Value& v, std::string& out, bool quote_strings = true);
  bool append_float(size_t offset, std::string& out, double number);
  bool append_repr(size_t offset, std::string& out, std::string_view s);
  bool to_json(size_t offset, const Value& v, int64_t indent, int level, std::string& out);
  bool append_json(size_t offset, std::string& out, std::string_view s);
  bool equal(const Value& a, const Value& b, bool& result);
  bool less(size_t offset, const Value& a, const Value& b, bool& result);
  bool contains(size_t offset, const Value& item, const Value& container, bool& result);

  // -- expressions (expressions.cpp)
  bool eval(const Expr& e, Value& out);
  bool concatenate(size_t offset, std::string_view left, std::string_view right, Value& out);
  bool eval_args(const Expr& e, size_t first, std::vector<Value>& args, std::vector<std::pair<std::string, Value>>& kwargs);
  bool attribute(const Value& object, std::string_view name, Value& out);
  bool subscript(size_t offset, const Value& object, const Value& key, Value& out);
  bool eval_slice(const Expr& e, Value& out);
  bool eval_binary(const Expr& e, Value& out);
  bool repeat(size_t offset, const Value& sequence, int64_t times_given, Value& out);
  bool call_function(const Expr& e, Value& out);

  // -- methods (methods.cpp)
  bool strip(size_t offset, std::string_view s, const Value* chars, bool left, bool right, Value& out);
  bool split(size_t offset, std::string_view s, const std::vector<Value>& args, Value& out);
  bool replace(size_t offset, std::string_view s, const std::vector<Value>& args, Value& out);
  bool starts_or_ends(size_t offset, std::string_view s, const std::vector<Value>& args, bool ends, Value& out);
  bool case_map(size_t offset, std::string_view s, const std::string& how, Value& out);
  bool dict_view(size_t offset, const DictData& dict, const std::string& what, Value& out);
  bool call_method(const Expr& e, Value& out);

  // -- filters and tests (filters.cpp)
  bool apply_filter(size_t offset, const std::string& f, const Value& v, const std::vector<Value>& args,
                    const std::vector<std::pair<std::string, Value>>& kwargs, Value& out);
  bool join(size_t offset, const Value& v, const Value* separator, const Value* attribute_name, Value& out);
  bool list_or_reverse(size_t offset, const Value& v, bool reverse, Value& out);
  bool select_or_map(size_t offset, const std::string& f, const Value& v, const std::vector<Value>& args,
                     const std::vector<std::pair<std::string, Value>>& kwargs, Value& out);
  bool apply_test(size_t offset, const std::string& t, const Value& v, const std::vector<Value>& args, bool& result);

  const Program& program_;
  std::string out_;
  size_t max_output_ = 0;
  uint64_t steps_ = 0;
  uint64_t allocated_ = 0;
  size_t at_ = kNowhere;  // the node being rendered, for errors of the budgets
  Error error_{ErrorCode::kInternal, ""};
  detail::StringMap<std::string, std::vector<Binding>> variables_;
  std::vector<std::vector<std::vector<Binding>*>> scopes_;
  std::vector<std::weak_ptr<DictData>> namespaces_;
};

}  // namespace petrel::text::chat_template_detail
