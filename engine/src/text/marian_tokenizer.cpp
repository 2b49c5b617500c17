#include "text/marian_tokenizer.h"

#include <algorithm>
#include <array>

#include "core/utf8.h"
#include "text/hf_text.h"

namespace petrel::text {
namespace {

constexpr std::array<std::string_view, 3> kSpecials = {"</s>", "<unk>", "<pad>"};

bool is_special(std::string_view token) {
  return std::find(kSpecials.begin(), kSpecials.end(), token) != kSpecials.end();
}

// The special tokens' texts and the chunks between them, whitespace beside a special
// token dropped, empty chunks left out (the base class's no-split tokens).
std::vector<std::string_view> split_specials(std::string_view text) {
  std::vector<std::string_view> chunks;
  size_t start = 0;
  for (size_t at = 0; at < text.size();) {
    std::string_view found;
    for (std::string_view s : kSpecials)
      if (text.compare(at, s.size(), s) == 0) found = s;
    if (found.empty()) {
      ++at;
      continue;
    }
    chunks.push_back(text.substr(start, at - start));
    chunks.push_back(found);
    at += found.size();
    start = at;
  }
  chunks.push_back(text.substr(start));
  for (size_t k = 0; k < chunks.size(); ++k) {
    if (!is_special(chunks[k])) continue;
    if (k > 0 && !is_special(chunks[k - 1])) chunks[k - 1] = python_rstrip(chunks[k - 1]);
    if (k + 1 < chunks.size() && !is_special(chunks[k + 1])) chunks[k + 1] = python_lstrip(chunks[k + 1]);
  }
  chunks.erase(std::remove_if(chunks.begin(), chunks.end(), [](std::string_view c) { return c.empty(); }),
               chunks.end());
  return chunks;
}

// Python's re ">>.+<<" (greedy, '.' is anything but a newline) searched from `from`:
// the match's [begin, end), or begin == npos.
std::pair<size_t, size_t> language_code_match(std::string_view text, size_t from) {
  for (size_t begin = text.find(">>", from); begin != std::string_view::npos; begin = text.find(">>", begin + 1)) {
    const size_t line_end = std::min(text.find('\n', begin), text.size());
    const size_t close = text.substr(0, line_end).rfind("<<");
    if (close != std::string_view::npos && close >= begin + 3) return {begin, close + 2};
  }
  return {std::string_view::npos, 0};
}

}  // namespace

Result<std::unique_ptr<MarianTokenizer>> MarianTokenizer::create(Parts parts, const std::string& where) {
  auto source = SentencePiece::create(parts.source, where + ": tokenizer.source");
  if (!source) return source.error();
  auto target = SentencePiece::create(parts.target, where + ": tokenizer.target");
  if (!target) return target.error();
  return std::unique_ptr<MarianTokenizer>(
      new MarianTokenizer(std::move(parts), std::move(source.value()), std::move(target.value())));
}

MarianTokenizer::MarianTokenizer(Parts parts, SentencePiece source, SentencePiece target)
    : parts_(std::move(parts)), source_(std::move(source)), target_(std::move(target)) {
  for (size_t id = 0; id < parts_.vocab.size(); ++id) {
    const std::string_view token = parts_.vocab[id];
    if (token.size() > 4 && token.compare(0, 2, ">>") == 0 && token.compare(token.size() - 2, 2, "<<") == 0)
      language_codes_.emplace(token, static_cast<int32_t>(id));
  }
}

int32_t MarianTokenizer::vocab_id(std::string_view token) const {
  auto it = language_codes_.find(token);
  return it != language_codes_.end() ? it->second : parts_.unk_id;
}

Result<TokenizedText> MarianTokenizer::tokenize(std::string_view text) const {
  TokenizedText out;
  auto add = [&](std::string_view piece, int32_t id) {
    out.pieces.emplace_back(piece);
    out.ids.push_back(id);
  };
  Encoding encoding;
  std::string rest;
  for (std::string_view chunk : split_specials(text)) {
    if (is_special(chunk)) {
      add(chunk, chunk == kSpecials[0] ? parts_.eos_id : chunk == kSpecials[1] ? parts_.unk_id : parts_.pad_id);
      continue;
    }
    // A leading language code is a token; every match of the pattern leaves the text.
    auto [begin, end] = language_code_match(chunk, 0);
    if (begin == 0) {
      const std::string_view code = chunk.substr(0, end);
      // The input's own bytes become a piece: malformed UTF-8 in them becomes U+FFFD, as
      // the normalizer makes it elsewhere, so pieces stay text (no vocabulary token, all
      // UTF-8, could match such a code: it is <unk> either way).
      if (detail::is_valid_utf8(code))
        add(code, vocab_id(code));
      else
        add(detail::to_valid_utf8(code), parts_.unk_id);
    }
    rest.clear();
    size_t from = 0;
    for (; begin != std::string_view::npos; std::tie(begin, end) = language_code_match(chunk, end)) {
      rest.append(chunk.substr(from, begin - from));
      from = end;
    }
    rest.append(chunk.substr(from));
    Status s = source_.encode(rest, encoding);
    if (!s) return s.error();
    for (const Piece& p : encoding.pieces()) {
      const int32_t id = parts_.source_vocab_ids[p.id];
      add(p.text, id >= 0 ? id : parts_.unk_id);
    }
  }
  add(kSpecials[0], parts_.eos_id);
  return out;
}

Result<std::string> MarianTokenizer::decode(const std::vector<int32_t>& ids) const {
  const std::vector<std::string_view>& vocab = parts_.target_vocab.empty() ? parts_.vocab : parts_.target_vocab;
  std::vector<std::string_view> pieces;
  pieces.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= vocab.size())
      return Error{ErrorCode::kInvalidArgument,
                   "token id " + std::to_string(id) + " is outside the target vocabulary of " +
                       std::to_string(vocab.size())};
    const std::string_view token = vocab[static_cast<size_t>(id)];
    if (!is_special(token)) pieces.push_back(token);  // skip_special_tokens
  }
  std::string text;
  target_.decode_pieces(pieces, text);
  // "▁" left in a piece the target model lacks (returned verbatim) becomes a space.
  space_symbols_to_spaces(text);
  std::string out(python_strip(text));
  if (parts_.clean_up_spaces) clean_up_tokenization(out);
  return out;
}

std::optional<std::string_view> MarianTokenizer::output_token(int32_t id) const {
  const std::vector<std::string_view>& vocab = parts_.target_vocab.empty() ? parts_.vocab : parts_.target_vocab;
  if (id < 0 || static_cast<size_t>(id) >= vocab.size()) return std::nullopt;
  return vocab[static_cast<size_t>(id)];
}

}  // namespace petrel::text
