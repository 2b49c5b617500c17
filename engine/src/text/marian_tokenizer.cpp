#include "text/marian_tokenizer.h"

#include <algorithm>
#include <array>

#include "core/utf8.h"
#include "text/spm_normalizer.h"

namespace petrel::text {
namespace {

constexpr std::array<std::string_view, 3> kSpecials = {"</s>", "<unk>", "<pad>"};

bool is_special(std::string_view token) {
  return std::find(kSpecials.begin(), kSpecials.end(), token) != kSpecials.end();
}

// Python's str.isspace() (what str.strip() removes), for one code point.
bool python_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

// The code point of the well-formed UTF-8 character of `length` bytes at p.
uint32_t code_point(const char* p, size_t length) {
  const auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(p[i])); };
  switch (length) {
    case 1: return b(0);
    case 2: return (b(0) & 0x1f) << 6 | (b(1) & 0x3f);
    case 3: return (b(0) & 0x0f) << 12 | (b(1) & 0x3f) << 6 | (b(2) & 0x3f);
    default: return (b(0) & 0x07) << 18 | (b(1) & 0x3f) << 12 | (b(2) & 0x3f) << 6 | (b(3) & 0x3f);
  }
}

// Length of the whitespace character starting at text[at], or 0.
size_t space_at(std::string_view text, size_t at) {
  const size_t n = utf8::valid_length(text.data() + at, text.size() - at);
  return n > 0 && python_space(code_point(text.data() + at, n)) ? n : 0;
}

std::string_view lstrip(std::string_view text) {
  size_t at = 0;
  while (at < text.size()) {
    const size_t n = space_at(text, at);
    if (n == 0) break;
    at += n;
  }
  return text.substr(at);
}

std::string_view rstrip(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t start = end - 1;  // back to the lead byte of the last character (at most 4)
    while (start > 0 && end - start < 4 && (static_cast<unsigned char>(text[start]) & 0xc0) == 0x80) --start;
    const size_t n = space_at(text.substr(0, end), start);
    if (n == 0 || start + n != end) break;
    end = start;
  }
  return text.substr(0, end);
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
    if (k > 0 && !is_special(chunks[k - 1])) chunks[k - 1] = rstrip(chunks[k - 1]);
    if (k + 1 < chunks.size() && !is_special(chunks[k + 1])) chunks[k + 1] = lstrip(chunks[k + 1]);
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
  static constexpr std::string_view kSpaceSymbol = "\xe2\x96\x81";
  for (size_t at = text.find(kSpaceSymbol); at != std::string::npos; at = text.find(kSpaceSymbol, at + 1))
    text.replace(at, kSpaceSymbol.size(), " ");
  std::string out(rstrip(lstrip(text)));
  if (parts_.clean_up_spaces) {  // the base class's clean_up_tokenization, in its order
    static constexpr std::pair<std::string_view, std::string_view> kCleanUp[] = {
        {" .", "."},   {" ?", "?"},     {" !", "!"},     {" ,", ","},     {" ' ", "'"},
        {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (const auto& [before, after] : kCleanUp)
      for (size_t at = out.find(before); at != std::string::npos; at = out.find(before, at + after.size()))
        out.replace(at, before.size(), after);
  }
  return out;
}

std::optional<std::string_view> MarianTokenizer::output_token(int32_t id) const {
  const std::vector<std::string_view>& vocab = parts_.target_vocab.empty() ? parts_.vocab : parts_.target_vocab;
  if (id < 0 || static_cast<size_t>(id) >= vocab.size()) return std::nullopt;
  return vocab[static_cast<size_t>(id)];
}

}  // namespace petrel::text
