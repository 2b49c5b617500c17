// LibreTranslate's API for translation models: POST /translate (JSON or form fields: q
// as a string or a list, source, target, format text|html, alternatives, api_key) and
// GET /languages; errors as {"error": "..."}.
#pragma once

#include "serve/server_state.h"

namespace petrel::serve {

void add_libretranslate_routes(ServerState& state);

}  // namespace petrel::serve
