#include "text/spm_ids_tokenizer.h"

namespace petrel::text {

Result<std::unique_ptr<SentencePieceIdsTokenizer>> SentencePieceIdsTokenizer::create(Parts parts,
                                                                                     const std::string& where) {
  auto source = SentencePiece::create(parts.source, where + ": tokenizer.source");
  if (!source) return source.error();
  auto target = SentencePiece::create(parts.target, where + ": tokenizer.target");
  if (!target) return target.error();
  return std::unique_ptr<SentencePieceIdsTokenizer>(
      new SentencePieceIdsTokenizer(std::move(parts), std::move(source.value()), std::move(target.value())));
}

Result<TokenizedText> SentencePieceIdsTokenizer::tokenize(std::string_view text) const {
  Encoding encoding;
  Status s = source_.encode(text, encoding);
  if (!s) return s.error();
  TokenizedText out;
  for (const Piece& p : encoding.pieces()) {
    out.pieces.emplace_back(p.text);
    out.ids.push_back(p.id);
    out.ranges.push_back({p.begin, p.end});
  }
  out.pieces.emplace_back(parts_.source.pieces[static_cast<size_t>(parts_.eos_id)]);
  out.ids.push_back(parts_.eos_id);
  // The EOS stands where the last piece ends (bergamot's Annotation), trailing spaces after it.
  const size_t eos_at = out.ranges.empty() ? text.size() : out.ranges.back().end;
  out.ranges.push_back({eos_at, eos_at});
  return out;
}

Result<std::string> SentencePieceIdsTokenizer::decode_with_ranges(const std::vector<int32_t>& ids,
                                                                  std::vector<TextRange>& ranges) const {
  std::string text;
  Status s = target_.decode(ids.data(), ids.size(), text, ranges);
  if (!s) return s.error();
  return text;
}

Result<std::string> SentencePieceIdsTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string text;
  Status s = target_.decode(ids, text);
  if (!s) return s.error();
  return text;
}

std::optional<std::string_view> SentencePieceIdsTokenizer::output_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= parts_.target.pieces.size()) return std::nullopt;
  return parts_.target.pieces[static_cast<size_t>(id)];
}

}  // namespace petrel::text
