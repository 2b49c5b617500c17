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
// token dropped, empty chunks left out (MarianTokenizer's _split_specials).
void marian_chunks(const SpecialTokenSplitter& specials, std::string_view text, std::vector<TextSegment>& chunks) {
  specials.split(text, chunks);
  for (size_t k = 0; k < chunks.size(); ++k) {
    if (chunks[k].special_id < 0) continue;
    if (k > 0 && chunks[k - 1].special_id < 0) chunks[k - 1].text = python_rstrip(chunks[k - 1].text);
    if (k + 1 < chunks.size() && chunks[k + 1].special_id < 0) chunks[k + 1].text = python_lstrip(chunks[k + 1].text);
  }
  chunks.erase(std::remove_if(chunks.begin(), chunks.end(), [](const TextSegment& c) { return c.text.empty(); }),
               chunks.end());
}

// Python's re ">>.+<<" (greedy, '.' is anything but a newline) searched from `from`:
// the match's [begin, end), or begin == npos. A ">>" matches with the last "<<" of its
// line at least 3 bytes on; when the first ">>" of a line has none, no later one of
// that line has, so the search moves to the next line: each byte is looked at a
// bounded number of times, and a caller that goes on from `end` stays linear.
std::pair<size_t, size_t> language_code_match(std::string_view text, size_t from) {
  for (size_t begin = text.find(">>", from); begin != std::string_view::npos;) {
    const size_t line_end = std::min(text.find('\n', begin), text.size());
    const size_t close = text.substr(begin, line_end - begin).rfind("<<");  // from begin: the scan stays in the line
    if (close != std::string_view::npos && close >= 3) return {begin, begin + close + 2};
    if (line_end == text.size()) break;
    begin = text.find(">>", line_end);
  }
  return {std::string_view::npos, 0};
}

}  // namespace

Result<std::unique_ptr<MarianTokenizer>> MarianTokenizer::create(Parts parts, const std::string& where) {
  // Handed over: the models keep the scores and types uncopied (parts.source and target are not read again).
  auto source = SentencePiece::create(std::move(parts.source), where + ": tokenizer.source");
  if (!source) return source.error();
  auto target = SentencePiece::create(std::move(parts.target), where + ": tokenizer.target");
  if (!target) return target.error();
  return std::unique_ptr<MarianTokenizer>(
      new MarianTokenizer(std::move(parts), std::move(source.value()), std::move(target.value())));
}

MarianTokenizer::MarianTokenizer(Parts parts, SentencePiece source, SentencePiece target)
    : parts_(std::move(parts)),
      source_(std::move(source)),
      target_(std::move(target)),
      specials_({{kSpecials[0], parts_.eos_id}, {kSpecials[1], parts_.unk_id}, {kSpecials[2], parts_.pad_id}}) {
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
  std::vector<TextSegment> chunks;
  marian_chunks(specials_, text, chunks);
  for (const TextSegment& segment : chunks) {
    if (segment.special_id >= 0) {
      add(segment.text, segment.special_id);
      continue;
    }
    const std::string_view chunk = segment.text;
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
  const StringTable& vocab = parts_.target_vocab.empty() ? parts_.vocab : parts_.target_vocab;
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
  const StringTable& vocab = parts_.target_vocab.empty() ? parts_.vocab : parts_.target_vocab;
  if (id < 0 || static_cast<size_t>(id) >= vocab.size()) return std::nullopt;
  return vocab[static_cast<size_t>(id)];
}

}  // namespace petrel::text
