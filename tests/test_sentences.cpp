// The sentence splitter (engine/src/text/sentence_splitter.h states its rules):
// hand-checked cases in several scripts, and invariants on real messages in ~190
// locales (the gettext corpus of the SentencePiece fixtures).
#include <catch2/catch.hpp>
#include <cstdio>

#include "support/test_support.h"
#include "text/sentence_splitter.h"

using petrel::text::split_sentences;

namespace {
std::vector<std::string> sentences(const std::string& text) {
  std::vector<std::string> out;
  for (const auto& s : split_sentences(text)) out.push_back(text.substr(s.begin, s.end - s.begin));
  return out;
}
using V = std::vector<std::string>;
}  // namespace

TEST_CASE("sentences: hand-checked cases", "[sentences]") {
  CHECK(sentences("Hello world. This is Petrel.") == V{"Hello world.", "This is Petrel."});
  CHECK(sentences("See e.g. the manual. Then restart.") == V{"See e.g. the manual.", "Then restart."});
  CHECK(sentences("Mr. Smith went home. He slept.") == V{"Mr. Smith went home.", "He slept."});
  CHECK(sentences("Version 2.0 is out. Update now!") == V{"Version 2.0 is out.", "Update now!"});
  CHECK(sentences("It costs 3.50 EUR. Pay now.") == V{"It costs 3.50 EUR.", "Pay now."});
  CHECK(sentences("Is it? yes it is.") == V{"Is it? yes it is."});
  CHECK(sentences("Done! 3 files copied.") == V{"Done!", "3 files copied."});
  CHECK(sentences("He said \"Stop.\" Then he left.") == V{"He said \"Stop.\"", "Then he left."});
  CHECK(sentences("Wait... What happened?") == V{"Wait...", "What happened?"});
  CHECK(sentences("J. R. R. Tolkien wrote books. The U.S. Army came.") ==
        V{"J. R. R. Tolkien wrote books.", "The U.S. Army came."});
  CHECK(sentences("The file foo.txt was saved. OK") == V{"The file foo.txt was saved.", "OK"});
  CHECK(sentences("Das ist z.B. gut. Und d.h. nichts. Ende.") == V{"Das ist z.B. gut.", "Und d.h. nichts.", "Ende."});
  CHECK(sentences("Привет. Как дела?") == V{"Привет.", "Как дела?"});
  CHECK(sentences("Γεια σου. Τι κάνεις;") == V{"Γεια σου.", "Τι κάνεις;"});
  CHECK(sentences("مرحبا. كيف حالك؟ جيد") == V{"مرحبا.", "كيف حالك؟", "جيد"});
  CHECK(sentences("你好。我是彼得。") == V{"你好。", "我是彼得。"});
  CHECK(sentences("「はい。」と言った。次へ") == V{"「はい。」", "と言った。", "次へ"});
  CHECK(sentences("नमस्ते। आप कैसे हैं?") == V{"नमस्ते।", "आप कैसे हैं?"});
  CHECK(sentences("  Ende. \n Neu.  ") == V{"Ende.", "Neu."});
  CHECK(sentences("One sentence without an end") == V{"One sentence without an end"});
  CHECK(sentences("").empty());
  CHECK(sentences(" \t ").empty());
  CHECK(sentences("Invalid \xff bytes. Still fine.") == V{"Invalid \xff bytes.", "Still fine."});
}

TEST_CASE("sentences: invariants on real messages in many scripts", "[sentences]") {
  FILE* pipe = popen(("xz -dc '" + petrel::test::fixture_dir() + "/sentencepiece/corpus.txt.xz' 2>/dev/null").c_str(),
                     "r");
  REQUIRE(pipe != nullptr);
  std::string corpus;
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) corpus.append(buf, n);
  pclose(pipe);
  if (corpus.empty()) {
    WARN("xz is not installed: the corpus invariants are skipped");
    return;
  }
  size_t lines = 0, multi = 0, total = 0;
  for (size_t at = 0; at < corpus.size();) {
    size_t end = corpus.find('\n', at);
    if (end == std::string::npos) end = corpus.size();
    const std::string_view line(corpus.data() + at, end - at);
    at = end + 1;
    ++lines;
    const auto spans = split_sentences(line);
    size_t previous_end = 0;
    for (const auto& s : spans) {
      REQUIRE(s.begin < s.end);
      REQUIRE(s.begin >= previous_end);
      REQUIRE(s.end <= line.size());
      // Between two sentences only whitespace (possibly none, after a CJK stop).
      for (size_t i = previous_end; i < s.begin; ++i)
        REQUIRE((static_cast<unsigned char>(line[i]) <= 0x20 || static_cast<unsigned char>(line[i]) >= 0x80));
      REQUIRE_FALSE((line[s.begin] == ' ' || line[s.end - 1] == ' '));
      previous_end = s.end;
    }
    total += spans.size();
    multi += spans.size() > 1;
  }
  WARN("sentence splitter on " << lines << " real messages: " << multi << " split into " << total << " sentences in all");
  CHECK(lines > 100000);
  CHECK(multi > 1000);
}
