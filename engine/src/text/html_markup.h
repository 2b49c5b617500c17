// HTML markup carried through a translation, as bergamot-translator does it for Firefox's
// `{html: true}` requests (src/translator/html.{h,cpp}, xh_scanner.{h,cpp}; identical in
// v0.4.5 and on main): the tags are taken out, the text is translated, and each tag is
// put back around the target tokens that the alignments tie to the source tokens it
// wrapped.
//
// parse() reads the markup the way bergamot's scanner and HTML constructor do:
//  * Text is kept byte for byte (no whitespace folding). Only &lt; &gt; &amp; &quot;
//    &apos; and &nbsp; are decoded (&nbsp; to an ASCII space); any other entity, numeric
//    ones included, stays as written.
//  * Elements not in bergamot's inline list (p, div, li, td, br, h1, ..., anything
//    unknown) break sentences: the next text is preceded by "\n\n" unless text() is
//    shorter than 2 bytes or already ends with "\n\n". This is bergamot's own trick, kept
//    as is: the caller's sentence splitter must end a paragraph at a blank line (ssplit's
//    paragraph and wrapped-text modes do). paragraph_breaks() lists where they went.
//  * Inline elements (a, b, em, i, span, img, ...) break words: a space is put before
//    the next text when both the text so far and the next text continue a word (neither
//    side is one of "\n ,.(){}[]"). <wbr> breaks nothing.
//  * Void elements (br, img, input, hr, meta, ...) need no end tag; comments and <?...?>
//    are kept and put back where they were.
//  * The content of script, style, textarea, iframe, noembed, noscript, noframes (up to
//    the first "</name>") and of code, kbd, samp, var, dir, acronym, math (up to the
//    matching end tag, counting nested ones of the same name) is copied, not translated.
//  * Attributes are written back as ` name="value"`, the value as it was written (not
//    decoded, not escaped; a single-quoted value holding '"' comes back broken, as in
//    bergamot); a name keeps its case, end tags take the start tag's spelling.
//
// Where bergamot aborts (or hangs), Petrel repairs the markup as a browser's parser would:
//  * an end tag that matches no open element is dropped; one that matches an element
//    further down closes the elements above it too;
//  * elements still open at the end are closed there (so is an unterminated script,
//    style, ... or code, ...: its content runs to the end of the input);
//  * '<' not followed by a letter, '/', '!' or '?' is text ("a < b", "x <= y");
//    '</' not followed by a letter, "!--" or '?' starts a bogus end tag dropped up to the
//    next '>'; '<!' not followed by "--" is a bogus comment up to the next '>', kept as
//    the comment <!--...--> (a browser does the same; bergamot would open an element
//    named "!DOCTYPE");
//  * a stray '/' inside a tag is ignored, '<' inside an attribute name belongs to the
//    name, anything between an end tag's name and its '>' is ignored;
//  * the end of the input inside a tag (even inside a quoted or unquoted attribute
//    value) ends the input there: the unfinished attribute is dropped.
// Each repair counts in repairs(). Where bergamot quietly does something odd without
// aborting, Petrel does the same (a lone '<' at the very end is dropped; an unterminated
// comment swallows the rest of the input and is put back empty; `<b/>` is `<b></b>`).
//
// Refused with kInvalidArgument naming the byte offset: a NUL byte (bergamot's scanner
// stops there and silently drops the rest), input over HtmlOptions::max_input_bytes, and
// elements nested deeper than HtmlOptions::max_nesting (browsers cap their trees too; a
// tag stack is copied per span of text in bergamot, so depth costs memory per span).
//
// Work and memory: parse() is one pass with explicit stacks, no recursion; a tag stack is
// a node of a tree of stacks (parent + tag), so a span of text costs O(1) however deep it
// sits. restore() is linear in the texts, tokens, spans and what it writes; what it
// writes is bounded by HtmlOptions::max_output_bytes (kOutOfMemory past it: an alignment
// that jumps between deep stacks at every token makes each token reopen them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "petrel/status.h"
#include "petrel/types.h"
#include "text/quality_estimator.h"

namespace petrel::text {

namespace html_detail {
class HtmlParser;
}

struct HtmlOptions {
  static constexpr size_t kMaxInputBytes = size_t{64} << 20;
  static constexpr size_t kMaxNesting = 512;  // Blink's HTML parser caps its tree at 512 too
  static constexpr size_t kMaxOutputBytes = size_t{256} << 20;

  size_t max_input_bytes = kMaxInputBytes;
  size_t max_nesting = kMaxNesting;  // elements open at once; void elements, comments sit one above
  // Bytes restore() may write into the source and target texts together; 0: 32 times the
  // markup, source and target texts together plus 1 MiB, at most kMaxOutputBytes.
  size_t max_output_bytes = 0;
};

// Quality markup (bergamot's annotateTagStack), one WordQuality per sentence of the target:
// each token of sentence s (EOS included) is wrapped in
//   <font x-bergamot-sentence-index="s" x-bergamot-sentence-score="S">
// and each token of word w (word_tokens[w], bergamot's mapWords) in
//   <font x-bergamot-word-index="w" x-bergamot-word-score="W">
// inside it; scores printed as C++ streams print a float (printf "%g", '.' as the radix).
// WordQuality::words (byte ranges) is not read.
using QualityMarkup = std::vector<WordQuality>;

enum class HtmlNodeKind : uint8_t {
  kElement,                // <b>...</b>; also script, code, ...: content kept as data
  kVoidElement,            // <img>, <br>
  kComment,                // <!--...-->
  kProcessingInstruction,  // <?...?>
  kParagraphBreak,         // a "\n\n" put into text(); taken out again by restore()
};

class HtmlMarkup {
 public:
  static Result<HtmlMarkup> parse(std::string_view html, const HtmlOptions& options = {});

  // The text to translate: bergamot's, "\n\n" paragraph breaks and word-break spaces in.
  const std::string& text() const { return text_; }
  // Where each "\n\n" paragraph break starts in text(), in order.
  const std::vector<size_t>& paragraph_breaks() const { return paragraph_breaks_; }
  // Malformed constructs repaired (0 for markup bergamot accepts).
  size_t repairs() const { return repairs_; }

  // The tags, comments, ... read, in document order (paragraph breaks included).
  size_t node_count() const { return tags_.size(); }
  HtmlNodeKind node_kind(size_t i) const { return tags_[i].kind; }
  std::string_view node_name(size_t i) const { return piece(tags_[i].name); }

  // Puts the markup back (bergamot's HTML::restore). `source` must hold text() split
  // into sentences and tokens, `target` its translation, sentence for sentence, with the
  // text between target sentences (bergamot copies the source's: its FAITHFUL concat).
  // soft_alignments[s][t][j]: sentence s, target token t, source token j, EOS included
  // on both sides. Each sentence must end with its EOS token. A token spans from its
  // begin to the next token's begin (bergamot's tokens are contiguous), the last to
  // its end. On success both texts hold the markup, every token's range grown over the
  // tags put into it (an EOS may hold closing tags then); on error neither is changed.
  // kInvalidArgument: shapes that do not fit; kOutOfMemory: past max_output_bytes.
  Status restore(AnnotatedText& source, AnnotatedText& target,
                 const std::vector<std::vector<std::vector<float>>>& soft_alignments,
                 const QualityMarkup* quality = nullptr) const;

  struct Piece {  // bytes of pool_
    uint32_t begin = 0, size = 0;
  };
  struct Tag {
    HtmlNodeKind kind = HtmlNodeKind::kElement;
    Piece name, attributes, data;  // attributes as written back: ` name="value"` each
  };
  struct Node {  // a tag stack: its top tag on the stack `parent`
    uint32_t parent = 0, tag = 0, depth = 0;
    uint32_t subtree_end = 0;  // nodes [this, subtree_end) are this stack and its extensions
  };
  struct Span {  // bytes [begin, end) of text() under the tag stack `node`
    uint32_t begin = 0, end = 0, node = 0;
  };

 private:
  friend class html_detail::HtmlParser;
  std::string_view piece(Piece p) const { return std::string_view(pool_).substr(p.begin, p.size); }

  std::string text_;
  std::vector<size_t> paragraph_breaks_;
  std::string pool_;         // tag names, attributes, data
  std::vector<Tag> tags_;    // every tag, once
  std::vector<Node> nodes_;  // node 0: the empty stack; parents come before children
  std::vector<Span> spans_;  // bergamot's spans_: first and last empty, under node 0
  size_t html_bytes_ = 0;
  size_t repairs_ = 0;
  HtmlOptions options_;
};

}  // namespace petrel::text
