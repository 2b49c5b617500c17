// The tokenizer of Marian C++ models with word vocabularies (vocab.yml / .json / text:
// marian-dev src/data/default_vocab.cpp, DefaultVocab): the text is split at spaces
// (utils::split: empty pieces dropped), each word is its id in the vocabulary or <unk>,
// EOS is appended; output ids become their tokens joined with spaces, EOS left out.
// Such models expect text already segmented (e.g. by an external BPE), as Marian does.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "core/string_hash.h"
#include "format/tokenizer_tables.h"
#include "text/tokenizer.h"

namespace petrel::text {

class MarianWordsTokenizer final : public Tokenizer {
 public:
  using Parts = detail::MarianWordsTables;  // views into the model file, which must outlive this
  explicit MarianWordsTokenizer(Parts parts);

  Result<TokenizedText> tokenize(std::string_view text) const override;
  Result<std::string> decode(const std::vector<int32_t>& ids) const override;
  std::optional<std::string_view> output_token(int32_t id) const override;

 private:
  const StringTable& targets() const {
    return parts_.target_vocab.empty() ? parts_.vocab : parts_.target_vocab;
  }
  Parts parts_;
  detail::StringMap<std::string_view, int32_t> id_of_;  // the first id of each token
};

}  // namespace petrel::text
