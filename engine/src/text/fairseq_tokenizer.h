// The tokenizer of fairseq-born multilingual models, as Hugging Face's slow tokenizers
// of transformers 4.4x-4.57 do it (tools/reference/family_tokenizers.py states the rules
// and is the oracle; FAMILIES.md §6): NllbTokenizer, M2M100Tokenizer, MBart50Tokenizer.
// One SentencePiece model splits text into pieces; its ids map to model ids through a
// table (vocab_ids; -1: <unk>); language codes are tokens of their own.
//
// Encoding: the special tokens' texts (<s>, <pad>, </s>, <unk>, <mask>, every language
// code) are cut out first, leftmost then longest, anywhere, each its own id; <mask> also
// takes the whitespace to its left. Every other chunk goes through SentencePiece. The
// source language token goes first (`[lang] X </s>`) or, NLLB's legacy_behaviour, last
// (`X </s> [lang]`).
// Decoding: special tokens (languages included) are skipped, and so is an id with no
// token text (M2M100's made-up words, which transformers reads as <unk>); the pieces
// become text by the SentencePiece model (M2M100, mBART-50) or by joining them with "▁"
// as a space (NLLB); the ends are stripped, tokenization spaces cleaned up when the
// checkpoint asks for it.
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

class FairseqTokenizer final : public Tokenizer {
 public:
  using Placement = detail::LanguagePlacement;
  using PieceDecoding = detail::PieceDecoding;

  // Views into the model file; the file must outlive the tokenizer. The loader has
  // checked every id against vocab.size() and spm_vocab_ids' length (model_file.cpp).
  using Parts = detail::FairseqTokenizerTables;
  // Builds the SentencePiece model (validating it as untrusted input) and the special
  // token tables; errors (kFormat) name `where` and the field.
  static Result<std::unique_ptr<FairseqTokenizer>> create(Parts parts, const std::string& where);

  // With the default source language; an error when the model names none.
  Result<TokenizedText> tokenize(std::string_view text) const override;
  Result<TokenizedText> tokenize_in(std::string_view text, std::string_view source_language) const override;
  Result<std::string> decode(const std::vector<int32_t>& ids) const override;
  std::optional<std::string_view> output_token(int32_t id) const override;
  // A code of languages(); for M2M100 also the bare code ("en" for "__en__").
  std::optional<int32_t> language_id(std::string_view code) const override;
  std::vector<std::pair<std::string, int32_t>> languages() const override;

 private:
  FairseqTokenizer(Parts parts, SentencePiece spm);
  Result<int32_t> source_language_id(std::string_view code) const;  // an error names known codes

  Parts parts_;
  SentencePiece spm_;
  std::vector<bool> special_;  // per model id: skipped when decoding
  SpecialTokenSplitter specials_;  // special_ids' and the languages' texts
  detail::StringMap<std::string_view, int32_t> language_ids_;
};

}  // namespace petrel::text
