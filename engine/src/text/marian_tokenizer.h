// The tokenizer of opus-mt (Marian) models, as Hugging Face's MarianTokenizer of
// transformers 4.22-4.33 does it (tools/reference/marian_tokenizer.py states the rules
// and is the oracle): the source SentencePiece model splits text into pieces, the
// model's vocabulary (vocab.json) maps them to ids, and the target SentencePiece model
// turns output pieces back into text.
//
// Encoding: the special tokens' texts ("</s>", "<unk>", "<pad>") are cut out first and
// the whitespace beside each is dropped; in every other chunk a leading ">>xx<<"
// language code becomes its own token and every match of ">>.+<<" is removed; the rest
// goes through the source model; a piece the vocabulary lacks is <unk>; EOS is appended.
// Decoding: special tokens are skipped, the other tokens decoded as pieces by the target
// model ("▁" becomes a space, also in a piece the target model lacks), the ends
// stripped, and tokenization spaces cleaned up (" ." -> "." ...) when the checkpoint's
// tokenizer_config.json asks for it.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "core/string_hash.h"
#include "text/sentencepiece.h"
#include "text/special_tokens.h"
#include "text/tokenizer.h"

namespace petrel::text {

class MarianTokenizer final : public Tokenizer {
 public:
  // Views into the model file; the file must outlive the tokenizer.
  using Parts = detail::MarianTokenizerTables;
  // Builds both SentencePiece models (validating them as untrusted input); errors
  // name `where` and the part.
  static Result<std::unique_ptr<MarianTokenizer>> create(Parts parts, const std::string& where);

  Result<TokenizedText> tokenize(std::string_view text) const override;
  Result<std::string> decode(const std::vector<int32_t>& ids) const override;
  std::optional<std::string_view> output_token(int32_t id) const override;

 private:
  MarianTokenizer(Parts parts, SentencePiece source, SentencePiece target);
  int32_t vocab_id(std::string_view token) const;  // a language code's id, else <unk>

  Parts parts_;
  SentencePiece source_, target_;
  SpecialTokenSplitter specials_;  // </s>, <unk>, <pad>
  detail::StringMap<std::string_view, int32_t> language_codes_;  // ">>xx<<" tokens of the vocabulary
};

}  // namespace petrel::text
