#include "text/hf_tokenizer.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <queue>

#include "core/substring_search.h"
#include "core/unicode.h"
#include "core/unicode_case.h"
#include "core/unicode_category.h"
#include "core/utf8.h"
#include "text/grapheme.h"
#include "text/hf_text.h"
#include "text/unicode_normalize.h"

namespace petrel::text {

// What one call may still spend (HfTokenizer::kGrowthPerByte, kRegexStepsPerByte).
class HfBudget {
 public:
  // A pipeline step, named in errors as the loader names it: "normalizers[2] (Replace)".
  struct Step {
    const char* list;
    size_t index;
    const char* kind;
    std::string name() const { return std::string(list) + "[" + std::to_string(index) + "] (" + kind + ")"; }
  };

  // `max_text`: the longest text the call may make (kMaxTextBytes while encoding).
  HfBudget(uint64_t input_bytes, uint64_t max_text)
      : growth_left_(HfTokenizer::kGrowthPerByte * input_bytes + HfTokenizer::kGrowthSlack),
        regex_steps_left_(HfTokenizer::kRegexStepsPerByte * input_bytes + HfTokenizer::kRegexStepsSlack),
        max_text_(max_text) {}

  // The longest a text of `from` bytes may become.
  uint64_t limit(uint64_t from) const { return std::min(from + growth_left_, max_text_); }
  // Spends the growth of `step` taking a text of `from` bytes to `to`, or refuses it.
  Status grow(uint64_t from, uint64_t to, const Step& step) {
    if (to <= from) return Status::ok();
    if (const uint64_t most = limit(from); to > most)
      return Error{ErrorCode::kInvalidArgument,
                   "tokenizer.hf." + step.name() + " would make the text longer than " + std::to_string(most) +
                       " bytes (" +
                       (most == max_text_ ? std::string("the most a text may have")
                                          : "a call's steps may add " + std::to_string(HfTokenizer::kGrowthPerByte) +
                                                " bytes per byte of its input, and " +
                                                std::to_string(HfTokenizer::kGrowthSlack) + " more") +
                       ")"};
    growth_left_ -= to - from;
    // The regexes run on the text as it has become: bytes added may be scanned, up to
    // kGrowthSlack of them (a Prepend of the longest string a file holds), so that a
    // file's normalizers cannot multiply the regexes' work per input byte.
    const uint64_t credit = std::min(to - from, regex_credit_left_);
    regex_credit_left_ -= credit;
    regex_steps_left_ += HfTokenizer::kRegexStepsPerByte * credit;
    return Status::ok();
  }
  uint64_t& regex_steps_left() { return regex_steps_left_; }

 private:
  uint64_t growth_left_, regex_steps_left_, regex_credit_left_ = HfTokenizer::kGrowthSlack;
  const uint64_t max_text_;
};

namespace {

using HfStep = HfBudget::Step;
using detail::HfDecoderKind;
using detail::HfNormalizerKind;
using detail::HfPreTokenizerKind;
using detail::HfSplitBehavior;

// GPT-2's byte <-> character map (ByteLevel): printable Latin-1 bytes are their own
// character, the other 68 bytes become U+0100.. in byte order.
struct ByteLevelMap {
  char32_t char_of[256];
  int16_t byte_of[324];  // per code point below 324: its byte, or -1
  ByteLevelMap() {
    std::fill(std::begin(byte_of), std::end(byte_of), int16_t{-1});
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      char_of[b] = printable ? static_cast<char32_t>(b) : next++;
      byte_of[char_of[b]] = static_cast<int16_t>(b);
    }
  }
};
const ByteLevelMap& byte_level_map() {
  static const ByteLevelMap map;
  return map;
}

// What a regex step may scan of a text of `bytes` bytes: the tokenizers' patterns scan
// each byte about once (a failing lookahead looks a few characters further); a pattern
// that rescans the text for every match (`a*b|a`) is stopped before it goes quadratic.
uint64_t regex_scan_limit(size_t bytes) { return 16 * uint64_t{bytes} + 4096; }
// All matches of `regex` in `text` within the scan limit and the call's steps, or why not.
Status regex_matches(const SplitRegex& regex, std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& matches,
                     HfBudget& budget, const HfStep& step) {
  switch (regex.find_all_within(text, matches, regex_scan_limit(text.size()), budget.regex_steps_left())) {
    case SplitRegex::Within::kDone:
      return Status::ok();
    case SplitRegex::Within::kRescans:
      return Error{ErrorCode::kInvalidArgument,
                   "tokenizer.hf." + step.name() + ": its regex rescans this text for every match (more than 16 times its "
                   "length); refused rather than run in quadratic time"};
    case SplitRegex::Within::kTooManySteps:
      break;
  }
  return Error{ErrorCode::kInvalidArgument,
               "tokenizer.hf." + step.name() + ": its regex takes more than " + std::to_string(HfTokenizer::kRegexStepsPerByte) +
                   " steps per byte of the text (and " + std::to_string(HfTokenizer::kRegexStepsSlack) +
                   " more); refused rather than run that slowly"};
}

// Whitespace for Strip and an added token's lstrip/rstrip: Unicode White_Space (Rust
// tokenizers' char::is_whitespace; JavaScript's trim also strips U+FEFF, not U+0085).
std::string_view trim_left(std::string_view s) {
  size_t at = 0;
  while (at < s.size()) {
    const detail::CodePoint c = detail::utf8_decode(s, at);
    if (!detail::is_white_space(c.value)) break;
    at += c.length;
  }
  return s.substr(at);
}
std::string_view trim_right(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    if (!detail::is_white_space(detail::utf8_decode(s, start).value)) break;
    end = start;
  }
  return s.substr(0, end);
}

// The pieces of `text` around `matches` (sorted, disjoint byte ranges) as Split's
// behaviour keeps them.
void split_pieces(std::string_view text, const std::vector<std::pair<uint32_t, uint32_t>>& matches,
                  HfSplitBehavior behavior, bool invert, std::vector<std::string>& out) {
  auto emit = [&](size_t begin, size_t end) {
    if (end > begin) out.emplace_back(text.substr(begin, end - begin));
  };
  if (invert) {  // transformers.js: the matches are the words
    for (auto [b, e] : matches) emit(b, e);
    return;
  }
  size_t start = 0;  // of the piece being built
  for (size_t i = 0; i < matches.size(); ++i) {
    const auto [b, e] = matches[i];
    switch (behavior) {
      case HfSplitBehavior::kRemoved:
        emit(start, b);
        start = e;
        break;
      case HfSplitBehavior::kIsolated:
        emit(start, b);
        emit(b, e);
        start = e;
        break;
      case HfSplitBehavior::kMergedWithPrevious:
        emit(start, e);
        start = e;
        break;
      case HfSplitBehavior::kMergedWithNext:
        emit(start, b);
        start = b;
        break;
      case HfSplitBehavior::kContiguous: {
        emit(start, b);
        size_t end = e;
        while (i + 1 < matches.size() && matches[i + 1].first == end) end = matches[++i].second;
        emit(b, end);
        start = end;
        break;
      }
    }
  }
  emit(start, text.size());
}

// Every occurrence of `pattern` in `text`, left to right, each searched for from the
// end of the one before (non-overlapping), in O(text) time: std::string_view::find
// compares the pattern at each candidate position, which a file's 4 KiB pattern
// ("aaa...ab") over "aaa..." makes 4096 comparisons per byte, so a longer pattern is
// searched by Two-Way (core/substring_search.h).
void literal_matches(std::string_view text, std::string_view pattern, std::vector<std::pair<uint32_t, uint32_t>>& out) {
  out.clear();
  const size_t m = pattern.size();
  if (m == 0 || m > text.size()) return;
  if (m <= 16) {  // at most 16 comparisons per byte; find's memchr is faster on text
    for (size_t at = 0, hit; (hit = text.find(pattern, at)) != std::string_view::npos; at = hit + m)
      out.emplace_back(static_cast<uint32_t>(hit), static_cast<uint32_t>(hit + m));
    return;
  }
  const detail::SubstringFinder finder(pattern);
  for (size_t at = 0, hit; (hit = finder.find(text, at)) != detail::SubstringFinder::npos; at = hit + m)
    out.emplace_back(static_cast<uint32_t>(hit), static_cast<uint32_t>(hit + m));
}

// The byte ranges `matches` (sorted, disjoint) of `text` replaced by `content`: the size
// is counted first, so that a replacement the budget refuses is never built.
Status replace_ranges(std::string& text, const std::vector<std::pair<uint32_t, uint32_t>>& matches,
                      std::string_view content, HfBudget& budget, const HfStep& step) {
  if (matches.empty()) return Status::ok();
  uint64_t size = text.size();
  for (auto [b, e] : matches) size = size - (e - b) + content.size();
  if (Status s = budget.grow(text.size(), size, step); !s) return s;
  std::string out;
  out.reserve(size);
  size_t at = 0;
  for (auto [b, e] : matches) {
    out.append(text, at, b - at);
    out.append(content);
    at = e;
  }
  out.append(text, at, std::string::npos);
  text.swap(out);
  return Status::ok();
}

// Every `pattern` in `text` replaced by `content`.
Status replace_all_budgeted(std::string& text, std::string_view pattern, std::string_view content, HfBudget& budget,
                   const HfStep& step) {
  if (pattern.empty()) return Status::ok();
  std::vector<std::pair<uint32_t, uint32_t>> matches;
  literal_matches(text, pattern, matches);
  return replace_ranges(text, matches, content, budget, step);
}

// JavaScript's \s (WhiteSpace and LineTerminator of ECMA-262: Zs, TAB, VT, FF, LF, CR,
// U+2028, U+2029, U+FEFF). Rust tokenizers' pre-tokenizers use char::is_whitespace
// (White_Space: U+0085 yes, U+FEFF no); transformers.js is followed.
bool is_js_space(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0d);
  return c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000 || c == 0xfeff;
}

// BertPreTokenizer's and Punctuation's punctuation in transformers.js: \p{P} and the
// ASCII symbols U+0021..U+002F, U+003A..U+0040, U+005B..U+0060, U+007B..U+007E (Rust
// tokenizers: char::is_ascii_punctuation or \p{P}, the same set).
bool is_bert_punctuation(char32_t c) {
  if (c < 0x80)
    return (c >= 0x21 && c <= 0x2f) || (c >= 0x3a && c <= 0x40) || (c >= 0x5b && c <= 0x60) || (c >= 0x7b && c <= 0x7e);
  const detail::GeneralCategory g = detail::general_category(c);
  return g >= detail::unicode_tables::kPc && g <= detail::unicode_tables::kPo;
}

// The words of `word` as runs of code points of one class, class 0 dropped; `single`
// classes emit each code point alone. Linear in the word.
template <class Classify>
void split_classes(std::string_view word, Classify classify, int single, std::vector<std::string>& out) {
  size_t start = 0;
  int current = 0;
  for (size_t at = 0; at < word.size();) {
    const detail::CodePoint c = detail::utf8_decode(word, at);
    const int k = classify(c.value);
    if (k != current || k == single) {
      if (current != 0 && at > start) out.emplace_back(word.substr(start, at - start));
      start = at;
      current = k;
    }
    at += c.length;
  }
  if (current != 0 && word.size() > start) out.emplace_back(word.substr(start));
}

// BertNormalizer as transformers.js 3.7 runs it on `text` (UTF-8), into `out`.
void bert_normalize(std::string_view text, const detail::HfNormalizerStep& s, std::string& out, std::string& scratch) {
  out.clear();
  // clean_text: NUL, U+FFFD and "control" characters dropped (transformers.js: Cc, Cf, Co
  // but TAB, LF, CR; Rust tokenizers drops every C*, unassigned code points too), then
  // JavaScript's \s becomes a space (VT, FF, U+0085, U+FEFF were dropped as control).
  // handle_chinese_chars: transformers.js walks UTF-16 units, so only the BMP ranges
  // U+3400..4DBF, U+4E00..9FFF, U+F900..FAFF get spaces around them (Rust tokenizers
  // also spaces the supplementary-plane ideographs).
  for (size_t at = 0; at < text.size();) {
    const detail::CodePoint c = detail::utf8_decode(text, at);
    const char32_t v = c.value;
    at += c.length;
    if (s.clean_text) {
      if (v == 0 || v == 0xfffd) continue;
      if (v != '\t' && v != '\n' && v != '\r') {
        const detail::GeneralCategory g = detail::general_category(v);
        if (g == detail::unicode_tables::kCc || g == detail::unicode_tables::kCf || g == detail::unicode_tables::kCo ||
            g == detail::unicode_tables::kCs)
          continue;
      }
      if (is_js_space(v)) {
        out.push_back(' ');
        continue;
      }
    }
    const bool chinese = s.handle_chinese_chars && ((v >= 0x4e00 && v <= 0x9fff) || (v >= 0x3400 && v <= 0x4dbf) ||
                                                    (v >= 0xf900 && v <= 0xfaff));
    if (chinese) out.push_back(' ');
    out.append(text.data() + at - c.length, c.length);
    if (chinese) out.push_back(' ');
  }
  // transformers.js lowercases (toLowerCase: Final_Sigma, U+0130 -> "i\u0307"), then
  // strips accents; Rust tokenizers strips first, then lowercases code point by code point
  // (no Final_Sigma).
  if (s.lowercase) {
    scratch.clear();
    detail::append_lowercase(out, scratch);
    out.swap(scratch);
  }
  if (s.strip_accents) {  // NFD, then \p{Mn} dropped
    text::normalize(out, NormalizationForm::kNFD, scratch);
    out.clear();
    for (size_t at = 0; at < scratch.size();) {
      const detail::CodePoint c = detail::utf8_decode(scratch, at);
      if (detail::general_category(c.value) != detail::unicode_tables::kMn) out.append(scratch, at, c.length);
      at += c.length;
    }
  }
}

constexpr std::string_view kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// transformers.js's ByteFallback test: six UTF-16 units "<0x..>", the two after "0x"
// read by parseInt(., 16), which takes their leading hex digits.
int byte_fallback_value(std::string_view token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; };
  const int hi = hex(token[3]), lo = hex(token[4]);
  if (hi < 0) return -1;
  return lo < 0 ? hi : hi * 16 + lo;
}

}  // namespace

Result<std::unique_ptr<HfTokenizer>> HfTokenizer::create(detail::HfTokenizerTables tables, const std::string& name) {
  std::unique_ptr<HfTokenizer> t(new HfTokenizer(std::move(tables)));
  const detail::HfTokenizerTables& tt = t->t_;
  auto fail = [&](const std::string& what) { return Error{ErrorCode::kFormat, name + ": tokenizer.hf." + what}; };
  const size_t n = tt.vocab.size();
  for (size_t i = 0; i < tt.normalizers.size(); ++i) {
    const detail::HfNormalizerStep& s = tt.normalizers[i];
    CharsMap map;
    if (s.kind == HfNormalizerKind::kPrecompiled) {  // O(1): the rules are checked where they are read
      auto m = CharsMap::parse(s.precompiled_charsmap, "tokenizer.hf.normalizers[" + std::to_string(i) + "]");
      if (!m) return Error{ErrorCode::kFormat, name + ": " + m.error().message};
      map = m.value();
    }
    t->charsmaps_.push_back(map);
    SplitRegex regex;
    if (s.kind == HfNormalizerKind::kReplace && s.pattern_is_regex) {
      auto r = SplitRegex::compile(s.pattern);
      if (!r) return fail("normalizers[" + std::to_string(i) + "].pattern: " + r.error().message);
      regex = std::move(r.value());
    }
    t->normalizer_regex_.push_back(std::move(regex));
  }
  for (size_t i = 0; i < tt.pre_tokenizers.size(); ++i) {
    const detail::HfPreTokenizerStep& s = tt.pre_tokenizers[i];
    SplitRegex regex;
    if (s.kind == HfPreTokenizerKind::kSplit && s.pattern_is_regex) {
      auto r = SplitRegex::compile(s.pattern);
      if (!r) return fail("pre_tokenizers[" + std::to_string(i) + "].pattern: " + r.error().message);
      regex = std::move(r.value());
    }
    if (s.kind == HfPreTokenizerKind::kByteLevel && s.use_regex && !t->byte_level_regex_) {
      auto r = SplitRegex::compile(kGpt2Pattern);
      if (!r) return fail("pre_tokenizers[" + std::to_string(i) + "]: GPT-2's pattern: " + r.error().message);
      t->byte_level_regex_ = std::move(r.value());
    }
    if (s.kind == HfPreTokenizerKind::kByteLevel && i + 1 != tt.pre_tokenizers.size())
      return fail("pre_tokenizers[" + std::to_string(i + 1) + "]: a step after ByteLevel is not supported");
    t->pre_tokenizer_regex_.push_back(std::move(regex));
  }
  const ByteLevelMap& map = byte_level_map();
  for (int b = 0; b < 256; ++b) {
    std::string c;
    detail::append_utf8(c, map.char_of[b]);
    t->byte_level_ids_[b] = t->token_id(c).value_or(-1);
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    t->byte_fallback_ids_[b] = t->token_id(hex).value_or(-1);
  }
  t->special_.assign(n, false);
  for (int32_t id : tt.special_ids) t->special_[static_cast<size_t>(id)] = true;
  t->added_.assign(n, 0);
  std::vector<std::pair<std::string_view, int32_t>>& added = t->added_texts_;
  std::vector<std::pair<std::string_view, int32_t>>& normalized = t->normalized_texts_;
  uint64_t normalized_bytes = 0;  // one budget for them all, so that a file's work is linear in it
  for (const detail::HfAddedTokenEntry& a : tt.added_tokens) normalized_bytes += a.normalized ? a.content.size() : 0;
  HfBudget budget(normalized_bytes, kMaxTextBytes);
  for (size_t k = 0; k < tt.added_tokens.size(); ++k) {
    const detail::HfAddedTokenEntry& a = tt.added_tokens[k];
    t->added_[static_cast<size_t>(a.id)] = static_cast<uint8_t>(kAdded | (a.lstrip ? kLstrip : 0) |
                                                                (a.rstrip ? kRstrip : 0) | (a.single_word ? kSingleWord : 0));
    if (!a.normalized) {
      added.emplace_back(a.content, a.id);
      continue;
    }
    // Matched in normalized text as its normalized content (tokenizers' AddedVocabulary).
    std::string content;
    if (Status s = t->normalize(a.content, content, budget); !s)
      return Error{ErrorCode::kFormat, name + ": " + s.error().message + ", normalizing tokenizer.hf.added_tokens[" +
                                           std::to_string(k) + "].content"};
    if (content.empty()) continue;  // matches nothing
    t->normalized_added_.push_back(std::move(content));
    normalized.emplace_back(std::string_view(), a.id);
  }
  for (size_t i = 0; i < normalized.size(); ++i) normalized[i].first = t->normalized_added_[i];  // (now stable)
  // Contents that normalize alike: the first is kept, as a map from content would not say
  // which (SpecialTokenSplitter). The stored trie of the others is checked here (linear,
  // in place: the file is verified whole at load); what matches them is built at the
  // first encode (matchers()).
  if (tt.added_trie.size != 0) {
    std::vector<std::string_view> texts;
    for (const auto& a : added) texts.push_back(a.first);
    if (const std::string problem = PieceTrie().adopt(texts, tt.added_trie); !problem.empty())
      return fail("added_" + problem);  // "added_trie_nodes[i]: ..."
  }
  return t;
}

namespace {
// The entry a converter-built table holds for a key: linear probing from `hash` over at
// most max_probe + 1 slots, `matches(entry)` deciding; -1 when absent. Entries are
// checked against `count` (a corrupt slot is never a match).
template <class Matches>
int64_t probe(const detail::HfHashTable& table, uint32_t hash, size_t count, Matches matches) {
  if (table.capacity == 0) return -1;
  const size_t mask = table.capacity - 1;
  for (uint32_t i = 0; i <= table.max_probe; ++i) {
    const uint32_t slot = table.slots[(hash + i) & mask];
    if (slot == 0) return -1;
    if (slot - 1 < count && matches(slot - 1)) return slot - 1;
  }
  return -1;
}
}  // namespace

std::optional<int32_t> HfTokenizer::token_id(std::string_view token) const {
  const int64_t id = probe(t_.token_index, detail::hf_token_hash(token), t_.vocab.size(),
                           [&](uint32_t id) { return t_.vocab[id] == token; });
  if (id < 0) return std::nullopt;
  return static_cast<int32_t>(id);
}

int32_t HfTokenizer::merge_of(int32_t left, int32_t right) const {
  const int64_t merge = probe(t_.merge_index, detail::hf_merge_hash(left, right), t_.merge_count, [&](uint32_t m) {
    return t_.merges[m].left == left && t_.merges[m].right == right;
  });
  if (merge < 0) return -1;
  const int32_t result = t_.merges[merge].result;
  return result >= 0 && static_cast<size_t>(result) < t_.vocab.size() ? static_cast<int32_t>(merge) : -1;
}

bool HfTokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < special_.size() && special_[static_cast<size_t>(id)];
}

std::optional<std::string_view> HfTokenizer::output_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= t_.vocab.size()) return std::nullopt;
  const std::string_view token = t_.vocab[static_cast<size_t>(id)];
  if (!detail::is_valid_utf8(token)) return std::nullopt;  // a corrupt file's token
  return token;
}

// Steps whose growth the file's strings set check it before they build their output; the
// others (Unicode's forms and case, BertNormalizer: a few times at most, 11 for NFKC's
// U+FDFA) after.
Status HfTokenizer::normalize(std::string_view text, std::string& out, HfBudget& budget) const {
  out.assign(text);
  std::string scratch;
  std::vector<std::pair<uint32_t, uint32_t>> matches;
  for (size_t i = 0; i < t_.normalizers.size(); ++i) {
    const detail::HfNormalizerStep& s = t_.normalizers[i];
    auto step = [&](const char* kind) { return HfStep{"normalizers", i, kind}; };
    const size_t before = out.size();
    Status grown = Status::ok();  // for the steps checked after
    switch (s.kind) {
      case HfNormalizerKind::kNfc:
      case HfNormalizerKind::kNfd:
      case HfNormalizerKind::kNfkc:
      case HfNormalizerKind::kNfkd: {
        static constexpr NormalizationForm kForms[] = {NormalizationForm::kNFC, NormalizationForm::kNFD,
                                                       NormalizationForm::kNFKC, NormalizationForm::kNFKD};
        static constexpr const char* kNames[] = {"NFC", "NFD", "NFKC", "NFKD"};
        text::normalize(out, kForms[static_cast<int>(s.kind) - 1], scratch);
        out.swap(scratch);
        grown = budget.grow(before, out.size(), step(kNames[static_cast<int>(s.kind) - 1]));
        break;
      }
      case HfNormalizerKind::kReplace:
        if (!s.pattern_is_regex) {
          if (Status r = replace_all_budgeted(out, s.pattern, s.content, budget, step("Replace")); !r) return r;
        } else {
          if (Status r = regex_matches(normalizer_regex_[i], out, matches, budget, step("Replace")); !r) return r;
          if (Status r = replace_ranges(out, matches, s.content, budget, step("Replace")); !r) return r;
        }
        break;
      case HfNormalizerKind::kPrecompiled:
        if (Status r = apply_precompiled(charsmaps_[i], i, out, scratch, budget); !r) return r;
        out.swap(scratch);
        break;
      case HfNormalizerKind::kPrepend:
        if (out.empty()) break;  // tokenizers leaves an empty text empty
        if (Status r = budget.grow(out.size(), out.size() + s.content.size(), step("Prepend")); !r) return r;
        out.insert(0, s.content);
        break;
      case HfNormalizerKind::kStrip: {
        std::string_view v = out;
        if (s.strip_left) v = trim_left(v);
        if (s.strip_right) v = trim_right(v);
        scratch.assign(v);
        out.swap(scratch);
        break;
      }
      case HfNormalizerKind::kLowercase:
        scratch.clear();
        detail::append_lowercase(out, scratch);
        out.swap(scratch);
        grown = budget.grow(before, out.size(), step("Lowercase"));
        break;
      case HfNormalizerKind::kBertNormalizer: {
        std::string second;
        bert_normalize(out, s, scratch, second);
        out.swap(scratch);
        grown = budget.grow(before, out.size(), step("BertNormalizer"));
        break;
      }
      default:
        break;  // refused by create()
    }
    if (!grown) return grown;
  }
  return Status::ok();
}

Status HfTokenizer::pre_tokenize(std::string_view text, size_t section_index, std::vector<std::string>& words,
                                 bool& byte_level, HfBudget& budget) const {
  words.clear();
  words.emplace_back(text);
  byte_level = false;
  std::vector<std::string> next;
  std::vector<std::pair<uint32_t, uint32_t>> matches;
  for (size_t i = 0; i < t_.pre_tokenizers.size(); ++i) {
    const detail::HfPreTokenizerStep& s = t_.pre_tokenizers[i];
    next.clear();
    for (std::string& word : words) {
      switch (s.kind) {
        case HfPreTokenizerKind::kSplit:
          if (s.pattern_is_regex) {
            if (Status r = regex_matches(pre_tokenizer_regex_[i], word, matches, budget, HfStep{"pre_tokenizers", i, "Split"});
                !r)
              return r;
          } else {
            literal_matches(word, s.pattern, matches);
          }
          split_pieces(word, matches, s.behavior, s.invert, next);
          break;
        case HfPreTokenizerKind::kByteLevel: {
          if (s.add_prefix_space && (word.empty() || word[0] != ' ')) {
            if (Status r = budget.grow(word.size(), word.size() + 1, HfStep{"pre_tokenizers", i, "ByteLevel"}); !r)
              return r;
            word.insert(0, " ");
          }
          if (s.use_regex) {
            if (Status r = regex_matches(*byte_level_regex_, word, matches, budget,
                                         HfStep{"pre_tokenizers", i, "ByteLevel, GPT-2's pattern"});
                !r)
              return r;
            for (auto [b, e] : matches) next.emplace_back(word.substr(b, e - b));
          } else {
            next.push_back(std::move(word));
          }
          byte_level = true;  // the words stay bytes; encode_word maps them
          break;
        }
        case HfPreTokenizerKind::kMetaspace: {
          const HfStep step{"pre_tokenizers", i, "Metaspace"};
          if (Status r = replace_all_budgeted(word, " ", s.replacement, budget, step); !r) return r;
          const bool prepend = s.add_prefix_space && word.compare(0, s.replacement.size(), s.replacement) != 0 &&
                               (s.prepend_scheme == detail::HfPrependScheme::kAlways ||
                                (s.prepend_scheme == detail::HfPrependScheme::kFirst && section_index == 0));
          if (prepend) {
            if (Status r = budget.grow(word.size(), word.size() + s.replacement.size(), step); !r) return r;
            word.insert(0, s.replacement);
          }
          if (s.split && !s.replacement.empty()) {  // Rust's Metaspace split: each word starts at a replacement
            literal_matches(word, s.replacement, matches);
            split_pieces(word, matches, HfSplitBehavior::kMergedWithNext, false, next);
            break;
          }
          next.push_back(std::move(word));
          break;
        }
        case HfPreTokenizerKind::kDigits: {
          // [^0-9]+|[0-9]+ (or each digit alone): JavaScript's \d is ASCII.
          size_t start = 0;
          for (size_t at = 0; at <= word.size(); ++at) {
            const bool end = at == word.size();
            const bool digit = !end && word[at] >= '0' && word[at] <= '9';
            const bool prev_digit = at > start && word[at - 1] >= '0' && word[at - 1] <= '9';
            if (at > start && (end || digit != prev_digit || (digit && s.individual_digits))) {
              next.emplace_back(word, start, at - start);
              start = at;
            }
          }
          break;
        }
        case HfPreTokenizerKind::kWhitespaceSplit:  // /\S+/g
          split_classes(word, [](char32_t c) { return is_js_space(c) ? 0 : 1; }, -1, next);
          break;
        case HfPreTokenizerKind::kWhitespace:
          // /\w+|[^\w\s]+/g without the u flag: \w is ASCII [A-Za-z0-9_] (Rust tokenizers'
          // \w is Unicode: "héllo" is one word there, three here).
          split_classes(word, [](char32_t c) {
            const bool w = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
            return w ? 1 : is_js_space(c) ? 0 : 2;
          }, -1, next);
          break;
        case HfPreTokenizerKind::kBertPreTokenizer:  // /[^\s P]+|[P]/gu: each punctuation alone
          split_classes(word, [](char32_t c) { return is_js_space(c) ? 0 : is_bert_punctuation(c) ? 2 : 1; }, 2, next);
          break;
        case HfPreTokenizerKind::kPunctuation:
          // /[^P]+|[P]+/gu: runs of punctuation stay together (Rust tokenizers' default
          // Isolated splits each one off), and spaces stay in the words.
          split_classes(word, [](char32_t c) { return is_bert_punctuation(c) ? 2 : 1; }, -1, next);
          break;
      }
    }
    words.swap(next);
  }
  return Status::ok();
}

Result<const HfTokenizer::Matchers*> HfTokenizer::matchers() const {
  if (const Matchers* ready = matchers_ready_.load(std::memory_order_acquire)) return ready;
  const std::lock_guard<std::mutex> lock(matchers_mutex_);
  if (matchers_) return matchers_.get();
  if (matchers_error_) return *matchers_error_;
  // Memory that runs out is reported and tried again by a later call; what else fails to
  // build (more than 4 GiB of tokens) stays.
  const Error out_of_memory{ErrorCode::kOutOfMemory,
                            "tokenizer.hf: out of memory for the automata matching the added tokens and the vocabulary"};
  try {
    auto m = std::make_unique<Matchers>();
    auto failed = [&](const char* what, const Error& e) -> Error {
      if (e.code == ErrorCode::kOutOfMemory) return out_of_memory;
      matchers_error_ = Error{e.code, std::string("tokenizer.hf.") + what + ": " + e.message};
      return *matchers_error_;
    };
    if (Status s = m->added.assign(added_texts_); !s) return failed("added_tokens", s.error());
    if (Status s = m->normalized.assign(normalized_texts_); !s) return failed("added_tokens", s.error());
    const bool unigram = t_.model == detail::HfModelKind::kUnigram;
    if (unigram || t_.model == detail::HfModelKind::kWordPiece) {
      const size_t count = unigram ? t_.score_count : t_.vocab.size();
      const size_t longest = unigram ? t_.max_piece_bytes : detail::kMaxPieceBytes;
      const std::string_view prefix = t_.continuing_subword_prefix;
      std::vector<std::string_view> first, rest;
      for (size_t i = 0; i < count; ++i) {
        const std::string_view token = t_.vocab[i];
        if (token.empty() || token.size() > longest || !detail::is_valid_utf8(token)) continue;
        // The id a lookup of the token's text gives (Unigram's among its pieces only).
        const int64_t found = probe(t_.token_index, detail::hf_token_hash(token), count,
                                    [&](uint32_t id) { return t_.vocab[id] == token; });
        if (found != static_cast<int64_t>(i)) continue;
        first.push_back(token);
        m->first.ids.push_back(static_cast<int32_t>(i));
        if (!unigram && !prefix.empty() && token.size() > prefix.size() && token.compare(0, prefix.size(), prefix) == 0 &&
            detail::is_valid_utf8(token.substr(prefix.size()))) {
          rest.push_back(token.substr(prefix.size()));
          m->rest.ids.push_back(static_cast<int32_t>(i));
        }
      }
      for (auto [pieces, target] : {std::pair{&first, &m->first}, std::pair{&rest, &m->rest}}) {
        auto built = PieceAutomaton::build(*pieces);
        if (!built) return failed("model", built.error());
        target->automaton = std::move(built.value());
      }
    }
    matchers_ = std::move(m);
  } catch (const std::bad_alloc&) {
    return out_of_memory;
  }
  matchers_ready_.store(matchers_.get(), std::memory_order_release);
  return matchers_.get();
}

// BPE over one word: symbols (bytes for ByteLevel words, else characters) merged by the
// lowest-ranked merge first, the leftmost among equals; a heap makes it O(n log n).
// WordPiece over one word, as transformers.js: a word of more than
// max_input_chars_per_word code points is the unknown token; else greedily the longest
// token at each position (the continuing prefix before all but the first piece), and
// a position without one makes the whole word the unknown token. Tokens longer than
// kMaxPieceBytes are never matched. The longest token at a position is one state of
// the vocabulary's automaton: the first position's state reads at most the longest
// token's length of the word (once per word), the others are read a block at a time
// (PieceScan), so a word costs O(its length) whatever the tokens' lengths (it was
// O(length x longest token): 19-26 us per byte with a 4,096-byte token).
Status HfTokenizer::encode_wordpiece(std::string_view word, const Matchers& m, std::vector<int32_t>& ids,
                                     std::vector<uint32_t>& scratch) const {
  auto unknown = [&]() -> Status {
    if (t_.unk_id < 0)
      return Error{ErrorCode::kInvalidArgument, "text: the word '" + std::string(word.substr(0, 256)) +
                                                    "' has no tokens and the tokenizer has no unknown token"};
    ids.push_back(t_.unk_id);
    return Status::ok();
  };
  size_t chars = 0;
  for (size_t at = 0; at < word.size(); at += detail::utf8_decode(word, at).length)
    if (++chars > t_.max_input_chars_per_word) return unknown();
  const VocabAutomaton& first = m.first;
  const VocabAutomaton& rest = t_.continuing_subword_prefix.empty() ? first : m.rest;
  int32_t piece = first.automaton.longest(first.automaton.state_at(word, 0));
  if (piece < 0) return unknown();
  const size_t before = ids.size();
  ids.push_back(first.ids[static_cast<size_t>(piece)]);
  PieceScan scan(rest.automaton, word, scratch);
  for (size_t at = first.automaton.length(piece); at < word.size(); at += rest.automaton.length(piece)) {
    piece = scan.longest_at(at);
    if (piece < 0) {
      ids.resize(before);
      return unknown();
    }
    ids.push_back(rest.ids[static_cast<size_t>(piece)]);
  }
  return Status::ok();
}

Status HfTokenizer::encode_word(std::string_view word, bool byte_level, const Matchers& m, std::vector<int32_t>& ids,
                                std::vector<uint32_t>& scratch) const {
  if (word.empty()) return Status::ok();
  if (t_.model == detail::HfModelKind::kWordPiece) return encode_wordpiece(word, m, ids, scratch);
  if (t_.model == detail::HfModelKind::kUnigram) return encode_unigram(word, m, ids, scratch);
  if (t_.ignore_merges) {
    std::optional<int32_t> whole;
    if (byte_level) {
      std::string mapped;
      for (unsigned char b : word) detail::append_utf8(mapped, byte_level_map().char_of[b]);
      whole = token_id(mapped);
    } else {
      whole = token_id(word);
    }
    if (whole) {
      ids.push_back(*whole);
      return Status::ok();
    }
  }
  struct Symbol {
    int32_t id;  // -1: a character without a token
    uint32_t begin, end;
    int32_t prev, next;  // -1: none; begin == end: merged away
  };
  std::vector<Symbol> symbols;
  for (size_t at = 0; at < word.size();) {
    size_t length = 1;
    int32_t id;
    if (byte_level) {
      id = byte_level_ids_[static_cast<unsigned char>(word[at])];
    } else {
      length = detail::utf8_decode(word, at).length;
      id = token_id(word.substr(at, length)).value_or(-1);
    }
    const int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, static_cast<uint32_t>(at), static_cast<uint32_t>(at + length), index - 1, -1});
    if (index > 0) symbols[index - 1].next = index;
    at += length;
  }
  struct Candidate {
    int32_t merge;  // its index is its rank
    int32_t pos;    // the left symbol
    bool operator>(const Candidate& o) const { return merge != o.merge ? merge > o.merge : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto consider = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0 || symbols[pos].id < 0 || symbols[next].id < 0) return;
    const int32_t merge = merge_of(symbols[pos].id, symbols[next].id);
    if (merge >= 0) queue.push({merge, pos});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.pos];
    if (left.begin == left.end || left.next < 0 || left.id < 0) continue;  // merged away since
    Symbol& right = symbols[left.next];
    const detail::BpeMergeEntry& m = t_.merges[c.merge];
    if (m.left != left.id || m.right != right.id) continue;  // a symbol changed since
    left.id = m.result;
    left.end = right.end;
    right.begin = right.end;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = c.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(c.pos);
  }
  for (int32_t i = 0; i >= 0 && i < static_cast<int32_t>(symbols.size()); i = symbols[i].next) {
    const Symbol& s = symbols[i];
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    bool bytes_known = t_.byte_fallback;
    for (uint32_t b = s.begin; bytes_known && b < s.end; ++b)
      bytes_known = byte_fallback_ids_[static_cast<unsigned char>(word[b])] >= 0;
    if (bytes_known) {
      for (uint32_t b = s.begin; b < s.end; ++b) ids.push_back(byte_fallback_ids_[static_cast<unsigned char>(word[b])]);
    } else if (t_.unk_id >= 0) {
      ids.push_back(t_.unk_id);
    } else {
      return Error{ErrorCode::kInvalidArgument,
                   "text: the character '" + std::string(word.substr(s.begin, s.end - s.begin)) +
                       "' has no token and the tokenizer has no unknown token"};
    }
  }
  return Status::ok();
}

// Precompiled (Rust tokenizers' normalizers/precompiled.rs over spm_precompiled 0.1.4's
// transform, tokenizers 0.15 .. 0.21): per extended grapheme cluster, a cluster under 6
// bytes that starts with a rule is replaced whole by the SHORTEST such rule's
// replacement (whatever of the cluster lies past the rule goes too: upstream's "yes,
// this seems broken", reproduced); otherwise each character is replaced by its own
// rule's, or kept when it has none. Not SentencePiece's longest-match rewriting.
// A rule's replacement may have 1024 bytes, so each append is checked against the budget
// before it is made.
Status HfTokenizer::apply_precompiled(const CharsMap& map, size_t step, const std::string& in, std::string& out,
                                      HfBudget& budget) const {
  out.clear();
  out.reserve(in.size());
  const HfStep name{"normalizers", step, "Precompiled"};
  const uint64_t limit = budget.limit(in.size());
  std::string_view replacement;
  for (size_t at = 0; at < in.size();) {
    const size_t end = grapheme_cluster_end(in, at);
    const std::string_view cluster(in.data() + at, end - at);
    at = end;
    if (cluster.size() < 6 && map.shortest_match(cluster, replacement) > 0) {
      if (out.size() + replacement.size() > limit) return budget.grow(in.size(), out.size() + replacement.size(), name);
      out.append(replacement);
      continue;
    }
    for (size_t k = 0; k < cluster.size();) {
      const size_t length = detail::utf8_decode(cluster, k).length;
      std::string_view c = cluster.substr(k, length);
      k += length;
      if (map.shortest_match(c, replacement) > 0) c = replacement;
      if (out.size() + c.size() > limit) return budget.grow(in.size(), out.size() + c.size(), name);
      out.append(c);
    }
  }
  return budget.grow(in.size(), out.size(), name);
}

double HfTokenizer::piece_score(int32_t id) const {
  double v;
  std::memcpy(&v, t_.scores + 8 * static_cast<size_t>(id), 8);
  return v;
}

// Unigram over one word: Rust tokenizers' Unigram::encode_optimized (SentencePiece's
// EncodeOptimized in f64): for each character start, every piece beginning there (of
// at most max_piece_bytes bytes: the chain of matches of the vocabulary automaton's
// state there, so no length without a piece is tried) offers best[start] + score to
// best[end]; a candidate wins only when strictly better (ties keep the earlier start).
// A character with no piece of its own length gets an unknown node of min_score - 10.
// Then the path is read back, runs of unknown nodes fused into one string, which is
// looked up as a token, else becomes its bytes' <0xXX> tokens (byte_fallback, all of
// them present) or the unknown id. No recursion; the work per character is one state
// and the pieces that start there (the lattice's edges), not max_piece_bytes lookups as
// it was (4,096 per character with a 4 KiB piece). The edges at a position are as many
// as the vocabulary's pieces that are prefixes of one another there: T5's test model has
// chains of 6 and 0.7 edges per byte of text (1.8 at most on a line); a hostile file's
// "a", "aa", ..., 4,096 'a' would give 4,096 per byte, so a word is refused past
// kUnigramEdgesPerByte per byte.
//
// transformers.js 3.7 (the BPE oracle) differs for these tokenizers, so it is not theirs:
// its Precompiled reads no charsmap (it strips control characters, maps whitespace to
// ' ' and applies NFKC, except around U+FF5E); its Metaspace ignores split and
// prepends only with add_prefix_space (absent in files tokenizers >= 0.19 writes), its
// decoder then keeps the first space; its Unigram has no byte fallback, scores the
// unknown piece min_score - 10 also where "<unk>" matches as text, and fuses unknown
// tokens across the words of a section, not within each word. Its lattice otherwise
// agrees (f64 sums, ties to the earlier start).
Status HfTokenizer::encode_unigram(std::string_view word, const Matchers& m, std::vector<int32_t>& ids,
                                   std::vector<uint32_t>& scratch) const {
  const size_t size = word.size();
  if (size == 0) return Status::ok();
  const VocabAutomaton& pieces = m.first;
  PieceScan scan(pieces.automaton, word, scratch);
  struct Best {
    double score;
    int32_t starts_at;  // -1: not reached
    int32_t id;         // -1: the unknown node of a tokenizer without an unknown id
  };
  std::vector<Best> best(size + 1, Best{0.0, -1, -1});
  const double unk_score = t_.min_score - 10.0;
  // The lattice's edges: never more than n (n + 1) / 2, so a word under 128 bytes is
  // always within kUnigramEdgesPerByte.
  uint64_t edges_left = kUnigramEdgesPerByte * uint64_t{size};
  for (size_t start = 0; start < size;) {
    const double here = best[start].score;
    const size_t char_length = detail::utf8_decode(word, start).length;
    bool has_single = false;
    // (A piece is UTF-8 and the word too, so a piece starting at a character ends at one.)
    for (uint32_t match = pieces.automaton.first_match(scan.state_at(start)); match != PieceAutomaton::kNone;
         match = pieces.automaton.next_match(match)) {
      if (edges_left-- == 0)
        return Error{ErrorCode::kInvalidArgument,
                     "tokenizer.hf.model (Unigram): more than " + std::to_string(kUnigramEdgesPerByte) +
                         " pieces start at each byte of a word of " + std::to_string(size) +
                         " bytes (its pieces are prefixes of one another that many deep); refused rather than run that "
                         "slowly"};
      const int32_t piece = pieces.automaton.piece(match);
      const size_t length = pieces.automaton.length(piece);
      const int32_t id = pieces.ids[static_cast<size_t>(piece)];
      const double candidate = piece_score(id) + here;
      Best& target = best[start + length];
      if (target.starts_at < 0 || candidate > target.score) {
        target.score = candidate;
        target.starts_at = static_cast<int32_t>(start);
        target.id = id;
      }
      if (length == char_length) has_single = true;
    }
    if (!has_single) {
      Best& target = best[start + char_length];
      const double candidate = unk_score + here;
      if (target.starts_at < 0 || candidate > target.score) {
        if (t_.unk_id < 0)
          return Error{ErrorCode::kInvalidArgument, "text: the character '" +
                                                        std::string(word.substr(start, char_length)) +
                                                        "' has no token and the tokenizer has no unknown token"};
        target.score = candidate;
        target.starts_at = static_cast<int32_t>(start);
        target.id = t_.unk_id;
      }
    }
    start += char_length;
  }
  // Read back (right to left), then emit left to right.
  struct Node {
    uint32_t begin, end;
    int32_t id;
  };
  std::vector<Node> path;
  for (size_t end = size; end > 0;) {  // every character boundary is reached, so this ends at 0
    const Best& node = best[end];
    const auto begin = static_cast<size_t>(node.starts_at);
    path.push_back({static_cast<uint32_t>(begin), static_cast<uint32_t>(end), node.id});
    end = begin;
  }
  std::reverse(path.begin(), path.end());
  for (size_t k = 0; k < path.size();) {
    if (path[k].id != t_.unk_id) {
      ids.push_back(path[k].id);
      ++k;
      continue;
    }
    const uint32_t begin = path[k].begin;
    while (k < path.size() && path[k].id == t_.unk_id) ++k;  // fuse_unk (always, for Unigram)
    const std::string_view run = word.substr(begin, path[k - 1].end - begin);
    if (const std::optional<int32_t> id = token_id(run); id && static_cast<size_t>(*id) < t_.score_count) {
      ids.push_back(*id);
      continue;
    }
    bool bytes_known = t_.byte_fallback;
    for (size_t b = 0; bytes_known && b < run.size(); ++b)
      bytes_known = byte_fallback_ids_[static_cast<unsigned char>(run[b])] >= 0;
    if (bytes_known) {
      for (unsigned char b : run) ids.push_back(byte_fallback_ids_[b]);
    } else {
      ids.push_back(t_.unk_id);
    }
  }
  return Status::ok();
}

Result<std::vector<int32_t>> HfTokenizer::encode_text(std::string_view text, bool add_special_tokens) const {
  if (text.size() > kMaxTextBytes)
    return Error{ErrorCode::kInvalidArgument, "text: longer than " + std::to_string(kMaxTextBytes) + " bytes"};
  if (const size_t bad = detail::utf8_invalid_at(text); bad != text.size())
    return Error{ErrorCode::kInvalidArgument, "text: not valid UTF-8 (byte " + std::to_string(bad) + ")"};
  std::vector<int32_t> ids;
  if (add_special_tokens) ids.assign(t_.prefix_ids.begin(), t_.prefix_ids.end());
  std::vector<TextSegment> segments;
  std::vector<std::string_view> sections, pieces;
  std::vector<int32_t> section_ids, piece_ids;
  auto built = matchers();
  if (!built) return built.error();
  const Matchers& m = *built.value();
  split_added(m.added, text, segments, sections, section_ids);
  std::string normalized;
  std::vector<std::string> words;
  std::vector<uint32_t> scratch;
  HfBudget budget(text.size(), kMaxTextBytes);
  for (size_t i = 0; i < sections.size(); ++i) {
    if (section_ids[i] >= 0) {
      ids.push_back(section_ids[i]);
      continue;
    }
    if (sections[i].empty()) continue;
    Status s = normalize(sections[i], normalized, budget);
    if (!s) return s.error();
    split_added(m.normalized, normalized, segments, pieces, piece_ids);
    for (size_t k = 0; k < pieces.size(); ++k) {
      if (piece_ids[k] >= 0) {
        ids.push_back(piece_ids[k]);
        continue;
      }
      if (pieces[k].empty()) continue;
      bool byte_level = false;
      s = pre_tokenize(pieces[k], k == 0 ? i : std::max<size_t>(i, 1), words, byte_level,  // "first": at the text's start
                       budget);
      if (!s) return s.error();
      const size_t first = ids.size();
      for (const std::string& word : words) {
        s = encode_word(word, byte_level, m, ids, scratch);
        if (!s) return s.error();
      }
      if (t_.fuse_unk && t_.unk_id >= 0) {  // runs of unknown tokens become one
        size_t out = first;
        for (size_t m = first; m < ids.size(); ++m)
          if (!(ids[m] == t_.unk_id && out > first && ids[out - 1] == t_.unk_id)) ids[out++] = ids[m];
        ids.resize(out);
      }
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), t_.suffix_ids.begin(), t_.suffix_ids.end());
  return ids;
}

void HfTokenizer::split_added(const SpecialTokenSplitter& splitter, std::string_view text,
                              std::vector<TextSegment>& segments, std::vector<std::string_view>& sections,
                              std::vector<int32_t>& section_ids) const {
  sections.clear();
  section_ids.clear();
  if (splitter.empty()) {
    sections.push_back(text);
    section_ids.push_back(-1);
    return;
  }
  // single_word (tokenizers): no word character (\w: letters, marks, digits Nd/Nl,
  // connector punctuation) right before or after the match; else it stays text.
  auto word_character = [](char32_t c) {
    using namespace detail::unicode_tables;
    const auto g = detail::general_category(c);
    return (g >= kLu && g <= kMe) || g == kNd || g == kNl || g == kPc;
  };
  splitter.split(text, segments, [&](size_t at, size_t length, int32_t id) {
    if (!(added_[static_cast<size_t>(id)] & kSingleWord)) return true;
    size_t before = at;
    while (before > 0 && (static_cast<unsigned char>(text[before - 1]) & 0xC0) == 0x80) --before;
    if (at > 0 && word_character(detail::utf8_decode(text, before - 1).value)) return false;
    return at + length == text.size() || !word_character(detail::utf8_decode(text, at + length).value);
  });
  // transformers.js's sections: the non-empty segments; an added token's lstrip/rstrip
  // trims the whitespace of the sections beside it.
  for (const TextSegment& s : segments) {
    if (s.special_id < 0 && s.text.empty()) continue;
    sections.push_back(s.text);
    section_ids.push_back(s.special_id);
  }
  for (size_t i = 0; i < sections.size(); ++i) {
    if (section_ids[i] < 0) continue;
    const uint8_t flags = added_[static_cast<size_t>(section_ids[i])];
    if ((flags & kLstrip) && i > 0 && section_ids[i - 1] < 0) sections[i - 1] = trim_right(sections[i - 1]);
    if ((flags & kRstrip) && i + 1 < sections.size() && section_ids[i + 1] < 0)
      sections[i + 1] = trim_left(sections[i + 1]);
  }
}

Result<TokenizedText> HfTokenizer::tokenize(std::string_view text) const {
  auto ids = encode_text(text, true);
  if (!ids) return ids.error();
  TokenizedText out;
  out.ids = std::move(ids.value());
  // The loader leaves the vocabulary's UTF-8 unchecked (format/model_file.cpp): what
  // leaves the tokenizer is made valid here.
  for (int32_t id : out.ids) out.pieces.push_back(detail::to_valid_utf8(t_.vocab[static_cast<size_t>(id)]));
  return out;
}

Result<std::string> HfTokenizer::decode(const std::vector<int32_t>& ids) const {
  return decode_ids(ids.data(), ids.size(), true);
}

Result<std::string> HfTokenizer::decode_ids(const int32_t* ids, size_t count, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  std::vector<bool> added;  // per token: an added token's text (ByteLevel keeps it)
  tokens.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const int32_t id = ids[i];
    if (id < 0 || static_cast<size_t>(id) >= t_.vocab.size())
      return Error{ErrorCode::kInvalidArgument, "ids[" + std::to_string(i) + "] = " + std::to_string(id) +
                                                     " is not a token id (vocabulary of " +
                                                     std::to_string(t_.vocab.size()) + ")"};
    if (skip_special_tokens && special_[static_cast<size_t>(id)]) continue;
    tokens.emplace_back(t_.vocab[static_cast<size_t>(id)]);
    added.push_back((added_[static_cast<size_t>(id)] & kAdded) != 0);
  }
  const ByteLevelMap& map = byte_level_map();
  std::vector<std::string> next;
  uint64_t token_bytes = 0;
  for (const std::string& token : tokens) token_bytes += token.size();
  HfBudget budget(token_bytes, UINT64_MAX);  // (any number of ids may be decoded)
  for (size_t i = 0; i < t_.decoders.size(); ++i) {
    const detail::HfDecoderStep& d = t_.decoders[i];
    next.clear();
    switch (d.kind) {
      case HfDecoderKind::kByteLevel: {
        // Runs of ordinary tokens: characters back to bytes (transformers.js reads a
        // character outside the map as byte 0), bytes to text with U+FFFD for what is
        // not UTF-8; an added token's text stays as it is.
        std::string bytes;
        std::vector<bool> next_added;
        auto flush = [&] {
          if (bytes.empty()) return;
          next.push_back(detail::to_valid_utf8(bytes));
          next_added.push_back(false);
          bytes.clear();
        };
        for (size_t k = 0; k < tokens.size(); ++k) {
          if (added[k]) {
            flush();
            next.push_back(std::move(tokens[k]));
            next_added.push_back(true);
            continue;
          }
          const std::string& token = tokens[k];
          for (size_t at = 0; at < token.size();) {
            const detail::CodePoint c = detail::utf8_decode(token, at);
            at += c.length;
            bytes.push_back(c.value < 324 && map.byte_of[c.value] >= 0 ? static_cast<char>(map.byte_of[c.value]) : '\0');
          }
        }
        flush();
        added.swap(next_added);
        break;
      }
      case HfDecoderKind::kReplace:
        for (std::string& token : tokens)
          if (Status s = replace_all_budgeted(token, d.pattern, d.content, budget, HfStep{"decoders", i, "Replace"}); !s)
            return s.error();
        continue;
      case HfDecoderKind::kByteFallback: {
        std::string bytes;
        std::vector<bool> next_added;
        for (size_t k = 0; k < tokens.size(); ++k) {
          const int value = byte_fallback_value(tokens[k]);
          if (value >= 0) {
            bytes.push_back(static_cast<char>(value));
            continue;
          }
          if (!bytes.empty()) {
            next.push_back(detail::to_valid_utf8(bytes));
            next_added.push_back(false);
            bytes.clear();
          }
          next.push_back(std::move(tokens[k]));
          next_added.push_back(added[k]);
        }
        if (!bytes.empty()) {
          next.push_back(detail::to_valid_utf8(bytes));
          next_added.push_back(false);
        }
        added.swap(next_added);
        break;
      }
      case HfDecoderKind::kFuse: {
        std::string all;
        for (const std::string& token : tokens) all += token;
        next.push_back(std::move(all));
        added.assign(1, false);
        break;
      }
      case HfDecoderKind::kStrip:
        for (std::string& token : tokens) {
          std::string_view v = token;
          for (uint32_t k = 0; k < d.start && v.compare(0, d.content.size(), d.content) == 0; ++k)
            v.remove_prefix(d.content.size());
          for (uint32_t k = 0; k < d.stop && v.size() >= d.content.size() &&
                               v.compare(v.size() - d.content.size(), d.content.size(), d.content) == 0;
               ++k)
            v.remove_suffix(d.content.size());
          token = std::string(v);
        }
        continue;
      case HfDecoderKind::kWordPiece:
        // Every token but the first: its prefix dropped, or a space before it; cleanup is
        // transformers.js's clean_up_tokenization (Rust tokenizers' also turns " do not"
        // into " don't").
        for (size_t k = 0; k < tokens.size(); ++k) {
          if (k > 0) {
            if (tokens[k].compare(0, d.prefix.size(), d.prefix) == 0) {  // an empty prefix: always
              tokens[k].erase(0, d.prefix.size());
            } else {
              // (a byte per token, but 64 such steps would add 64)
              if (Status s = budget.grow(tokens[k].size(), tokens[k].size() + 1, HfStep{"decoders", i, "WordPiece"}); !s)
                return s.error();
              tokens[k].insert(0, " ");
            }
          }
          if (d.cleanup) clean_up_tokenization(tokens[k]);
        }
        continue;
      case HfDecoderKind::kMetaspace:
        for (size_t k = 0; k < tokens.size(); ++k) {
          // Rust's decoder (a Unigram tokenizer's) drops every replacement of the first token.
          // (No growth: the replacement is not empty.)
          const HfStep step{"decoders", i, "Metaspace"};
          if (k == 0 && d.add_prefix_space && t_.model == detail::HfModelKind::kUnigram)
            (void)replace_all_budgeted(tokens[k], d.replacement, "", budget, step);
          (void)replace_all_budgeted(tokens[k], d.replacement, " ", budget, step);
          if (d.add_prefix_space && k == 0 && !tokens[k].empty() && tokens[k][0] == ' ') tokens[k].erase(0, 1);
        }
        continue;
    }
    tokens.swap(next);
  }
  std::string text;
  for (const std::string& token : tokens) {
    // transformers.js joins the tokens with spaces when there is no decoder.
    if (t_.decoders.empty() && &token != &tokens.front()) text += ' ';
    text += token;
  }
  if (t_.clean_up_spaces) clean_up_tokenization(text);
  if (!detail::is_valid_utf8(text)) text = detail::to_valid_utf8(text);  // a corrupt file's tokens
  return text;
}

}  // namespace petrel::text
