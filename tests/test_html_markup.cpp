// text::HtmlMarkup: bergamot-translator's HTML handling (src/translator/html.cpp). The
// expected texts and markup marked "bergamot:" are the cases of bergamot's own unit tests
// (src/tests/units/html_tests.cpp, v0.4.5), token for token; the others follow from its
// algorithm as html_markup.h states it, or from properties (identity alignments give the
// source's markup back; a reordered translation moves the tags with the words; every tag
// is put back). Malformed markup: each repair and each refusal. Megabyte inputs in
// "[.][linear][html]".
#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "support/html_words.h"
#include "text/html_markup.h"

namespace {

using petrel::AnnotatedText;
using petrel::ErrorCode;
using petrel::TextRange;
using petrel::text::HtmlMarkup;
using petrel::text::HtmlNodeKind;
using petrel::text::HtmlOptions;
using HtmlAlignments = std::vector<std::vector<std::vector<float>>>;

HtmlMarkup html_parsed(const std::string& html, const HtmlOptions& options = {}) {
  auto m = HtmlMarkup::parse(html, options);
  if (!m) FAIL(html << ": " << m.error().message);
  return std::move(m).value();
}

std::string html_text(const std::string& html) { return html_parsed(html).text(); }

// An AnnotatedText of `text` from explicit token ranges, one list per sentence.
AnnotatedText html_annotated(const std::string& text,
                             const std::vector<std::vector<std::pair<size_t, size_t>>>& sentences) {
  AnnotatedText t;
  t.text = text;
  for (const auto& s : sentences) {
    t.sentences.emplace_back();
    for (const auto& [b, e] : s) t.sentences.back().push_back(TextRange{b, e});
  }
  return t;
}

// A stand-in for sentence splitting and SentencePiece: sentences end at "\n\n", a token
// is a word with the whitespace before it (none for a sentence's first), then EOS.
AnnotatedText html_words(const std::string& text) { return petrel::test::words_as_tokens(text, " \n\t\r\f\v"); }

HtmlAlignments html_identity(const AnnotatedText& t) {
  HtmlAlignments a;
  for (const auto& s : t.sentences) {
    a.emplace_back(s.size(), std::vector<float>(s.size(), 0.0f));
    for (size_t i = 0; i < s.size(); ++i) a.back()[i][i] = 1.0f;
  }
  return a;
}

// bergamot's asTokens: gap 0, sentence 0's tokens, gap 1, ..., the last gap.
std::vector<std::string> html_tokens(const AnnotatedText& t) {
  std::vector<std::string> out;
  size_t at = 0;
  for (const auto& s : t.sentences) {
    out.push_back(t.text.substr(at, s.front().begin - at));
    for (size_t k = 0; k < s.size(); ++k) {
      const size_t end = k + 1 < s.size() ? s[k + 1].begin : s[k].end;
      out.push_back(t.text.substr(s[k].begin, end - s[k].begin));
    }
    at = s.back().end;
  }
  out.push_back(t.text.substr(at));
  return out;
}

// Restores `html` with an identical "translation" and identity alignments; returns the
// restored source after checking that the target came out the same.
std::string html_round_trip(const std::string& html, const HtmlOptions& options = {}) {
  const HtmlMarkup m = html_parsed(html, options);
  AnnotatedText source = html_words(m.text());
  AnnotatedText target = source;
  const auto status = m.restore(source, target, html_identity(source));
  if (!status) FAIL(html << ": " << status.error().message);
  CHECK(target.text == source.text);
  return source.text;
}

}  // namespace

TEST_CASE("html: text is bergamot's: tags out, block elements as paragraph breaks, inline ones as spaces", "[html]") {
  // bergamot:
  CHECK(html_text("<P><B>Spa</B>ce<BR>please?</p>") == "Spa ce\n\nplease?");
  CHECK(html_text("<p>Space<br>please?</p>") == "Space\n\nplease?");
  CHECK(html_text("un<u>der</u>line") == "un der line");
  CHECK(html_text("<p>hello <b>world</b></p>\n") == "hello world\n\n\n");
  CHECK(html_text("<p>hello <img> <b>world</b> <u>and other <a href=\"#\">creatures</a></u></p>") ==
        "hello  world and other creatures");
  CHECK(html_text("<p>hello<img/>world</p>") == "hello world");
  CHECK(html_text("hello <br>") == "hello ");
  CHECK(html_text("hello <u></u>") == "hello ");
  CHECK(html_text("<p>hello <br></p>") == "hello ");
  CHECK(html_text("<p>I <b>like</b> to <u>drive</u> this car.</p>") == "I like to drive this car.");
  CHECK(html_text("hel<wbr>lo") == "hello");
  CHECK(html_text("hel<WBR>lo") == "hello");
  CHECK(html_text("") == "");
  CHECK(html_text("<p></p>") == "");
  // No space between a word and punctuation, or where whitespace already is.
  CHECK(html_text("<b>bold</b>, then <i>it</i>.") == "bold, then it.");
  CHECK(html_text("a<b>(b)</b>") == "a(b)");
  CHECK(html_text("a<b>[b]</b>c") == "a[b]c");
  // The "\n\n" goes in only after at least two bytes of text, and never twice.
  CHECK(html_text("<p>a</p><p>b</p>") == "ab");
  CHECK(html_text("<p>ab</p><p>c</p>") == "ab\n\nc");
  CHECK(html_text("<div><p>ab</p></div><div><p>c</p></div>") == "ab\n\nc");
  CHECK(html_text("<li>one</li><li>two</li><li>three</li>") == "one\n\ntwo\n\nthree");
  CHECK(html_text("<td>cell</td><td>cell</td>") == "cell\n\ncell");
  // Unknown elements break sentences; spaces added after inline tags stay before blocks.
  CHECK(html_text("ab<custom-el>cd</custom-el>") == "ab\n\ncd");
  CHECK(html_text("ab<b>cd<p>ef</p></b>") == "ab cd\n\nef");
  // Whitespace is kept as it is.
  CHECK(html_text("a \t\n\r b  <b> c </b>  d") == "a \t\n\r b   c   d");
}

TEST_CASE("html: entities: six decoded, the rest kept as written", "[html]") {
  // bergamot:
  CHECK(html_text("<p data-attr=\"&quot;&apos;\">This is a sentence &lt;with&gt; named &amp; entities</p>") ==
        "This is a sentence <with> named & entities");
  CHECK(html_text("a&nbsp;b") == "a b");  // a plain space, as bergamot
  CHECK(html_text("&quot;q&quot; &apos;") == "\"q\" '");
  CHECK(html_text("&#39; &#x27; &copy; &AMP; &amp &lt") == "&#39; &#x27; &copy; &AMP; &amp &lt");
  CHECK(html_text("&amp;amp;") == "&amp;");
  // An entity is a text of its own: after an inline tag it can take a space.
  CHECK(html_text("a<b>&amp;</b>") == "a &");
}

TEST_CASE("html: attributes, void elements, comments, raw text and copied elements stay out of the text", "[html]") {
  CHECK(html_text("<a title=\"x > y\" href='z'>link</a> text") == "link text");
  CHECK(html_text("<a title=x>y</a>") == "y");
  CHECK(html_text("<input disabled value=\"<b>\">after") == "after");
  CHECK(html_text("<img src=\"a.png\" alt=\"a > b\"/>x") == "x");
  // bergamot:
  CHECK(html_text("hello <script>alert(\"<foo>\");</script>world") == "hello \n\nworld");
  CHECK(html_text("foo <!-- <ignore> me -->bar") == "foo bar");
  CHECK(html_text("foo <var><var>nested</var></var> bar") == "foo  bar");
  CHECK(html_text("foo <var>&amp;</var> bar") == "foo  bar");
  // Raw text runs to the first "</name>" of any case; copied elements count nesting.
  CHECK(html_text("ab<style>p { x: '</b>' }</STYLE>cd") == "ab\n\ncd");
  CHECK(html_text("ab<textarea><p>not markup</textarea>cd") == "ab\n\ncd");
  CHECK(html_text("ab<code>x <code>y</code> z</code>cd") == "ab\n\ncd");
  CHECK(html_text("ab <kbd>Ctrl</kbd> cd") == "ab  cd");
  CHECK(html_text("<?xml version=\"1.0\"?>ab") == "ab");
}

TEST_CASE("html: paragraph breaks are listed where they start", "[html]") {
  const HtmlMarkup m = html_parsed("<p>one</p><p>two</p><br>three");
  CHECK(m.text() == "one\n\ntwo\n\nthree");
  CHECK(m.paragraph_breaks() == std::vector<size_t>{3, 8});
  CHECK(m.repairs() == 0);
  size_t breaks = 0, elements = 0, voids = 0;
  for (size_t i = 0; i < m.node_count(); ++i) {
    breaks += m.node_kind(i) == HtmlNodeKind::kParagraphBreak;
    elements += m.node_kind(i) == HtmlNodeKind::kElement;
    voids += m.node_kind(i) == HtmlNodeKind::kVoidElement;
  }
  CHECK(breaks == 2);
  CHECK(elements == 2);
  CHECK(voids == 1);
}

TEST_CASE("html: restore puts the markup back as bergamot's tests expect", "[html]") {
  SECTION("a paragraph break taken out again (bergamot: self-closing tags ... paragraph break)") {
    const HtmlMarkup m = html_parsed("<p>Space<br>please?</p>");
    AnnotatedText source =
        html_annotated("Space\n\nplease?", {{{0, 5}, {5, 5}}, {{7, 8}, {8, 13}, {13, 14}, {14, 14}}});
    AnnotatedText target = html_annotated("Platzbitte?", {{{0, 5}, {5, 5}}, {{5, 10}, {10, 11}, {11, 11}}});
    const HtmlAlignments a = {{{1.0f, 0.0f}, {0.0f, 1.0f}},
                              {{0.1f, 0.9f, 0.0f, 0.0f}, {0.0f, 0.0f, 1.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 1.0f}}};
    REQUIRE(m.restore(source, target, a));
    CHECK(source.text == "<p>Space<br>please?</p>");
    CHECK(target.text == "<p>Platz<br>bitte?</p>");
  }
  SECTION("inline tags as spaces (bergamot)") {
    const HtmlMarkup m = html_parsed("un<u>der</u>line");
    AnnotatedText source = html_annotated("un der line", {{{0, 2}, {2, 5}, {5, 6}, {6, 11}, {11, 11}}});
    AnnotatedText target = html_annotated("una linea der", {{{0, 3}, {3, 9}, {9, 12}, {12, 13}, {13, 13}}});
    const HtmlAlignments a = {{{0.9795f, 0.0127f, 0.0002f, 0.0066f, 0.0009f},
                               {0.0098f, 0.2967f, 0.0156f, 0.6640f, 0.0138f},
                               {0.0214f, 0.7472f, 0.0626f, 0.0745f, 0.0943f},
                               {0.0022f, 0.0230f, 0.9357f, 0.0165f, 0.0226f},
                               {0.0122f, 0.0240f, 0.0085f, 0.7427f, 0.2125f}}};
    REQUIRE(m.restore(source, target, a));
    CHECK(source.text == "un <u>der</u> line");
    CHECK(target.text == "una linea <u>der</u>");
  }
  SECTION("tokens of the target sentence (bergamot)") {
    const HtmlMarkup m = html_parsed("<p>hello <b>world</b></p>\n");
    AnnotatedText source = html_annotated("hello world\n\n\n", {{{0, 4}, {4, 5}, {5, 11}, {11, 11}}});
    AnnotatedText target = html_annotated("hallo Welt\n\n\n", {{{0, 4}, {4, 5}, {5, 10}, {10, 10}}});
    REQUIRE(m.restore(source, target, html_identity(source)));
    CHECK(html_tokens(source) == std::vector<std::string>{"", "<p>hell", "o", " <b>world", "", "</b></p>\n"});
    CHECK(html_tokens(target) == std::vector<std::string>{"", "<p>hall", "o", " <b>Welt", "", "</b></p>\n"});
  }
  SECTION("entities escaped again (bergamot)") {
    const HtmlMarkup m = html_parsed("<p>hello <b>world &amp; friends!</b></p>");
    AnnotatedText source =
        html_annotated("hello world & friends!", {{{0, 4}, {4, 5}, {5, 11}, {11, 13}, {13, 21}, {21, 22}, {22, 22}}});
    AnnotatedText target =
        html_annotated("hallo Welt & Freunde!", {{{0, 4}, {4, 5}, {5, 10}, {10, 12}, {12, 20}, {20, 21}, {21, 21}}});
    REQUIRE(m.restore(source, target, html_identity(source)));
    CHECK(html_tokens(source) ==
          std::vector<std::string>{"", "<p>hell", "o", " <b>world", " &amp;", " friends", "!", "", "</b></p>"});
    CHECK(html_tokens(target) ==
          std::vector<std::string>{"", "<p>hall", "o", " <b>Welt", " &amp;", " Freunde", "!", "", "</b></p>"});
  }
  SECTION("several sentences (bergamot)") {
    const HtmlMarkup m = html_parsed(
        "<p>hello <b>world!</b> How does this <img> <b>deal <u>with multiple sentences?</u></b> Will it work?</p>");
    REQUIRE(m.text() == "hello world! How does this  deal with multiple sentences? Will it work?");
    AnnotatedText source = html_annotated(
        m.text(), {{{0, 4}, {4, 5}, {5, 11}, {11, 12}, {12, 12}},
                   {{13, 16}, {16, 21}, {21, 26}, {26, 32}, {32, 37}, {37, 46}, {46, 55}, {55, 56}, {56, 57}, {57, 57}},
                   {{58, 62}, {62, 65}, {65, 70}, {70, 71}, {71, 71}}});
    AnnotatedText target = html_annotated(
        "hallo Welt! Wie geht das mit mehreren S\xc3\xa4tzen um? Wird es funktionieren?",
        {{{0, 4}, {4, 5}, {5, 10}, {10, 11}, {11, 11}},
         {{12, 15}, {15, 20}, {20, 24}, {24, 28}, {28, 37}, {37, 44}, {44, 45}, {45, 48}, {48, 49}, {49, 49}},
         {{50, 54}, {54, 57}, {57, 71}, {71, 72}, {72, 72}}});
    REQUIRE(m.restore(source, target, html_identity(source)));
    CHECK(html_tokens(source) ==
          std::vector<std::string>{"",    "<p>hell", "o",     " <b>world",      "!",        "",          "</b> ",
                                   "How", " does",   " this", "  <img><b>deal", " <u>with", " multiple", " sentence",
                                   "s",   "?",       "",      "</u></b> ",      "Will",     " it",       " work",
                                   "?",   "",        "</p>"});
  }
  SECTION("empty elements and void elements at the end (bergamot)") {
    for (const std::string html : {"hello <br>", "hello <u></u>"}) {
      const HtmlMarkup m = html_parsed(html);
      AnnotatedText source = html_annotated("hello ", {{{0, 4}, {4, 6}, {6, 6}}});
      AnnotatedText target = source;
      REQUIRE(m.restore(source, target, html_identity(source)));
      CHECK(source.text == html);
      CHECK(target.text == html);
    }
  }
  SECTION("empty tags between words (bergamot)") {
    const std::string html =
        "<p id=\"1\">hello <img id=\"1.1\"><span id=\"1.2\"><u id=\"1.2.1\"></u><b id=\"1.2.2\"></b><img "
        "id=\"1.2.3\">world</span></p>";
    const HtmlMarkup m = html_parsed(html);
    REQUIRE(m.text() == "hello world");
    AnnotatedText source = html_annotated("hello world", {{{0, 4}, {4, 5}, {5, 11}, {11, 11}}});
    AnnotatedText target = source;
    REQUIRE(m.restore(source, target, html_identity(source)));
    CHECK(source.text == html);
    CHECK(target.text == html);
  }
  SECTION("script, comment and copied elements (bergamot)") {
    struct Case {
      std::string html, text, restored;
      std::vector<std::pair<size_t, size_t>> tokens;
    };
    const Case cases[] = {
        {"hello <script>alert(\"<foo>\");</script>world",
         "hello \n\nworld",
         "hello <script>alert(\"<foo>\");</script>world",
         {{0, 4}, {4, 6}, {6, 8}, {8, 13}, {13, 13}}},
        {"foo <!-- <ignore> me -->bar", "foo bar", "foo <!-- <ignore> me -->bar", {{0, 3}, {3, 7}, {7, 7}}},
        {"foo <var><var>nested</var></var> bar",
         "foo  bar",
         "foo  <var><var>nested</var></var>bar",
         {{0, 3}, {3, 4}, {4, 8}, {8, 8}}},
        {"foo <var>&amp;</var> bar", "foo  bar", "foo  <var>&amp;</var>bar", {{0, 3}, {3, 4}, {4, 8}, {8, 8}}},
    };
    for (const Case& c : cases) {
      const HtmlMarkup m = html_parsed(c.html);
      REQUIRE(m.text() == c.text);
      AnnotatedText source = html_annotated(c.text, {c.tokens});
      AnnotatedText target = source;
      REQUIRE(m.restore(source, target, html_identity(source)));
      CHECK(source.text == c.restored);
      CHECK(target.text == c.restored);
    }
  }
  SECTION("nothing to translate") {
    for (const std::string html : {"", "<p></p>", "<img src=\"x\"><!--c-->"}) {
      const HtmlMarkup m = html_parsed(html);
      AnnotatedText source = html_annotated(m.text(), {});
      AnnotatedText target = source;
      REQUIRE(m.restore(source, target, {}));
      CHECK(source.text == html);
      CHECK(target.text == html);
    }
  }
}

TEST_CASE("html: an end-to-end translation (bergamot's [!mayfail] cases, by its algorithm)", "[html]") {
  const HtmlMarkup m = html_parsed("<p>I <b>like</b> to <u>drive</u> this car.</p>");
  const std::vector<std::pair<size_t, size_t>> source_tokens = {{0, 1},   {1, 6},   {6, 9},   {9, 15},
                                                                {15, 20}, {20, 24}, {24, 25}, {25, 25}};
  SECTION("markup follows the aligned words") {
    AnnotatedText source = html_annotated(m.text(), {source_tokens});
    AnnotatedText target =
        html_annotated("Ich fahre gerne dieses Auto.",
                       {{{0, 3}, {3, 4}, {4, 8}, {8, 9}, {9, 15}, {15, 22}, {22, 27}, {27, 28}, {28, 28}}});
    const HtmlAlignments a = {{
        {0.982376f, 0.00742467f, 0.00682965f, 0.00121767f, 0.000848056f, 6.51436e-05f, 7.53791e-06f, 0.00123162f},
        {0.165639f, 0.368694f, 0.230394f, 0.222476f, 0.00349563f, 0.00105052f, 0.000603092f, 0.00764845f},
        {0.00493271f, 0.0805876f, 0.0139988f, 0.89116f, 0.000928116f, 0.00200724f, 0.000512013f, 0.00587302f},
        {0.0194648f, 0.411029f, 0.087059f, 0.0477847f, 0.26596f, 0.111161f, 0.000392092f, 0.0571499f},
        {0.00879706f, 0.492504f, 0.0448291f, 0.007779f, 0.423114f, 0.0125523f, 0.00119587f, 0.00922804f},
        {0.00181909f, 0.00603626f, 0.0335758f, 0.037193f, 0.747266f, 0.102497f, 0.0585782f, 0.0130341f},
        {4.1348e-06f, 0.000156165f, 2.16369e-05f, 0.00275059f, 0.00183456f, 0.992357f, 0.0023765f, 0.000499018f},
        {0.00149043f, 0.000719392f, 0.0168534f, 0.00430164f, 0.00200343f, 0.0106381f, 0.948566f, 0.0154279f},
        {0.0903136f, 0.0550843f, 0.0699474f, 0.0792285f, 0.223006f, 0.207565f, 0.129241f, 0.145614f},
    }};
    REQUIRE(m.restore(source, target, a));
    CHECK(html_tokens(source) == std::vector<std::string>{"", "<p>I", " <b>like", "</b> to", " <u>drive", "</u> this",
                                                          " car", ".", "", "</p>"});
    // "Ich" <- I; " " <- like (b); "fahr" <- drive (u), "e" joins it; " gerne" <- like
    // (b, over " this"); the rest plain.
    CHECK(html_tokens(target) == std::vector<std::string>{"", "<p>Ich", " <b>", "</b><u>fahr", "e", "</u> <b>gerne",
                                                          "</b> dieses", " Auto", ".", "", "</p>"});
  }
  SECTION("markup whose words align with nothing is put back empty where it was") {
    AnnotatedText source = html_annotated(m.text(), {source_tokens});
    AnnotatedText target = html_annotated(
        "R\xc3\xa1"
        "d \xc5\x99\xc3\xad"
        "d\xc3\xad"
        "m to auto.",
        {{{0, 4}, {4, 10}, {10, 13}, {13, 16}, {16, 21}, {21, 22}, {22, 22}}});
    const HtmlAlignments a = {{
        {0.5360f, 0.4405f, 0.0142f, 0.0061f, 0.0029f, 0.0001f, 0.0000f, 0.0001f},
        {0.0451f, 0.0602f, 0.5120f, 0.2584f, 0.1145f, 0.0062f, 0.0019f, 0.0017f},
        {0.0392f, 0.0009f, 0.6535f, 0.2293f, 0.0492f, 0.0199f, 0.0014f, 0.0067f},
        {0.0007f, 0.0036f, 0.0112f, 0.0118f, 0.9209f, 0.0449f, 0.0050f, 0.0019f},
        {0.0000f, 0.0004f, 0.0008f, 0.0047f, 0.0163f, 0.9683f, 0.0045f, 0.0050f},
        {0.0011f, 0.0046f, 0.0039f, 0.0090f, 0.0023f, 0.0024f, 0.9648f, 0.0119f},
        {0.0840f, 0.0744f, 0.1545f, 0.1330f, 0.1818f, 0.1722f, 0.0859f, 0.1143f},
    }};
    REQUIRE(m.restore(source, target, a));
    CHECK(html_tokens(target) == std::vector<std::string>{"",
                                                          "<p>R\xc3\xa1"
                                                          "d",
                                                          " <b></b>\xc5\x99\xc3\xad"
                                                          "d",
                                                          "\xc3\xadm", " <u></u>to", " auto", ".", "", "</p>"});
  }
}

TEST_CASE("html: identity alignments give the source's markup back on the target", "[html]") {
  CHECK(html_round_trip("<p>Hello <b>world</b> .</p><p>Second <i>para</i>graph here.</p>") ==
        "<p>Hello <b>world</b> .</p><p>Second <i>para</i> graph here.</p>");
  // A token over text in and out of an element takes the stack of its last span: the
  // element is put back empty before it (bergamot's restoreSource: "world." is one token).
  CHECK(html_round_trip("<p>Hello <b>world</b>.</p>") == "<p>Hello <b></b>world.</p>");
  CHECK(html_round_trip("<ul><li>one <a href=\"/x\" title='t'>link</a></li><li>two</li></ul>") ==
        "<ul><li>one <a href=\"/x\" title=\"t\">link</a></li><li>two</li></ul>");
  // Whitespace a token starts with goes before the tags opened in it, after those closed.
  CHECK(html_round_trip("<div><span class=\"a\">x y</span> <br> <em>z</em> &amp; &lt;w&gt;</div>") ==
        "<div><span class=\"a\">x y</span>  <br><em>z</em> &amp; &lt;w&gt;</div>");
  CHECK(html_round_trip("<table><tr><td>cell one</td><td>cell two</td></tr></table>") ==
        "<table><tr><td>cell one</td><td>cell two</td></tr></table>");
  CHECK(html_round_trip("a <!-- c --> b <?pi x?> c <script>if (a < b) x();</script> d") ==
        "a  <!-- c -->b  <?pi x?>c  <script>if (a < b) x();</script>d");
  // Empty spans inside a token go back at its start ("abc" is one token here).
  CHECK(html_round_trip("a<!-- c -->b<?pi x?>c<script>if (a < b) x();</script>de") ==
        "<!-- c --><?pi x?>abc<script>if (a < b) x();</script>de");
  CHECK(html_round_trip("<p>nbsp&nbsp;and &quot;quotes&quot;</p>") == "<p>nbsp and \"quotes\"</p>");
  CHECK(html_round_trip("<INPUT Disabled VALUE=x>ok") == "<INPUT Disabled=\"\" VALUE=\"x\">ok");
}

TEST_CASE("html: a reordered translation moves the tags with the words", "[html]") {
  const HtmlMarkup m = html_parsed("<b>Hello</b> <i>big</i> world");
  REQUIRE(m.text() == "Hello big world");
  AnnotatedText source = html_annotated(m.text(), {{{0, 5}, {5, 9}, {9, 15}, {15, 15}}});
  // "world big Hello": target t aligns with source 2 - t.
  AnnotatedText target = html_annotated("world big Hello", {{{0, 5}, {5, 9}, {9, 15}, {15, 15}}});
  const HtmlAlignments a = {
      {{0.1f, 0.1f, 0.8f, 0.0f}, {0.1f, 0.8f, 0.1f, 0.0f}, {0.8f, 0.1f, 0.1f, 0.0f}, {0.0f, 0.0f, 0.0f, 1.0f}}};
  REQUIRE(m.restore(source, target, a));
  CHECK(source.text == "<b>Hello</b> <i>big</i> world");
  CHECK(target.text == "world <i>big</i> <b>Hello</b>");
  // Every token's range covers its markup; the EOS holds the closing tag put after it.
  CHECK(html_tokens(target) == std::vector<std::string>{"", "world", " <i>big", "</i> <b>Hello", "</b>", ""});
}

TEST_CASE("html: the tokens of one word share the markup of the word's best source token", "[html]") {
  const HtmlMarkup m = html_parsed("plain <b>bold</b> text");
  AnnotatedText source = html_annotated(m.text(), {{{0, 5}, {5, 10}, {10, 15}, {15, 15}}});
  // "fe" + "tt" + " rest": "tt" continues "fe"; its stack (b) extends the word's (none),
  // so the whole word takes it, though "fe" aligned with "plain".
  AnnotatedText target = html_annotated("fett rest", {{{0, 2}, {2, 4}, {4, 9}, {9, 9}}});
  const HtmlAlignments a = {
      {{0.9f, 0.1f, 0.0f, 0.0f}, {0.0f, 0.6f, 0.4f, 0.0f}, {0.0f, 0.0f, 1.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 1.0f}}};
  REQUIRE(m.restore(source, target, a));
  CHECK(target.text == "<b>fett</b> rest");
}

TEST_CASE("html: quality scores as <font> markup, scores printed as %g", "[html]") {
  const HtmlMarkup m = html_parsed("<b>Hello</b> world");
  AnnotatedText source = html_annotated(m.text(), {{{0, 5}, {5, 11}, {11, 11}}});
  AnnotatedText target = source;
  petrel::text::QualityMarkup quality(1);
  quality[0].sentence_score = -0.5f;
  quality[0].word_tokens = {TextRange{0, 1}, TextRange{1, 2}};
  quality[0].word_scores = {0.1f, -1.5e-05f};
  REQUIRE(m.restore(source, target, html_identity(source), &quality));
  CHECK(source.text == "<b>Hello</b> world");
  const std::string sentence = "<font x-bergamot-sentence-index=\"0\" x-bergamot-sentence-score=\"-0.5\">";
  CHECK(target.text == "<b>" + sentence + "<font x-bergamot-word-index=\"0\" x-bergamot-word-score=\"0.1\">Hello" +
                           "</font></font></b> " + sentence +
                           "<font x-bergamot-word-index=\"1\" x-bergamot-word-score=\"-1.5e-05\">world</font></font>");
}

TEST_CASE("html: malformed markup is repaired as a browser would, each repair counted", "[html][malformed]") {
  struct Case {
    std::string html, text, restored;
    size_t repairs;
  };
  const Case cases[] = {
      {"a</b> b", "a b", "a b", 1},           // stray end tag: dropped
      {"<b>bold", "bold", "<b>bold</b>", 1},  // closed at the end
      {"<p><b>x</b>", "x", "<p><b>x</b></p>", 1},
      {"<b><i>x</b></i> y", "x y", "<b><i>x</i></b> y", 2},          // </b> closes <i>; </i> stray
      {"a < b, x <= y", "a < b, x <= y", "a &lt; b, x &lt;= y", 0},  // '<' that starts no tag is text
      {"a<", "a", "a", 0},                                           // bergamot drops a last '<'
      {"<!DOCTYPE html><p>xy</p>", "xy", "<!--DOCTYPE html--><p>xy</p>", 1},
      {"a</>b </ x>c", "ab c", "ab c", 2},                       // bogus end tags dropped
      {"<br / >x", "x", "<br>x", 1},                             // a stray '/'
      {"<b>x</b x=\"y>\">z", "x z", "<b>x</b> z", 1},            // an end tag's attributes
      {"<a b<c=\"d\">x</a>", "x", "<a b<c=\"d\">x</a>", 1},      // '<' in an attribute name
      {"x<a href=\"y>z", "x", "x<a></a>", 2},                    // the end inside a quoted value
      {"x<a href=y", "x", "x<a></a>", 2},                        // ... an unquoted one (bergamot hangs)
      {"<script>alert(1)", "", "<script>alert(1)</script>", 1},  // unterminated raw text
      {"ab <code>x < y", "ab ", "ab <code>x < y</code>", 1},     // unterminated copied element
      {"a<!-- b", "a", "a<!---->", 0},                           // as bergamot: put back empty
      {"<b/>x", "x", "<b></b>x", 0},                             // as bergamot
  };
  for (const Case& c : cases) {
    INFO(c.html);
    const HtmlMarkup m = html_parsed(c.html);
    CHECK(m.text() == c.text);
    CHECK(m.repairs() == c.repairs);
    CHECK(html_round_trip(c.html) == c.restored);
  }
}

TEST_CASE("html: refusals name the byte", "[html][malformed]") {
  auto nul = HtmlMarkup::parse(std::string("ab\0c", 4));
  REQUIRE_FALSE(nul);
  CHECK(nul.error().code == ErrorCode::kInvalidArgument);
  CHECK(nul.error().message == "HTML markup byte 2: a NUL byte");

  std::string deep;
  for (int i = 0; i < 600; ++i) deep += "<span>";
  auto refused = HtmlMarkup::parse(deep + "x");
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == ErrorCode::kInvalidArgument);
  CHECK(refused.error().message.find("HTML markup byte 3072: elements nested deeper than 512") == 0);
  HtmlOptions deeper;
  deeper.max_nesting = 600;
  CHECK(html_parsed(deep + "x", deeper).text() == "x");
  // Void elements and copied ones sit one above the deepest: they open nothing.
  HtmlOptions two;
  two.max_nesting = 2;
  CHECK(html_parsed("<b><i><br><img><code>c</code><!--x-->y</i></b>", two).text() == "y");
  CHECK_FALSE(HtmlMarkup::parse("<b><i><u>y</u></i></b>", two));

  HtmlOptions small;
  small.max_input_bytes = 4;
  auto big = HtmlMarkup::parse("<b>x</b>", small);
  REQUIRE_FALSE(big);
  CHECK(big.error().message == "HTML markup byte 4: input of 8 bytes is over the limit of 4");
}

TEST_CASE("html: restore refuses shapes that do not fit, and changes nothing then", "[html][malformed]") {
  const HtmlMarkup m = html_parsed("<p>one two</p><p>three</p>");
  const AnnotatedText source = html_words(m.text());
  REQUIRE(source.sentences.size() == 2);
  auto refused = [&](AnnotatedText s, AnnotatedText t, const HtmlAlignments& a,
                     const petrel::text::QualityMarkup* q = nullptr) {
    const AnnotatedText s0 = s, t0 = t;
    const auto status = m.restore(s, t, a, q);
    CHECK(s.text == s0.text);
    CHECK(t.text == t0.text);
    if (status) return std::string("accepted");
    CHECK(status.error().code == ErrorCode::kInvalidArgument);
    return status.error().message;
  };
  const HtmlAlignments identity = html_identity(source);
  CHECK(refused(source, source, {}) == "HTML restore: the source has 2 sentences, the target 2, the alignments 0");
  AnnotatedText one = source;
  one.sentences.pop_back();
  CHECK(refused(source, one, identity) == "HTML restore: the source has 2 sentences, the target 1, the alignments 2");
  HtmlAlignments short_row = identity;
  short_row[1][0].pop_back();
  CHECK(refused(source, source, short_row) ==
        "HTML restore: sentence 1 target token 0: 1 alignment scores for 2 source tokens");
  HtmlAlignments missing_row = identity;
  missing_row[0].pop_back();
  CHECK(refused(source, source, missing_row) == "HTML restore: sentence 0: 2 alignment rows for 3 target tokens");
  AnnotatedText other = source;
  other.text[0] = 'O';
  CHECK(refused(other, source, identity) ==
        "HTML restore: the source text is not the text this markup was parsed into");
  AnnotatedText backwards = source;
  std::swap(backwards.sentences[0][0], backwards.sentences[0][1]);
  CHECK(refused(source, backwards, identity).find("HTML restore: target sentence 0 token 1 begins at byte 0") == 0);
  AnnotatedText no_eos = source;
  no_eos.sentences[1].clear();
  HtmlAlignments no_eos_rows = identity;
  no_eos_rows[1].clear();
  CHECK(refused(source, no_eos, no_eos_rows) == "HTML restore: target sentence 1 has no tokens (not even EOS)");
  petrel::text::QualityMarkup quality(1);
  CHECK(refused(source, source, identity, &quality) == "HTML restore: 1 quality scores for 2 sentences");
  quality.resize(2);
  quality[1].word_tokens = {TextRange{0, 1}, TextRange{0, 2}};
  quality[1].word_scores = {0, 0};
  CHECK(refused(source, source, identity, &quality).find("HTML restore: sentence 1 word 1: tokens [0, 2) overlap") ==
        0);

  HtmlOptions tight;
  tight.max_output_bytes = 8;
  const HtmlMarkup limited = html_parsed("<p>one two</p><p>three</p>", tight);
  AnnotatedText s = source, t = source;
  const auto status = limited.restore(s, t, identity);
  REQUIRE_FALSE(status);
  CHECK(status.error().code == ErrorCode::kOutOfMemory);
}

TEST_CASE("html: every tag comes back on a translation that drops and repeats words", "[html]") {
  const std::string html = "<p>Keep <b>all</b> of <a href=\"#\">these <i>tags</i></a><img src=x> please</p>";
  const HtmlMarkup m = html_parsed(html);
  AnnotatedText source = html_words(m.text());
  REQUIRE(source.sentences.size() == 1);
  const size_t n = source.sentences[0].size();
  // Two target tokens, both aligned with the first source token.
  AnnotatedText target = html_annotated("x y", {{{0, 1}, {1, 3}, {3, 3}}});
  HtmlAlignments a = {std::vector<std::vector<float>>(3, std::vector<float>(n, 0.0f))};
  a[0][0][0] = a[0][1][0] = a[0][2][n - 1] = 1.0f;
  REQUIRE(m.restore(source, target, a));
  CHECK(source.text == "<p>Keep <b>all</b> of <a href=\"#\">these <i>tags</i></a> <img src=\"x\">please</p>");
  for (const char* tag : {"<p>", "<b>", "</b>", "<a href=\"#\">", "<i>", "</i>", "</a>", "<img src=\"x\">", "</p>"}) {
    INFO(tag);
    CHECK(target.text.find(tag) != std::string::npos);
  }
  CHECK(html_parsed(target.text).repairs() == 0);
}

TEST_CASE("html: megabyte inputs parse and restore in linear time, or fail cleanly", "[.][linear][html]") {
  SECTION("1 MB of tags nested 100,000 deep: refused at the 513th") {
    std::string deep;
    for (int i = 0; i < 100000; ++i) deep += "<span a=1>";
    deep += "x";
    auto m = HtmlMarkup::parse(deep);
    REQUIRE_FALSE(m);
    CHECK(m.error().message.find("HTML markup byte 5120: elements nested deeper than 512") == 0);
    std::string closed = deep;
    for (int i = 0; i < 100000; ++i) closed += "</b>";
    CHECK_FALSE(HtmlMarkup::parse(closed));
  }
  SECTION("a million tags, in 50,000 sentences") {
    std::string html;
    for (int i = 0; i < 80000; ++i) html += "<p><b>w</b> x<br><i></i><u>y</u><img><span>z</span><!--c--></p>";
    const HtmlMarkup m = html_parsed(html);  // 13 tags each
    CHECK(m.node_count() >= 640000);
    AnnotatedText source = html_words(m.text());
    REQUIRE(source.sentences.size() == 160000);
    AnnotatedText target = source;
    REQUIRE(m.restore(source, target, html_identity(source)));
    CHECK((target.text == source.text));
    CHECK(html_parsed(target.text).node_count() == m.node_count());
  }
  SECTION("stray and mismatched end tags, and elements left open") {
    std::string html;
    for (int i = 0; i < 500; ++i) html += "<b>";
    for (int i = 0; i < 250000; ++i) html += "</i>";
    const HtmlMarkup stray = html_parsed(html + "x");
    CHECK(stray.repairs() == 250001);
    CHECK(stray.text() == "x");
    // Each </i> closes the 500 elements opened since the last <i>: each one once.
    std::string mismatched;
    for (int i = 0; i < 2000; ++i) {
      mismatched += "<i>";
      for (int j = 0; j < 500; ++j) mismatched += "<b>";
      mismatched += "w\n\n</i>";
    }
    const HtmlMarkup closed = html_parsed(mismatched);
    CHECK(closed.repairs() == 2000);
    AnnotatedText source = html_words(closed.text());
    AnnotatedText target = source;
    REQUIRE(closed.restore(source, target, html_identity(source)));
    CHECK((target.text == source.text));
  }
  SECTION("a 1 MB attribute, comment, script and run of paragraph breaks") {
    const std::string megabyte(1 << 20, 'v');
    const std::string html =
        "<a title=\"" + megabyte + "\">x</a><!--" + megabyte + "--><script>" + megabyte + "</script>";
    const HtmlMarkup m = html_parsed(html);
    CHECK(m.text() == "x");
    CHECK((html_round_trip(html) == html));
    // 170,000 paragraphs in one gap: each "\n\n" taken out where its tag goes back.
    std::string blank;
    for (int i = 0; i < 170000; ++i) blank += "<p> </p>";
    const HtmlMarkup b = html_parsed(blank);
    CHECK(b.paragraph_breaks().size() == 169998);  // none before the second: text() is 1 byte long
    AnnotatedText source = html_annotated(b.text(), {});
    AnnotatedText target = source;
    REQUIRE(b.restore(source, target, {}));
    // One token holds it all: its whitespace (less the "\n\n"s) first, then every tag.
    std::string expected(170000, ' ');
    for (int i = 0; i < 170000; ++i) expected += "<p></p>";
    CHECK((source.text == expected));  // not expanded: Catch would print megabytes
    CHECK((target.text == expected));
  }
}
