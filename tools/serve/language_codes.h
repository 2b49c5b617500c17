// Language codes as LibreTranslate's clients send them (ISO 639-1 where the language has
// one: "en", "de"; "zt" for traditional Chinese) from a multilingual model's own
// (NLLB "eng_Latn", M2M100 "__en__", mBART-50 "en_XX", opus-mt ">>fra<<"), and their names.
#pragma once

#include <string>
#include <string_view>

namespace petrel::serve {

// The code a client uses for a model's language code: its ISO 639-1 code where one is
// known, else the model's code without decoration ("__ast__" -> "ast", ">>fra<<" -> "fr",
// "ace_Arab" stays).
std::string client_language_code(std::string_view model_code);

// The English name of a client code ("de" -> "German"); the code itself when unknown.
std::string language_name(std::string_view code);

}  // namespace petrel::serve
