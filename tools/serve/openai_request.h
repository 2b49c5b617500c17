// Reading OpenAI's completion requests (POST /v1/chat/completions and /v1/completions)
// into the engine's options: every field checked, no model needed (the handlers look the
// model up and run it; tests/fuzz/fuzz_serve_request.cpp reads requests alone).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "petrel/generator.h"
#include "serve/request_json.h"

namespace petrel::serve {

// Sequences one request may ask for (`n` choices of each prompt, prompts of /v1/completions).
constexpr int64_t kMaxChoices = 16;
constexpr size_t kMaxPrompts = 16;

// What a completion request asks for, read and checked.
struct CompletionFields {
  std::vector<ChatMessage> messages;  // /v1/chat/completions: the conversation (not empty)
  std::vector<std::string> prompts;   // /v1/completions: 1..kMaxPrompts texts
  size_t n = 1;                       // choices per prompt, 1..kMaxChoices
  GenerateOptions options;
  bool stream = false, include_usage = false;
};

// The model a request names: 400 when the body is not a JSON object or names none. Read
// before the other fields, so that an unknown model is the error whatever else is wrong.
std::string read_model_field(const nlohmann::json& body);

// The rest of a request to /v1/chat/completions (`messages`) or /v1/completions
// (`prompt`): RequestError (400, `param` naming the field) for a field of the wrong type,
// out of range, or one Petrel does not do (logprobs, tools, echo...).
CompletionFields read_chat_fields(const nlohmann::json& body);
CompletionFields read_completion_fields(const nlohmann::json& body);

}  // namespace petrel::serve
