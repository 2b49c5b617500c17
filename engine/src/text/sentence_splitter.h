// A small rule-based sentence splitter, so that a paragraph longer than a model's
// positions is translated sentence by sentence and reassembled rather than cut.
//
// A sentence ends
//  * after . ! ? … (and ‼ ⁇ ⁈ ⁉), closing quotes or brackets may follow, when whitespace
//    (Unicode White_Space, not only no-break spaces, which glue: "1.\u00a0Overview")
//    and then the start of a sentence come next: an uppercase or
//    titlecase letter (Lu, Lt), a digit (Nd), an opening quote or bracket
//    (" ' ( [ « “ ‘ „ ¿ ¡), or a letter of a script without case (Lo, Lm: CJK, Kana,
//    Hangul, Arabic, Hebrew, Indic, Thai, ...; Georgian) — never a lowercase letter;
//    a period does not end a sentence after a known abbreviation (e.g. i.e. Mr. Dr. vs.
//    z.B. d.h. usw. ...; sentence_splitter.cpp lists them) or after a single letter (initials, "U.S.");
//  * after the full-width stops of CJK text (。！？．), closing brackets may follow,
//    whatever comes next (these scripts use no space between sentences);
//  * after । ॥ (Devanagari), ؟ ۔ (Arabic, Urdu), ։ (Armenian), ። (Ethiopic), ။ (Myanmar)
//    when whitespace or the end follows.
// Decimals ("3.14"), versions ("v2.0"), file names and URLs hold no whitespace after the
// period and are never split.
#pragma once

#include <string_view>
#include <vector>

namespace petrel::text {

// Byte range [begin, end) of one sentence of a paragraph.
struct SentenceSpan {
  size_t begin = 0, end = 0;
};

// The sentences of `text`, in order, without the whitespace between them (the caller
// keeps the text between two spans as their separator). Leading and trailing
// whitespace belongs to no sentence; a text of only whitespace has no sentences.
std::vector<SentenceSpan> split_sentences(std::string_view text);

// The same, each line (up to a '\n') on its own: a line break ends a sentence too, as
// each line is a paragraph in bergamot's ssplit-mode paragraph (Firefox's setting).
std::vector<SentenceSpan> split_sentences_by_line(std::string_view text);

// Each line as one sentence, its leading and trailing whitespace left out; blank lines
// are none (bergamot's ssplit-mode sentence).
std::vector<SentenceSpan> split_lines(std::string_view text);

// The sentences of each paragraph, paragraphs ending at a blank line (a line of nothing
// but whitespace); a line break within a paragraph is a space (ssplit-mode wrapped_text).
std::vector<SentenceSpan> split_sentences_by_paragraph(std::string_view text);

}  // namespace petrel::text
