// The Renderer's state (renderer.h): the budgets, the strings, lists and dicts it
// builds, the output, the variables; and the statements.
#include "text/chat_template/renderer.h"

#include <algorithm>

#include "text/chat_template/lexer.h"

namespace petrel::text::chat_template_detail {

Renderer::~Renderer() {
  // Namespaces are the only mutable values and none can be put in a value, so none
  // can reach itself; clearing the live ones would break a cycle all the same.
  for (const std::weak_ptr<DictData>& weak : namespaces_)
    if (std::shared_ptr<DictData> ns = weak.lock()) ns->clear();
}

Result<std::string> Renderer::run(const ChatTemplateInputs& inputs) {
  max_output_ = std::min(inputs.max_output_bytes, ChatTemplate::kMaxOutputBytes);
  scopes_.emplace_back();
  Value messages;
  if (!new_messages(inputs.messages, messages) || !set_variable(kMessages, std::move(messages)) ||
      !set_variable(kAddGenerationPrompt, Value::of_bool(inputs.add_generation_prompt)) ||
      !set_variable(kTools, Value::none()) || !set_variable(kDocuments, Value::none()))
    return error_;
  for (const auto& [name, value] : inputs.strings) {
    Value v;
    if (!new_string(kNowhere, value, v) || !set_variable(name, std::move(v))) return error_;
  }
  for (const auto& [name, value] : inputs.flags)
    if (!set_variable(name, Value::of_bool(value))) return error_;
  Flow flow = Flow::kNormal;
  if (!render_body(program_.body, flow)) return error_;
  return std::move(out_);
}

// After std::bad_alloc or std::length_error: what the render held is let go first.
Error Renderer::out_of_memory() {
  out_ = std::string();
  while (scopes_.size() > 1) pop_scope();
  variables_.clear();
  return Error{ErrorCode::kOutOfMemory, "chat template" + where(at_) + ": out of memory while rendering"};
}

std::string Renderer::where(size_t offset) const {
  return offset == kNowhere ? std::string() : " " + line_column(program_.source, offset);
}

bool Renderer::fail(size_t offset, const std::string& what, ErrorCode code) {
  error_ = Error{code, "chat template" + where(offset) + ": " + what};
  return false;
}

bool Renderer::too_long(size_t offset) {
  return fail(offset, "a string longer than " + std::to_string(kMaxStringBytes) + " bytes", ErrorCode::kOutOfMemory);
}

bool Renderer::charge(uint64_t steps) {
  if (steps <= ChatTemplate::kMaxSteps - steps_) {
    steps_ += steps;
    return true;
  }
  steps_ = ChatTemplate::kMaxSteps;
  return fail(at_, "rendering needs more than " + std::to_string(ChatTemplate::kMaxSteps) + " steps of work");
}

bool Renderer::account(size_t offset, uint64_t bytes) {
  if (bytes <= ChatTemplate::kMaxAllocatedBytes - allocated_) {
    allocated_ += bytes;
    return charge(bytes / kAccountedBytesPerStep);
  }
  return fail(offset, "rendering builds more than " + std::to_string(ChatTemplate::kMaxAllocatedBytes) + " bytes of values",
              ErrorCode::kOutOfMemory);
}

// Room for `more` bytes in `s`: what it needs, or twice its capacity (at most the
// longest string).
bool Renderer::reserve_text(size_t offset, std::string& s, uint64_t more) {
  if (more > kMaxStringBytes - s.size()) return too_long(offset);
  const size_t need = s.size() + static_cast<size_t>(more);
  if (need <= s.capacity()) return true;
  const size_t capacity = std::max(need, std::min(2 * s.capacity(), kMaxStringBytes));
  if (!account(offset, heap_bytes(capacity))) return false;
  s.reserve(capacity);
  return true;
}

bool Renderer::append(size_t offset, std::string& s, std::string_view piece) {
  if (!charge(piece.size() / kBytesPerStep) || !reserve_text(offset, s, piece.size())) return false;
  s.append(piece);
  return true;
}

// A string value holding a copy of `text`.
bool Renderer::new_string(size_t offset, std::string_view text, Value& out) {
  if (text.size() > kMaxStringBytes) return too_long(offset);
  if (!charge(1 + text.size() / kBytesPerStep) || !account(offset, string_bytes(text.size()))) return false;
  out = Value::of_string(std::string(text));
  return true;
}

// A string value of `built`, whose heap reserve_text() accounted.
bool Renderer::finish_string(size_t offset, std::string&& built, Value& out) {
  if (!charge(1) || !account(offset, shared_block_bytes(kStringBytes))) return false;
  out = Value::of_string(std::move(built));
  return true;
}

// Room for `more` items in `items`: what it needs, or twice its capacity.
bool Renderer::reserve_values(size_t offset, std::vector<Value>& items, uint64_t more) {
  if (more > kMaxListItems - items.size())
    return fail(offset, "a list longer than " + std::to_string(kMaxListItems) + " items", ErrorCode::kOutOfMemory);
  const size_t need = items.size() + static_cast<size_t>(more);
  if (need <= items.capacity()) return true;
  const size_t capacity = std::max(need, std::min(2 * items.capacity(), kMaxListItems));
  if (!account(offset, uint64_t{capacity} * kValueBytes + kMallocBytes)) return false;
  items.reserve(capacity);
  return true;
}

bool Renderer::push_value(size_t offset, std::vector<Value>& items, Value v) {
  if (!reserve_values(offset, items, 1)) return false;
  items.push_back(std::move(v));
  return true;
}

// A list value of `items`, whose buffer reserve_values() accounted.
bool Renderer::make_list(size_t offset, std::vector<Value>&& items, Value& out, bool is_tuple) {
  if (!charge(1 + items.size() / kBytesPerStep) || !account(offset, shared_block_bytes(kListBytes))) return false;
  auto list = std::make_shared<ListData>();
  for (const Value& v : items) {
    if (is_mutable(v)) return fail(offset, "a namespace or loop cannot be put in a list");
    list->depth = std::max(list->depth, depth_of(v) + 1);
  }
  if (list->depth > kMaxValueDepth)
    return fail(offset, "lists or dicts nested more than " + std::to_string(kMaxValueDepth) + " deep");
  list->items = std::move(items);
  list->is_tuple = is_tuple;
  out = list_value(std::move(list));
  return true;
}

// A dict with room for `count` entries.
bool Renderer::new_dict(size_t offset, size_t count, bool is_ns, std::shared_ptr<DictData>& out) {
  if (count > kMaxListItems)
    return fail(offset, "a dict of more than " + std::to_string(kMaxListItems) + " keys", ErrorCode::kOutOfMemory);
  const uint64_t registry = is_ns ? 2 * kWeakPtrBytes : 0;
  if (!charge(1 + count / kBytesPerStep) ||
      !account(offset, shared_block_bytes(kDictBytes) + DictData::table_bytes(count) + registry))
    return false;
  out = std::make_shared<DictData>();
  out->is_namespace = is_ns;
  out->reserve(count);
  if (is_ns) namespaces_.push_back(out);
  return true;
}

// dict[key] = value: replaced where it is, or appended (its room accounted first).
bool Renderer::dict_set(size_t offset, DictData& dict, std::string_view key, Value value) {
  if (is_mutable(value)) return fail(offset, "a namespace or loop cannot be put in a dict or namespace");
  const int depth = std::max(dict.depth, depth_of(value) + 1);
  if (depth > kMaxValueDepth)
    return fail(offset, "lists or dicts nested more than " + std::to_string(kMaxValueDepth) + " deep");
  // Two hashes of the key (find, then index) and, amortized, its share of the index's rebuilds.
  if (!charge(2 * (1 + key.size() / kBytesPerStep))) return false;
  if (key.size() > kMaxStringBytes) return too_long(offset);
  dict.depth = depth;
  if (Value* existing = dict.find(key)) {
    *existing = std::move(value);
    return true;
  }
  uint64_t bytes = heap_bytes(key.size());
  size_t capacity = dict.entries.capacity();
  if (dict.entries.size() == capacity) {
    capacity = std::max<size_t>(4, 2 * capacity);
    bytes += DictData::table_bytes(capacity);
  }
  if (!account(offset, bytes)) return false;
  dict.reserve(capacity);
  dict.append(std::string(key), std::move(value));
  return true;
}

bool Renderer::emit(size_t offset, std::string_view text) {
  if (text.size() > max_output_ - out_.size())
    return fail(offset, "the output would be longer than " + std::to_string(max_output_) + " bytes", ErrorCode::kOutOfMemory);
  if (!charge(1 + text.size() / kOutputBytesPerStep)) return false;
  const size_t need = out_.size() + text.size();
  if (need > out_.capacity()) out_.reserve(std::max(need, std::min(2 * out_.capacity(), max_output_)));
  out_.append(text);
  return true;
}

bool Renderer::set_variable(const std::string& name, Value value) {
  if (!charge(1 + name.size() / kBytesPerStep)) return false;
  const size_t scope = scopes_.size() - 1;
  auto found = variables_.find(name);
  if (found == variables_.end()) found = variables_.emplace(name, std::vector<Binding>()).first;
  std::vector<Binding>& bindings = found->second;
  if (!bindings.empty() && bindings.back().scope == scope) {
    bindings.back().value = std::move(value);
    return true;
  }
  bindings.push_back({scope, std::move(value)});
  scopes_.back().push_back(&bindings);
  return true;
}

// The variable's value, or null when it is undefined.
bool Renderer::lookup(const std::string& name, const Value*& out) {
  if (!charge(1 + name.size() / kBytesPerStep)) return false;
  const auto found = variables_.find(name);
  out = found == variables_.end() || found->second.empty() ? nullptr : &found->second.back().value;
  return true;
}

void Renderer::pop_scope() {
  for (std::vector<Binding>* bindings : scopes_.back()) bindings->pop_back();
  scopes_.pop_back();
}

bool Renderer::new_messages(const std::vector<ChatMessage>& messages, Value& out) {
  std::vector<Value> items;
  if (!reserve_values(kNowhere, items, messages.size())) return false;
  for (const ChatMessage& m : messages) {
    Value role, content;
    std::shared_ptr<DictData> message;
    if (!new_string(kNowhere, m.role, role) || !new_string(kNowhere, m.content, content) ||
        !new_dict(kNowhere, 2, false, message))
      return false;
    message->append("role", std::move(role));
    message->append("content", std::move(content));
    items.push_back(dict_value(std::move(message)));
  }
  return make_list(kNowhere, std::move(items), out);
}

bool Renderer::render_body(const Body& body, Flow& flow) {
  for (const std::unique_ptr<Node>& node : body) {
    at_ = node->offset;
    if (!charge(1)) return false;
    switch (node->kind) {
      case NodeKind::kText:
        if (!emit(node->offset, node->text)) return false;
        break;
      case NodeKind::kOutput: {
        Value v;
        if (!eval(*node->expr, v)) return false;
        if (v.is(Kind::kString)) {
          if (!emit(node->offset, v.str())) return false;
        } else {
          std::string text;
          if (!to_text(node->offset, v, text) || !emit(node->offset, text)) return false;
        }
        break;
      }
      case NodeKind::kSet:
        if (!render_set(*node)) return false;
        break;
      case NodeKind::kIf:
        for (const auto& [condition, branch] : node->branches) {
          bool taken = true;
          if (condition) {
            Value v;
            if (!eval(*condition, v)) return false;
            taken = truthy(v);
          }
          if (taken) {
            if (!render_body(branch, flow)) return false;
            break;
          }
        }
        break;
      case NodeKind::kFor:
        if (!render_for(*node)) return false;
        break;
      case NodeKind::kBreak:
        flow = Flow::kBreak;
        break;
      case NodeKind::kContinue:
        flow = Flow::kContinue;
        break;
    }
    if (flow != Flow::kNormal) return true;
  }
  return true;
}

bool Renderer::render_set(const Node& node) {
  Value v;
  if (!eval(*node.expr, v)) return false;
  if (node.attribute.empty()) return set_variable(node.target, std::move(v));
  const Value* target = nullptr;
  if (!lookup(node.target, target)) return false;
  if (!target || !is_namespace(*target))
    return fail(node.offset, "'{% set " + node.target + "." + node.attribute + " %}' needs '" + node.target + "' to be a namespace()");
  const std::shared_ptr<DictData> ns = target->dict_ptr();
  return dict_set(node.offset, *ns, node.attribute, std::move(v));
}

bool Renderer::render_for(const Node& node) {
  Value iterable;
  if (!eval(*node.expr, iterable)) return false;
  // A list is immutable: the loop reads it in place; anything else becomes one.
  if (!as_list(node.offset, iterable, iterable)) return false;
  std::shared_ptr<const ListData> sequence = iterable.list_ptr();
  scopes_.emplace_back();
  struct PopScope {
    ~PopScope() { renderer.pop_scope(); }
    Renderer& renderer;
  } pop{*this};
  if (node.loop_filter) {  // filtered first: loop.index and loop.length count what passes
    std::vector<Value> kept;
    for (const Value& item : sequence->items) {
      if (!charge(1) || !bind_targets(node, item)) return false;
      Value keep;
      if (!eval(*node.loop_filter, keep)) return false;
      if (truthy(keep) && !push_value(node.offset, kept, item)) return false;
    }
    Value filtered;
    if (!make_list(node.offset, std::move(kept), filtered)) return false;
    sequence = filtered.list_ptr();
  }
  const std::vector<Value>& items = sequence->items;
  const int64_t length = static_cast<int64_t>(items.size());
  std::shared_ptr<DictData> loop;
  static const char* const kLoopKeys[] = {"index",    "index0",   "revindex", "revindex0", "first", "last",
                                          "length",   "previtem", "nextitem", "depth",     "depth0"};
  constexpr size_t kLoopKeyCount = sizeof kLoopKeys / sizeof kLoopKeys[0];
  if (!new_dict(node.offset, kLoopKeyCount, false, loop)) return false;
  loop->is_loop = true;
  for (const char* key : kLoopKeys) loop->append(key, Value{});
  loop->entries[9].second = Value::of_int(1);
  loop->entries[10].second = Value::of_int(0);
  if (!set_variable(kLoop, dict_value(loop))) return false;
  for (int64_t i = 0; i < length; ++i) {
    if (!charge(8)) return false;
    auto& entries = loop->entries;
    entries[0].second = Value::of_int(i + 1);
    entries[1].second = Value::of_int(i);
    entries[2].second = Value::of_int(length - i);
    entries[3].second = Value::of_int(length - i - 1);
    entries[4].second = Value::of_bool(i == 0);
    entries[5].second = Value::of_bool(i == length - 1);
    entries[6].second = Value::of_int(length);
    entries[7].second = i > 0 ? items[static_cast<size_t>(i - 1)] : Value{};
    entries[8].second = i + 1 < length ? items[static_cast<size_t>(i + 1)] : Value{};
    if (!bind_targets(node, items[static_cast<size_t>(i)])) return false;
    Flow flow = Flow::kNormal;
    if (!render_body(node.body, flow)) return false;
    if (flow == Flow::kBreak) break;
  }
  if (length == 0) {
    Flow flow = Flow::kNormal;
    if (!render_body(node.else_body, flow)) return false;
  }
  return true;
}

bool Renderer::bind_targets(const Node& node, const Value& item) {
  if (node.targets.size() == 1) return set_variable(node.targets[0], item);
  Value sequence;
  if (!as_list(node.offset, item, sequence)) return false;
  const std::vector<Value>& parts = sequence.list()->items;
  if (parts.size() != node.targets.size())
    return fail(node.offset, "cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(node.targets.size()) + " loop variables");
  for (size_t i = 0; i < parts.size(); ++i)
    if (!set_variable(node.targets[i], parts[i])) return false;
  return true;
}

}  // namespace petrel::text::chat_template_detail
