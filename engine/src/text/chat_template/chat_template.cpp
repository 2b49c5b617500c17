// A Jinja subset for chat templates: a lexer with Jinja's whitespace rules
// (trim_blocks, lstrip_blocks, `-`/`+` markers), a parser that keeps open blocks on an
// explicit stack and bounds expression depth, and a tree-walking renderer with
// Python's value semantics (str(), truthiness, slicing by code point) and a work budget.
// Where transformers.js and Python jinja2 differ, the engine follows transformers.js
// for an attribute of an undefined value (undefined, not an error) and Python for the
// rest (str() of values, tojson as transformers' json.dumps(ensure_ascii=False)).
// Each stage has its file here: lexer.h, parser.h, renderer.h (with value.h, the values).
#include "text/chat_template.h"

#include <new>
#include <stdexcept>

#include "text/chat_template/lexer.h"
#include "text/chat_template/parser.h"
#include "text/chat_template/renderer.h"

namespace petrel::text {

Result<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  using namespace chat_template_detail;
  if (source.size() > kMaxTemplateBytes)
    return Error{ErrorCode::kFormat, "chat template: " + std::to_string(source.size()) + " bytes, more than the " +
                                         std::to_string(kMaxTemplateBytes) + " allowed"};
  try {
    auto program = std::make_shared<Program>();
    program->source = normalize_newlines(source);
    std::vector<Token> tokens;
    size_t stopped_at = std::string::npos, error_offset = 0;
    Status lexed = lex(program->source, tokens, &stopped_at);
    if (!lexed) return lexed.error();
    Status parsed = parse_tokens(tokens, program->source, program->body, &error_offset);
    // Past kMaxTokens the tokens read are parsed: an error they hold is the one to tell.
    if (stopped_at != std::string::npos && (parsed || error_offset >= stopped_at))
      return Error{ErrorCode::kFormat, "chat template " + line_column(program->source, stopped_at) + ": more than " +
                                           std::to_string(kMaxTokens) + " tokens (names, operators, values and texts)"};
    if (!parsed) return parsed.error();
    ChatTemplate t;
    t.program_ = std::move(program);
    return t;
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  return Error{ErrorCode::kOutOfMemory, "chat template: out of memory while parsing"};
}

Result<std::string> ChatTemplate::render(const ChatTemplateInputs& inputs) const {
  if (!program_) return Error{ErrorCode::kInvalidArgument, "chat template: not parsed"};
  chat_template_detail::Renderer renderer(*program_);
  try {
    return renderer.run(inputs);
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  try {
    return renderer.out_of_memory();
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kOutOfMemory, "chat template: out of memory while rendering"};
  }
}

}  // namespace petrel::text
