// OpenAI's API for language models, as llama-server answers it: POST /v1/chat/completions
// and /v1/completions (streamed as server-sent events, or whole), GET /v1/models; errors
// in OpenAI's shape, {"error": {"message", "type", "param", "code"}}.
#pragma once

#include "serve/request_json.h"
#include "serve/server_state.h"

namespace petrel::serve {

void add_openai_routes(ServerState& state);

// The error body and headers of `error` in OpenAI's shape (also /health's).
void send_openai_error(httplib::Response& res, const RequestError& error);

}  // namespace petrel::serve
