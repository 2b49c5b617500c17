// The tokenizer of Marian C++ models as bergamot-translator runs them (Firefox's
// translation models): the SentencePiece models' ids are the model's ids.
//
// Encoding: the source model segments the text (marian::SentencePieceVocab::encode: the
// whole text, no special-token or language-code handling), EOS is appended.
// Decoding: the target model decodes the ids as spm_decode does (control pieces such as
// "</s>" print nothing, <unk> prints its surface), nothing stripped or cleaned up.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "format/tokenizer_tables.h"
#include "text/sentencepiece.h"
#include "text/tokenizer.h"

namespace petrel::text {

class SentencePieceIdsTokenizer final : public Tokenizer {
 public:
  using Parts = detail::SentencePieceIdsTables;  // views into the model file, which must outlive this
  // Builds both SentencePiece models (validating them as untrusted input); errors name `where`.
  static Result<std::unique_ptr<SentencePieceIdsTokenizer>> create(Parts parts, const std::string& where);

  Result<TokenizedText> tokenize(std::string_view text) const override;
  Result<std::string> decode(const std::vector<int32_t>& ids) const override;
  Result<std::string> decode_with_ranges(const std::vector<int32_t>& ids, std::vector<TextRange>& ranges) const override;
  std::optional<std::string_view> output_token(int32_t id) const override;

 private:
  SentencePieceIdsTokenizer(Parts parts, SentencePiece source, SentencePiece target)
      : parts_(std::move(parts)), source_(std::move(source)), target_(std::move(target)) {}

  Parts parts_;
  SentencePiece source_, target_;
};

}  // namespace petrel::text
