// Chat templates: the Jinja subset that models' tokenizer_config.json `chat_template`s
// use, rendered as Hugging Face's apply_chat_template renders them (trim_blocks and
// lstrip_blocks on, one trailing newline of the template dropped). The oracle is
// transformers.js (tests/fixtures/chat_templates, tools/reference/
// make_chat_template_fixtures.mjs); where its bundled Jinja engine cannot run a
// template, Python jinja2 under transformers' settings.
//
// The template comes from an untrusted model file: parse() refuses anything outside the
// subset naming the construct and its line:column, and more than kMaxTokens tokens;
// nesting is bounded (no recursion deeper than kMaxNesting), and render() stops with an Error past the caller's output
// limit (ChatTemplateInputs::max_output_bytes, at most kMaxOutputBytes), kMaxSteps units
// of work (each operation charged for what it does: chat_template/renderer.h says what a
// step is) or kMaxAllocatedBytes of values. Strings and lists built inside a render are
// limited by the value budget and by kMaxOutputBytes each (bytes or items), not by the
// caller's output limit: a template may build a string longer than what it writes.
// Every size is computed and checked before memory is taken for it; should an
// allocation fail all the same, parse() and render() return kOutOfMemory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "petrel/status.h"

namespace petrel::text {

struct ChatMessage {
  std::string role;
  std::string content;
};

struct ChatTemplateInputs;

namespace chat_template_detail {
struct Program;
}

class ChatTemplate {
 public:
  static constexpr size_t kMaxTemplateBytes = size_t{1} << 20;
  static constexpr size_t kMaxTokens = size_t{1} << 16;  // names, operators, values, texts (real templates: 100-700)
  static constexpr size_t kMaxOutputBytes = size_t{16} << 20;  // the most any caller may allow; also the longest string or list
  static constexpr uint64_t kMaxSteps = 20'000'000;            // units of work (chat_template/renderer.h: what one costs)
  static constexpr uint64_t kMaxAllocatedBytes = uint64_t{64} << 20;  // every value one render builds, freed or not
  static constexpr int kMaxNesting = 64;                       // blocks in blocks; expression depth is 2x this

  // Compiled once (at model load); what it holds is bounded by kMaxTokens. Errors are
  // kFormat with "chat template line:column: ...".
  static Result<ChatTemplate> parse(std::string_view source);

  // Thread-safe (const, no shared mutable state). Variables: `messages` (list of
  // {role, content}), `add_generation_prompt`, each of inputs.strings and inputs.flags,
  // `tools` and `documents` as none (as both transformers pass them); any other name is
  // undefined. A template's raise_exception(msg) returns kInvalidArgument whose message
  // holds msg; exceeding a limit returns kOutOfMemory (output, values) or
  // kInvalidArgument (work). Every message starts with "chat template" and names the
  // template's line:column where there is one.
  Result<std::string> render(const ChatTemplateInputs& inputs) const;

 private:
  std::shared_ptr<const chat_template_detail::Program> program_;
};

struct ChatTemplateInputs {
  std::vector<ChatMessage> messages;
  bool add_generation_prompt = true;
  std::vector<std::pair<std::string, std::string>> strings;  // e.g. bos_token, eos_token, date_string
  std::vector<std::pair<std::string, bool>> flags;           // e.g. enable_thinking
  // The longest output render() may return (kOutOfMemory past it); more than
  // kMaxOutputBytes means kMaxOutputBytes.
  size_t max_output_bytes = ChatTemplate::kMaxOutputBytes;
};

}  // namespace petrel::text
