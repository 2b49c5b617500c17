// Chat templates: the Jinja subset that models' tokenizer_config.json `chat_template`s
// use, rendered as Hugging Face's apply_chat_template renders them (trim_blocks and
// lstrip_blocks on, one trailing newline of the template dropped). The oracle is
// transformers.js (tests/fixtures/chat_templates, tools/reference/
// make_chat_template_fixtures.mjs); where its bundled Jinja engine cannot run a
// template, Python jinja2 under transformers' settings.
//
// The template comes from an untrusted model file: parse() refuses anything outside the
// subset naming the construct and its line:column, nesting is bounded (no recursion
// deeper than kMaxNesting), and render() stops with an Error past kMaxOutputBytes of
// output or kMaxSteps units of work.
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

struct ChatTemplateInputs {
  std::vector<ChatMessage> messages;
  bool add_generation_prompt = true;
  std::vector<std::pair<std::string, std::string>> strings;  // e.g. bos_token, eos_token, date_string
  std::vector<std::pair<std::string, bool>> flags;           // e.g. enable_thinking
};

namespace chat_template_detail {
struct Program;
}

class ChatTemplate {
 public:
  static constexpr size_t kMaxTemplateBytes = size_t{1} << 20;
  static constexpr size_t kMaxOutputBytes = size_t{16} << 20;  // also the longest string or list a render builds
  static constexpr uint64_t kMaxSteps = 50'000'000;            // expression nodes, loop turns, items and bytes / 16 copied
  static constexpr uint64_t kMaxAllocatedBytes = uint64_t{256} << 20;  // all strings and lists one render builds
  static constexpr int kMaxNesting = 64;                       // blocks in blocks; expression depth is 2x this

  // Compiled once (at model load). Errors are kFormat with "line:column: ...".
  static Result<ChatTemplate> parse(std::string_view source);

  // Thread-safe (const, no shared mutable state). Variables: `messages` (list of
  // {role, content}), `add_generation_prompt`, each of inputs.strings and inputs.flags,
  // `tools` and `documents` as none (as both transformers pass them); any other name is
  // undefined. A template's raise_exception(msg) returns kInvalidArgument whose message
  // holds msg; exceeding a limit returns kOutOfMemory (output) or kInvalidArgument (work).
  Result<std::string> render(const ChatTemplateInputs& inputs) const;

 private:
  std::shared_ptr<const chat_template_detail::Program> program_;
};

}  // namespace petrel::text
