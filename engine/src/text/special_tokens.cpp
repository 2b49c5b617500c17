#include "text/special_tokens.h"

#include <new>

#include "core/string_hash.h"

namespace petrel::text {

SpecialTokenSplitter::SpecialTokenSplitter(const std::vector<std::pair<std::string_view, int32_t>>& specials) {
  // Only memory can fail here: the texts left are distinct and not empty, and a text
  // table of 4 GiB is memory too.
  if (!assign(specials)) throw std::bad_alloc();
}

Status SpecialTokenSplitter::assign(const std::vector<std::pair<std::string_view, int32_t>>& specials) {
  std::vector<std::string_view> texts;
  ids_.clear();
  detail::StringSet<std::string_view> seen;  // Gemma 3 has 6,414 added tokens
  for (const auto& [text, id] : specials) {
    if (text.empty() || !seen.insert(text).second) continue;
    texts.push_back(text);
    ids_.push_back(id);
  }
  auto automaton = PieceAutomaton::build(texts);
  if (!automaton) {
    ids_.clear();
    automaton_ = PieceAutomaton();
    return automaton.error();
  }
  automaton_ = std::move(automaton.value());
  return Status::ok();
}

}  // namespace petrel::text
