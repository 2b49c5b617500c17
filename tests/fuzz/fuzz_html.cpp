// Fuzz target: text::HtmlMarkup, bergamot's HTML markup carried through a translation.
// The input is markup. HtmlMarkup::parse must accept it or refuse it with
// kInvalidArgument (a NUL byte, nesting past the limit); text() is then split into
// sentences at "\n\n", tokens are words (split at ' ' and '\n') with the whitespace
// before them, plus EOS, and
//  * restore() with the source as its own translation and identity alignments must give
//    the target the source's markup, byte for byte;
//  * restore() with alignments drawn from the input's bytes (and quality <font>s when the
//    input's length is odd) must succeed, every token's range must lie in the text, one
//    after the other, and every tag of the input must come back at least once: restore
//    visits every span's stack, so each tag is opened at least once and each element closed
//    (tags may repeat: a reordered translation reopens them).
// The count is checked by parsing the outputs again, so it is checked when the restored
// source parses into the same tags as the input: not when the input needed repairs (an
// unterminated <code> copied to the end may not close when parsed again) or holds a quote
// (a value with '"' is written back between '"'s, as bergamot writes it).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/html_words.h"
#include "text/html_markup.h"

namespace {

using petrel::AnnotatedText;
using petrel::TextRange;
using petrel::text::HtmlMarkup;
using petrel::text::HtmlNodeKind;

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz target: broken promise: %s\n", what);
  std::abort();
}

// Only ' ' and '\n' separate tokens: bergamot joins a token starting with any other byte
// (\t too) to the word before, and the word's tokens all take the alignment of its last
// one, so identity alignments would not be identity there.
AnnotatedText sentences_of(const std::string& text) { return petrel::test::words_as_tokens(text, " \n"); }

// (kind, lowercase name) -> how many, paragraph breaks left out.
std::map<std::pair<int, std::string>, size_t> tag_counts(const HtmlMarkup& m) {
  std::map<std::pair<int, std::string>, size_t> counts;
  for (size_t i = 0; i < m.node_count(); ++i) {
    if (m.node_kind(i) == HtmlNodeKind::kParagraphBreak) continue;
    std::string name(m.node_name(i));
    for (char& c : name) c = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    ++counts[{static_cast<int>(m.node_kind(i)), name}];
  }
  return counts;
}

void check_ranges(const AnnotatedText& t) {
  size_t at = 0;
  for (const auto& sentence : t.sentences)
    for (const TextRange& r : sentence) {
      require(r.begin >= at && r.begin <= r.end && r.end <= t.text.size(), "restored tokens follow each other");
      at = r.end;
    }
}

uint64_t next_random(uint64_t& state) {
  state = state * 6364136223846793005ULL + 1442695040888963407ULL;
  return state >> 33;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view html(reinterpret_cast<const char*>(data), size);
  auto parsed = HtmlMarkup::parse(html);
  if (!parsed) {
    require(parsed.error().code == petrel::ErrorCode::kInvalidArgument, "a refusal is kInvalidArgument");
    require(parsed.error().message.rfind("HTML markup byte ", 0) == 0, "a refusal names the byte");
    return 0;
  }
  const HtmlMarkup& m = parsed.value();
  const AnnotatedText plain = sentences_of(m.text());
  size_t cells = 0;
  for (const auto& s : plain.sentences) cells += s.size() * s.size();
  if (cells > (size_t{1} << 22)) return 0;  // alignment matrices over 16 MB

  // Identity: the target is the source.
  std::vector<std::vector<std::vector<float>>> identity;
  for (const auto& s : plain.sentences) {
    identity.emplace_back(s.size(), std::vector<float>(s.size(), 0.0f));
    for (size_t i = 0; i < s.size(); ++i) identity.back()[i][i] = 1.0f;
  }
  AnnotatedText source = plain, target = plain;
  auto status = m.restore(source, target, identity);
  require(static_cast<bool>(status), "restore with identity alignments succeeds");
  require(source.text == target.text, "identity alignments give the source's markup back");
  check_ranges(source);

  // Alignments and quality scores from the input's bytes.
  uint64_t state = 0x9e3779b97f4a7c15ULL;
  for (size_t i = 0; i < size; ++i) state = (state ^ data[i]) * 0x100000001b3ULL;
  std::vector<std::vector<std::vector<float>>> random;
  petrel::text::QualityMarkup quality;
  for (const auto& s : plain.sentences) {
    random.emplace_back(s.size(), std::vector<float>(s.size(), 0.0f));
    for (auto& row : random.back())
      for (float& v : row) v = static_cast<float>(next_random(state) % 1000) / 1000.0f;
    petrel::text::WordQuality q;
    q.sentence_score = -static_cast<float>(next_random(state) % 1000) / 100.0f;
    for (size_t t = 0; t + 1 < s.size(); ++t) {
      q.word_tokens.push_back(TextRange{t, t + 1});
      q.word_scores.push_back(-static_cast<float>(next_random(state) % 1000) / 7.0f);
    }
    quality.push_back(std::move(q));
  }
  AnnotatedText source2 = plain, target2 = plain;
  status = m.restore(source2, target2, random, size % 2 ? &quality : nullptr);
  require(static_cast<bool>(status), "restore with any alignments succeeds");
  require(source2.text == source.text, "the source's markup does not depend on the alignments");
  check_ranges(target2);

  petrel::text::HtmlOptions deeper;
  deeper.max_nesting = petrel::text::HtmlOptions::kMaxNesting + 2;  // the <font>s
  auto again_source = HtmlMarkup::parse(source.text, deeper);
  auto again_target = HtmlMarkup::parse(target2.text, deeper);
  require(again_source.has_value() && again_target.has_value(), "restored markup parses");
  const auto counts = tag_counts(m);
  const bool faithful = tag_counts(again_source.value()) == counts;
  require(faithful || m.repairs() > 0 || html.find_first_of("'\"") != std::string_view::npos,
          "restored source markup parses into the input's tags");
  if (faithful) {
    const auto target_counts = tag_counts(again_target.value());
    for (const auto& [key, count] : counts) {
      auto it = target_counts.find(key);
      require(it != target_counts.end() && it->second >= count, "every tag comes back in the target");
    }
  }
  return 0;
}
