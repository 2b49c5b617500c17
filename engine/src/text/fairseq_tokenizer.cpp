#include "text/fairseq_tokenizer.h"

#include <algorithm>

#include "core/utf8.h"
#include "text/hf_text.h"

namespace petrel::text {

Result<std::unique_ptr<FairseqTokenizer>> FairseqTokenizer::create(Parts parts, const std::string& where) {
  // Handed over: the SentencePiece keeps the scores and types uncopied (parts.spm is not read again).
  auto spm = SentencePiece::create(std::move(parts.spm), where + ": tokenizer.source");
  if (!spm) return spm.error();
  // An empty special text would match at every position of every input; a long one
  // would cost its length at every position of an input that repeats its beginning.
  auto special_problem = [&](std::string_view text) -> std::string {
    if (text.empty()) return "has no token text";
    if (text.size() > detail::kMaxPieceBytes)
      return "has a text of " + std::to_string(text.size()) + " bytes, more than the " +
             std::to_string(detail::kMaxPieceBytes) + " a special token may have";
    return "";
  };
  for (size_t i = 0; i < parts.special_ids.size(); ++i) {
    const std::string problem = special_problem(parts.vocab[static_cast<size_t>(parts.special_ids[i])]);
    if (!problem.empty())
      return Error{ErrorCode::kFormat, where + ": tokenizer.special_ids[" + std::to_string(i) + "] = " +
                                           std::to_string(parts.special_ids[i]) + " " + problem};
  }
  for (size_t i = 0; i < parts.languages.size(); ++i) {
    const std::string problem = special_problem(parts.languages[i].first);
    if (!problem.empty())
      return Error{ErrorCode::kFormat, where + ": tokenizer.languages[" + std::to_string(i) + "].code " + problem};
  }
  std::unique_ptr<FairseqTokenizer> tok(new FairseqTokenizer(std::move(parts), std::move(spm.value())));
  const std::string_view source = tok->parts_.default_source_language;
  if (!source.empty() && !tok->language_id(source))
    return Error{ErrorCode::kFormat, where + ": tokenizer.default_source_language '" + std::string(source) +
                                         "' is none of tokenizer.languages"};
  return tok;
}

FairseqTokenizer::FairseqTokenizer(Parts parts, SentencePiece spm)
    : parts_(std::move(parts)), spm_(std::move(spm)), special_(parts_.vocab.size(), false) {
  for (const auto& [code, id] : parts_.languages) language_ids_.emplace(code, id);
  std::vector<int32_t> specials = parts_.special_ids;
  for (const auto& language : parts_.languages) specials.push_back(language.second);
  std::vector<std::pair<std::string_view, int32_t>> texts;
  for (int32_t id : specials) {
    if (special_[static_cast<size_t>(id)]) continue;
    special_[static_cast<size_t>(id)] = true;
    texts.emplace_back(parts_.vocab[static_cast<size_t>(id)], id);
  }
  specials_ = SpecialTokenSplitter(texts);
}

std::optional<int32_t> FairseqTokenizer::language_id(std::string_view code) const {
  auto it = language_ids_.find(code);
  if (it == language_ids_.end() && parts_.family == "m2m100")  // M2M100's callers say "en" for "__en__"
    it = language_ids_.find("__" + std::string(code) + "__");
  if (it == language_ids_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::pair<std::string, int32_t>> FairseqTokenizer::languages() const {
  std::vector<std::pair<std::string, int32_t>> out;
  out.reserve(parts_.languages.size());
  for (const auto& [code, id] : parts_.languages) out.emplace_back(code, id);
  return out;
}

Result<int32_t> FairseqTokenizer::source_language_id(std::string_view code) const {
  if (auto id = language_id(code)) return *id;
  std::string known;
  constexpr size_t kShown = 6;
  for (size_t i = 0; i < parts_.languages.size() && i < kShown; ++i)
    known += (i ? ", " : "") + std::string(parts_.languages[i].first);
  if (parts_.languages.size() > kShown) known += ", ... (" + std::to_string(parts_.languages.size()) + " codes)";
  return Error{ErrorCode::kInvalidArgument,
               "unknown source language '" + detail::to_valid_utf8(code) + "'; this model knows " + known};
}

Result<TokenizedText> FairseqTokenizer::tokenize(std::string_view text) const { return tokenize_in(text, {}); }

// An empty source_language means the model's default, as for every tokenizer.
Result<TokenizedText> FairseqTokenizer::tokenize_in(std::string_view text, std::string_view source_language) const {
  if (source_language.empty()) source_language = parts_.default_source_language;
  if (source_language.empty())
    return Error{ErrorCode::kInvalidArgument,
                 "this multilingual model names no default source language: pass the source language"};
  auto language = source_language_id(source_language);
  if (!language) return language.error();
  TokenizedText out;
  auto add = [&](std::string_view piece, int32_t id) {
    out.pieces.emplace_back(piece);
    out.ids.push_back(id);
  };
  const std::string_view language_token = parts_.vocab[static_cast<size_t>(language.value())];
  if (parts_.placement == Placement::kFirst) add(language_token, language.value());
  Encoding encoding;
  auto encode_chunk = [&](std::string_view chunk) -> Status {
    if (chunk.empty()) return Status::ok();
    Status s = spm_.encode(chunk, encoding);
    if (!s) return s;
    for (const Piece& p : encoding.pieces()) {
      const int32_t id = parts_.spm_vocab_ids[p.id];
      add(p.text, id >= 0 ? id : parts_.unk_id);
    }
    return Status::ok();
  };
  std::vector<TextSegment> segments;
  specials_.split(text, segments);
  for (size_t k = 0; k < segments.size(); ++k) {
    if (segments[k].special_id >= 0) {
      add(segments[k].text, segments[k].special_id);
      continue;
    }
    std::string_view chunk = segments[k].text;
    // <mask> is lstrip=True: it takes the whitespace before it.
    if (k + 1 < segments.size() && segments[k + 1].special_id == parts_.mask_id) chunk = python_rstrip(chunk);
    Status s = encode_chunk(chunk);
    if (!s) return s.error();
  }
  add(parts_.vocab[static_cast<size_t>(parts_.eos_id)], parts_.eos_id);
  if (parts_.placement == Placement::kLast) add(language_token, language.value());
  return out;
}

Result<std::string> FairseqTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::vector<std::string_view> pieces;
  pieces.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= parts_.vocab.size())
      return Error{ErrorCode::kInvalidArgument, "token id " + std::to_string(id) + " is outside the vocabulary of " +
                                                    std::to_string(parts_.vocab.size())};
    const std::string_view token = parts_.vocab[static_cast<size_t>(id)];
    if (!special_[static_cast<size_t>(id)] && !token.empty()) pieces.push_back(token);  // skip_special_tokens
  }
  std::string text;
  if (parts_.piece_decoding == PieceDecoding::kSentencePiece) {
    spm_.decode_pieces(pieces, text);
  } else {
    for (std::string_view p : pieces) text += p;
    space_symbols_to_spaces(text);
  }
  std::string out(python_strip(text));
  if (parts_.clean_up_spaces) clean_up_tokenization(out);
  return out;
}

std::optional<std::string_view> FairseqTokenizer::output_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= parts_.vocab.size()) return std::nullopt;
  return parts_.vocab[static_cast<size_t>(id)];
}

}  // namespace petrel::text
