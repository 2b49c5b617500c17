#include "format/model_file.h"

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <limits>
#include <tuple>

#include "core/bytes.h"
#include "core/checked.h"
#include "core/utf8.h"
#include "format/format_version.h"
#include "format/string_table_access.h"
#include "petrel_generated.h"

namespace petrel::detail {
namespace {

// Upper bounds that keep every later size computation far from overflow and every
// arena a hostile file could ask for within reason.
// d_model and ffn_dim bound every matrix's inner dimension k: int8 dot products over
// k <= 2^16 stay within int32 (|255 x 128 x 2^16| < 2^31) whatever the weights.
constexpr uint32_t kMaxDModel = 1u << 16;
constexpr uint32_t kMaxFfn = 1u << 16;
constexpr uint32_t kMaxVocab = 1u << 24;
constexpr uint32_t kMaxPositions = 1u << 20;
constexpr uint32_t kMaxLayers = 1024;
constexpr size_t kMaxRank = 4;

// "field is not valid UTF-8 (byte 0xff at offset 3)", or empty when it is.
std::string utf8_problem(std::string_view text, const std::string& field) {
  const size_t at = utf8_invalid_at(text);
  if (at == text.size()) return "";
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned>(static_cast<uint8_t>(text[at])));
  return field + " is not valid UTF-8 (byte " + byte + " at offset " + std::to_string(at) + ")";
}

// Every string the engine hands out (ModelInfo, decoded text, hence the tools' JSON)
// is UTF-8: checked once here, so no consumer has to. Tensor names are checked with
// the tensor table, before any message quotes them; the tokenizer's pieces and
// vocabularies where they are bound.
template <class Fail>
Status check_text_fields(const ModelInfo& info, Fail fail) {
  std::string problem = utf8_problem(info.producer, "producer");
  if (problem.empty()) problem = utf8_problem(info.model_type, "model_type");
  if (problem.empty()) problem = utf8_problem(info.source, "source");
  for (size_t i = 0; i < info.folds.size() && problem.empty(); ++i) {
    const FoldInfo& f = info.folds[i];
    const std::string field = "folds[" + std::to_string(i) + "]";
    problem = utf8_problem(f.what, field + ".what");
    if (problem.empty()) problem = utf8_problem(f.note, field + ".note");
    for (size_t t = 0; t < f.targets.size() && problem.empty(); ++t)
      problem = utf8_problem(f.targets[t], field + ".targets[" + std::to_string(t) + "]");
  }
  if (problem.empty()) problem = utf8_problem(info.shortlist.source, "shortlist.source");
  if (!problem.empty()) return fail(problem);
  return Status::ok();
}

template <class Enum>
bool enum_in_range(Enum value) {
  auto raw = static_cast<int>(value);
  return raw >= 0 && raw <= static_cast<int>(Enum::MAX);
}

// Every id in range, offsets non-decreasing and within `candidates`, EOS always
// allowed: after this, building a sentence's shortlist needs no checks.
template <class Fail>
Status bind_shortlist(const fb::Shortlist& list, ModelInfo& info, Shortlist* out, Fail fail) {
  const uint32_t vocab = info.vocab_size, targets = info.target_vocab_size;  // source ids index offsets
  if (!list.always() || !list.offsets() || (list.candidates() == nullptr) == (list.candidates16() == nullptr))
    return fail("shortlist: 'always', 'offsets' and one of 'candidates' and 'candidates16' are required");
  if (list.offsets()->size() != uint64_t{vocab} + 1)
    return fail("shortlist.offsets holds " + std::to_string(list.offsets()->size()) + " entries, expected vocab_size + 1 = " +
                std::to_string(uint64_t{vocab} + 1));
  auto ids_in_range = [&](const auto& ids, const char* field) -> Status {
    for (uint32_t i = 0; i < ids.size(); ++i)
      if (ids[i] < 0 || static_cast<uint32_t>(ids[i]) >= targets)
        return fail(std::string("shortlist.") + field + "[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                    " is not a target token id (target vocabulary of " + std::to_string(targets) + ")");
    return Status::ok();
  };
  Status s = ids_in_range(*list.always(), "always");
  if (s) s = list.candidates() ? ids_in_range(*list.candidates(), "candidates")
                                : ids_in_range(*list.candidates16(), "candidates16");
  if (!s) return s;
  const size_t candidates = list.candidates() ? list.candidates()->size() : list.candidates16()->size();
  const auto& offsets = *list.offsets();
  if (offsets[0] != 0) return fail("shortlist.offsets[0] must be 0");
  for (uint32_t i = 1; i <= vocab; ++i)
    if (offsets[i] < offsets[i - 1])
      return fail("shortlist.offsets[" + std::to_string(i) + "] decreases");
  if (offsets[vocab] != candidates)
    return fail("shortlist.offsets[vocab_size] = " + std::to_string(offsets[vocab]) + " does not match the " +
                std::to_string(candidates) + " candidates");
  bool has_eos = false;
  for (int32_t id : *list.always()) has_eos |= id == info.eos_id;
  if (!has_eos) return fail("shortlist.always must contain eos_id " + std::to_string(info.eos_id));
  if (list.pad_to_multiple() > 64) return fail("shortlist.pad_to_multiple must be at most 64");
  *out = {list.always()->data(), list.always()->size(), offsets.data(),
          list.candidates() ? list.candidates()->data() : nullptr,
          list.candidates16() ? list.candidates16()->data() : nullptr, list.first(), list.pad_to_multiple()};
  info.shortlist = {true, list.first(), list.best(), list.always()->size(), candidates,
                    list.source() ? list.source()->str() : "", list.by_default()};
  return Status::ok();
}

using Strings = flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>;
using Spans = flatbuffers::Vector<const fb::StringSpan*>;

// A tokenizer's `strings` (format 1.6): one blob of UTF-8 that its tables are spans of.
struct StringBlob {
  std::string_view bytes;
  bool present = false;
  bool utf8_checked = true;  // false: the tokenizer checks what it outputs instead
};

// The blob, its UTF-8 checked once unless the tokenizer checks its output itself (a
// tokenizer.json tokenizer: checking Gemma's 262,144 tokens would cost most of its
// load time) (absent: not present).
template <class Fail>
Result<StringBlob> bind_string_blob(const fb::Tokenizer& tok, bool check_utf8, Fail fail) {
  StringBlob blob;
  if (const auto* strings = tok.strings()) {
    blob.bytes = {reinterpret_cast<const char*>(strings->data()), strings->size()};
    blob.present = true;
    blob.utf8_checked = check_utf8;
    if (!check_utf8) return blob;
    const std::string problem = utf8_problem(blob.bytes, "tokenizer.strings");
    if (!problem.empty()) return fail(problem);
  }
  return blob;
}

// A table of strings stored either way, viewed in place: a [string] `field` (each
// string's UTF-8 checked; the Verifier has checked each lies in the buffer), or spans
// of the blob `spans_field` (format 1.6: each span inside the blob, starting and ending
// at a character, so its bytes are UTF-8 as the blob's are). Exactly one must be given.
// No string may be longer than max_bytes. Spans may share bytes (the converter stores
// each distinct string once), but a table's strings may not hold more than twice the
// blob's bytes (plus 64 KiB): only repeated strings add to the blob's bytes, and no real
// vocabulary repeats half its text, while overlapping spans of a few kilobytes each
// would otherwise let 8 bytes of file stand for 4 KiB of pieces to hash or build a
// trie of (a 10 MB file asked for 2.9 GB).
template <class Fail>
Result<StringTable> bind_strings(const Strings* strings, const Spans* spans, const StringBlob& blob,
                                 const std::string& field, const std::string& spans_field, size_t max_bytes,
                                 Fail fail) {
  if ((strings == nullptr) == (spans == nullptr))
    return fail(field + ": " + (strings ? "given both as strings and as " : "missing (neither it nor ") + spans_field +
                (strings ? "" : ")"));
  auto too_long = [&](const std::string& where, size_t bytes) {
    return fail(where + ": " + std::to_string(bytes) + " bytes, more than the " + std::to_string(max_bytes) +
                " a string of it may have");
  };
  if (strings != nullptr) {
    for (uint32_t i = 0; i < strings->size(); ++i) {
      const std::string_view text = strings->Get(i)->string_view();
      if (text.size() > max_bytes) return too_long(field + "[" + std::to_string(i) + "]", text.size());
      if (!is_valid_utf8(text)) return fail(utf8_problem(text, field + "[" + std::to_string(i) + "]"));
    }
    return StringTableAccess::view(strings->Data(), strings->size());
  }
  if (!blob.present) return fail(spans_field + ": given without tokenizer.strings");
  const auto* bytes = reinterpret_cast<const unsigned char*>(blob.bytes.data());
  const uint64_t size = blob.bytes.size();
  auto inside_character = [&](uint64_t at) { return at < size && (bytes[at] & 0xc0) == 0x80; };
  // Raw little-endian pairs (a StringSpan), read without the accessors' per-field work.
  const auto* raw = reinterpret_cast<const unsigned char*>(spans->Data());
  const uint64_t longest = std::min<uint64_t>(max_bytes, size);
  const uint32_t count = spans->size();
  uint64_t total = 0;  // at most 2^32 spans of 2^32 bytes: no overflow
  for (uint32_t i = 0; i < count; ++i) {
    const uint64_t begin = load_le32(raw + 8 * size_t{i}), length = load_le32(raw + 8 * size_t{i} + 4);
    const uint64_t end = begin + length;
    total += length;
    // One branch for the usual span: inside, not too long, its first byte and the byte
    // after it (when in the blob) no continuation bytes.
    if ((end <= size) & (length <= longest) &&
        (length == 0 || !blob.utf8_checked ||
         (((bytes[begin] & 0xc0) != 0x80) & (end == size || (bytes[end] & 0xc0) != 0x80))))
      continue;
    const std::string where = spans_field + "[" + std::to_string(i) + "]";
    const std::string range = "bytes [" + std::to_string(begin) + ", " + std::to_string(end) + ")";
    if (end > size) return fail(where + ": " + range + " run past the " + std::to_string(size) + " bytes of tokenizer.strings");
    if (length > max_bytes) return too_long(where, length);
    return fail(where + ": " + range + " of tokenizer.strings " + (inside_character(begin) ? "start" : "end") +
                " inside a UTF-8 character");
  }
  if (total > 2 * size + 65536)
    return fail(spans_field + ": its strings hold " + std::to_string(total) + " bytes, more than twice the " +
                std::to_string(size) + " bytes of tokenizer.strings (spans overlapping to multiply the text)");
  return StringTableAccess::view_spans(blob.bytes.data(), spans->Data(), spans->size());
}

// A stored piece trie (nodes and labels, both or neither), viewed in place: the
// Verifier has checked the vectors lie in the buffer, aligned to their elements; its
// structure is checked against the pieces when the tokenizer is built
// (text::PieceTrie::adopt). Neither: an empty trie (built at load).
template <class Fail>
Result<StoredPieceTrie> bind_stored_trie(const flatbuffers::Vector<const fb::PieceTrieNode*>* nodes,
                                         const flatbuffers::Vector<uint8_t>* labels, const std::string& nodes_field,
                                         const std::string& labels_field, Fail fail) {
  static_assert(sizeof(fb::PieceTrieNode) == sizeof(PieceTrieNode) && alignof(fb::PieceTrieNode) == alignof(PieceTrieNode),
                "a stored trie node is viewed as PieceTrieNode");
  if ((nodes == nullptr) != (labels == nullptr)) return fail(nodes_field + " and " + labels_field + ": one without the other");
  StoredPieceTrie trie;
  if (nodes == nullptr) return trie;
  if (labels->size() != nodes->size())
    return fail(labels_field + ": " + std::to_string(labels->size()) + " labels for " + std::to_string(nodes->size()) +
                " " + nodes_field.substr(nodes_field.rfind('.') + 1));
  if (nodes->size() == 0) return fail(nodes_field + ": empty");
  trie.nodes = reinterpret_cast<const PieceTrieNode*>(nodes->data());
  trie.labels = labels->data();
  trie.size = nodes->size();
  return trie;
}

// A SentencePiece model's fields as a spec viewing into the file: sizes agree, the
// vocabulary ids are in range. (Its deeper structure — piece types, the charsmap's
// trie — SentencePiece::create checks when the tokenizer is built.)
template <class Fail>
Result<SentencePieceSpec> bind_sentencepiece(const fb::SentencePieceModel* spm, const char* role,
                                                   uint32_t vocab, const StringBlob& blob, Fail fail) {
  const std::string r = std::string("tokenizer.") + role;
  if (spm == nullptr) return fail(r + ": missing");
  // Pieces reach callers (tokenize, output_tokens, streamed pieces) and decoded text.
  auto pieces = bind_strings(spm->pieces(), spm->piece_spans(), blob, r + ".pieces", r + ".piece_spans", kMaxPieceBytes, fail);
  if (!pieces) return pieces.error();
  const size_t n = pieces.value().size();
  if (spm->scores()->size() != n || spm->types()->size() != n)
    return fail(r + ": " + std::to_string(n) + " pieces but " + std::to_string(spm->scores()->size()) + " scores and " +
                std::to_string(spm->types()->size()) + " types");
  if (spm->algorithm() != fb::SentencePieceAlgorithm::Unigram && spm->algorithm() != fb::SentencePieceAlgorithm::Bpe)
    return fail(r + ".algorithm: unknown value " + std::to_string(static_cast<int>(spm->algorithm())));
  std::string problem;
  if (spm->unk_surface()) problem = utf8_problem(spm->unk_surface()->string_view(), r + ".unk_surface");
  if (problem.empty() && spm->normalizer()) problem = utf8_problem(spm->normalizer()->string_view(), r + ".normalizer");
  if (!problem.empty()) return fail(problem);
  SentencePieceSpec spec;
  spec.algorithm = static_cast<SpmAlgorithm>(spm->algorithm());
  spec.pieces = std::move(pieces.value());
  // Viewed in place (little-endian floats, aligned by the Verifier, and bytes as the
  // host holds them; the types' values are checked by SentencePiece::create).
  spec.stored_scores = spm->scores()->data();
  spec.stored_types = reinterpret_cast<const PieceType*>(spm->types()->data());
  if (const auto* map = spm->precompiled_charsmap())
    spec.precompiled_charsmap = {reinterpret_cast<const char*>(map->data()), map->size()};
  spec.add_dummy_prefix = spm->add_dummy_prefix();
  spec.remove_extra_whitespaces = spm->remove_extra_whitespaces();
  spec.escape_whitespaces = spm->escape_whitespaces();
  spec.treat_whitespace_as_suffix = spm->treat_whitespace_as_suffix();
  spec.byte_fallback = spm->byte_fallback();
  if (spm->unk_surface()) spec.unk_surface = {spm->unk_surface()->c_str(), spm->unk_surface()->size()};
  auto trie = bind_stored_trie(spm->trie_nodes(), spm->trie_labels(), r + ".trie_nodes", r + ".trie_labels", fail);
  if (!trie) return trie.error();
  spec.trie = trie.value();
  if (vocab != 0) {
    if (spm->vocab_ids() == nullptr || spm->vocab_ids()->size() != n)
      return fail(r + ".vocab_ids: expected one per piece (" + std::to_string(n) + ")");
    for (uint32_t i = 0; i < n; ++i) {
      const int32_t id = spm->vocab_ids()->Get(i);
      if (id < -1 || (id >= 0 && static_cast<uint32_t>(id) >= vocab))
        return fail(r + ".vocab_ids[" + std::to_string(i) + "] = " + std::to_string(id) +
                    " is not a vocabulary id (vocab_size " + std::to_string(vocab) + ")");
    }
  }
  return spec;
}

// What every tokenizer kind shares, bound once: the strings blob and the (source)
// vocabulary (vocab_size tokens, UTF-8) when the file has one.
struct TokenizerStrings {
  StringBlob blob;
  StringTable vocab;
  bool has_vocab = false;
};

template <class Fail>
Result<TokenizerStrings> bind_tokenizer_strings(const fb::Tokenizer& tok, uint32_t vocab_size, Fail fail) {
  TokenizerStrings out;
  auto blob = bind_string_blob(tok, tok.kind() != fb::TokenizerKind::HuggingFace, fail);
  if (!blob) return blob.error();
  out.blob = blob.value();
  out.has_vocab = tok.vocab() != nullptr || tok.vocab_spans() != nullptr;
  if (!out.has_vocab) return out;
  auto vocab = bind_strings(tok.vocab(), tok.vocab_spans(), out.blob, "tokenizer.vocab", "tokenizer.vocab_spans",
                            SIZE_MAX, fail);
  if (!vocab) return vocab.error();
  if (vocab.value().size() != vocab_size)
    return fail("tokenizer.vocab holds " + std::to_string(vocab.value().size()) + " tokens, expected vocab_size " +
                std::to_string(vocab_size));
  out.vocab = std::move(vocab.value());
  return out;
}

// A tokenizer's separate target vocabulary (target_vocab_size tokens, UTF-8), or an
// empty table when the source vocabulary serves both (then their sizes must agree).
template <class Fail>
Result<StringTable> bind_target_vocab(const fb::Tokenizer& tok, const ModelInfo& info, const StringBlob& blob,
                                      Fail fail) {
  if (tok.target_vocab() == nullptr && tok.target_vocab_spans() == nullptr) {
    if (info.target_vocab_size != info.vocab_size)
      return fail("tokenizer.target_vocab: missing, and the target vocabulary differs from the source's");
    return StringTable{};
  }
  auto target = bind_strings(tok.target_vocab(), tok.target_vocab_spans(), blob, "tokenizer.target_vocab",
                             "tokenizer.target_vocab_spans", SIZE_MAX, fail);
  if (!target) return target.error();
  if (target.value().size() != info.target_vocab_size)
    return fail("tokenizer.target_vocab holds " + std::to_string(target.value().size()) +
                " tokens, expected target_vocab_size " + std::to_string(info.target_vocab_size));
  return target;
}

template <class Fail>
Result<MarianTokenizerTables> bind_marian_tokenizer(const fb::Tokenizer& tok, const ModelInfo& info,
                                                    const TokenizerStrings& strings, Fail fail) {
  MarianTokenizerTables parts;
  if (!strings.has_vocab) return fail("tokenizer.vocab: a Marian tokenizer needs the vocabulary");
  parts.vocab = strings.vocab;
  auto target_vocab = bind_target_vocab(tok, info, strings.blob, fail);
  if (!target_vocab) return target_vocab.error();
  parts.target_vocab = std::move(target_vocab.value());
  auto source = bind_sentencepiece(tok.source(), "source", info.vocab_size, strings.blob, fail);
  if (!source) return source.error();
  auto target = bind_sentencepiece(tok.target(), "target", 0, strings.blob, fail);
  if (!target) return target.error();
  parts.source = std::move(source.value());
  parts.target = std::move(target.value());
  parts.source_vocab_ids = tok.source()->vocab_ids()->data();
  for (auto [id, field, dst] : {std::tuple{tok.eos_id(), "eos_id", &parts.eos_id},
                                std::tuple{tok.unk_id(), "unk_id", &parts.unk_id},
                                std::tuple{tok.pad_id(), "pad_id", &parts.pad_id}}) {
    if (id < 0 || static_cast<uint32_t>(id) >= info.vocab_size)
      return fail(std::string("tokenizer.") + field + " = " + std::to_string(id) + " is not a source token id");
    *dst = id;
  }
  parts.clean_up_spaces = tok.clean_up_spaces();
  return parts;
}

// Marian C++ models: each SentencePiece model's ids are the model's ids, so the source
// model has vocab_size pieces and the target model target_vocab_size.
template <class Fail>
Result<SentencePieceIdsTables> bind_spm_ids_tokenizer(const fb::Tokenizer& tok, const ModelInfo& info,
                                                      const TokenizerStrings& strings, Fail fail) {
  SentencePieceIdsTables parts;
  auto source = bind_sentencepiece(tok.source(), "source", 0, strings.blob, fail);
  if (!source) return source.error();
  auto target = bind_sentencepiece(tok.target(), "target", 0, strings.blob, fail);
  if (!target) return target.error();
  if (source.value().pieces.size() != info.vocab_size)
    return fail("tokenizer.source holds " + std::to_string(source.value().pieces.size()) +
                " pieces, expected vocab_size " + std::to_string(info.vocab_size) + " (its ids are the model's)");
  if (target.value().pieces.size() != info.target_vocab_size)
    return fail("tokenizer.target holds " + std::to_string(target.value().pieces.size()) +
                " pieces, expected target_vocab_size " + std::to_string(info.target_vocab_size));
  if (strings.has_vocab || tok.target_vocab() != nullptr || tok.target_vocab_spans() != nullptr)
    return fail("tokenizer.vocab: a SentencePieceIds tokenizer has none (the pieces are the vocabulary)");
  parts.source = std::move(source.value());
  parts.target = std::move(target.value());
  const uint32_t smaller = std::min(info.vocab_size, info.target_vocab_size);
  for (auto [id, field, dst] : {std::tuple{tok.eos_id(), "eos_id", &parts.eos_id},
                                std::tuple{tok.unk_id(), "unk_id", &parts.unk_id}}) {
    if (id < 0 || static_cast<uint32_t>(id) >= smaller)
      return fail(std::string("tokenizer.") + field + " = " + std::to_string(id) +
                  " is not a source and target token id");
    *dst = id;
  }
  return parts;
}

// What ModelInfo tells of a bound SentencePiece model.
void describe_sentencepiece(const fb::SentencePieceModel& spm, const SentencePieceSpec& bound, SentencePieceInfo& out) {
  out.algorithm = spm.algorithm() == fb::SentencePieceAlgorithm::Bpe ? "bpe" : "unigram";
  out.pieces = static_cast<uint32_t>(bound.pieces.size());
  out.normalizer = spm.normalizer() ? spm.normalizer()->str() : "";
  out.byte_fallback = spm.byte_fallback();
  out.stored_trie_nodes = spm.trie_nodes() ? spm.trie_nodes()->size() : 0;
}

// Every id in range (vocab_size ids; the Fairseq families have one vocabulary), each
// language code the text of its token, the enums known.
template <class Fail>
Result<FairseqTokenizerTables> bind_fairseq_parts(const fb::Tokenizer& tok, uint32_t vocab_size,
                                                  const TokenizerStrings& strings, Fail fail) {
  using Parts = FairseqTokenizerTables;
  Parts parts;
  if (!strings.has_vocab)
    return fail("tokenizer.vocab: a Fairseq tokenizer needs every one of the " + std::to_string(vocab_size) +
                " tokens");
  auto source = bind_sentencepiece(tok.source(), "source", vocab_size, strings.blob, fail);
  if (!source) return source.error();
  parts.spm = std::move(source.value());
  parts.spm_vocab_ids = tok.source()->vocab_ids()->data();
  parts.vocab = strings.vocab;
  std::string problem;
  auto id_ok = [&](int32_t id) { return id >= 0 && static_cast<uint32_t>(id) < vocab_size; };
  auto bad_id = [&](const std::string& field, int32_t id) {
    return fail("tokenizer." + field + " = " + std::to_string(id) + " is not a token id (vocab_size " +
                std::to_string(vocab_size) + ")");
  };
  for (auto [id, field, dst] : {std::tuple{tok.eos_id(), "eos_id", &parts.eos_id},
                                std::tuple{tok.unk_id(), "unk_id", &parts.unk_id},
                                std::tuple{tok.pad_id(), "pad_id", &parts.pad_id}}) {
    if (!id_ok(id)) return bad_id(field, id);
    *dst = id;
  }
  if (tok.mask_id() != -1 && !id_ok(tok.mask_id())) return bad_id("mask_id", tok.mask_id());
  parts.mask_id = tok.mask_id();
  if (tok.special_ids() == nullptr) return fail("tokenizer.special_ids: missing");
  for (uint32_t i = 0; i < tok.special_ids()->size(); ++i) {
    const int32_t id = tok.special_ids()->Get(i);
    if (!id_ok(id)) return bad_id("special_ids[" + std::to_string(i) + "]", id);
    parts.special_ids.push_back(id);
  }
  if (tok.languages() == nullptr || tok.languages()->size() == 0) return fail("tokenizer.languages: missing");
  for (uint32_t i = 0; i < tok.languages()->size(); ++i) {
    const fb::Language* l = tok.languages()->Get(i);
    const std::string field = "languages[" + std::to_string(i) + "]";
    if (!id_ok(l->id())) return bad_id(field + ".id", l->id());
    const std::string_view code = l->code()->string_view();
    if (code != parts.vocab[static_cast<size_t>(l->id())])
      return fail("tokenizer." + field + ".code is not the text of token " + std::to_string(l->id()));
    parts.languages.emplace_back(code, l->id());
  }
  if (!enum_in_range(tok.language_placement())) return fail("tokenizer.language_placement: unknown value");
  if (!enum_in_range(tok.piece_decoding())) return fail("tokenizer.piece_decoding: unknown value");
  parts.placement = tok.language_placement() == fb::LanguagePlacement::Last ? LanguagePlacement::kLast
                                                                             : LanguagePlacement::kFirst;
  parts.piece_decoding = tok.piece_decoding() == fb::PieceDecoding::JoinPieces ? PieceDecoding::kJoinPieces
                                                                               : PieceDecoding::kSentencePiece;
  parts.clean_up_spaces = tok.clean_up_spaces();
  const std::string_view family = tok.family() ? tok.family()->string_view() : "";
  if (family != "nllb" && family != "m2m100" && family != "mbart50")
    return fail("tokenizer.family: '" + detail::to_valid_utf8(family) + "' is not nllb, m2m100 or mbart50");
  parts.family = family;
  if (tok.default_source_language()) {
    problem = utf8_problem(tok.default_source_language()->string_view(), "tokenizer.default_source_language");
    if (!problem.empty()) return fail(problem);
    parts.default_source_language = tok.default_source_language()->string_view();
  }
  return parts;
}

// A tokenizer.json tokenizer: every id below vocab_size, every string UTF-8 and
// bounded, the enums known, the hash tables' shapes sound (their slots and the merges'
// ids are checked where the tokenizer reads them: a lookup is O(1), a load scan of
// 500k merges would not be).
template <class Fail>
Result<HfTokenizerTables> bind_hf_parts(const fb::Tokenizer& tok, uint32_t vocab_size, const TokenizerStrings& strings,
                                        Fail fail) {
  HfTokenizerTables t;
  const fb::HfTokenizer* hf = tok.hf();
  if (hf == nullptr) return fail("tokenizer.hf: missing (kind HuggingFace)");
  if (!strings.has_vocab) return fail("tokenizer.vocab: a HuggingFace tokenizer needs every token");
  if (hf->model() != fb::HfModelKind::Bpe && hf->model() != fb::HfModelKind::Unigram &&
      hf->model() != fb::HfModelKind::WordPiece)
    return fail("tokenizer.hf.model: unknown value");
  t.vocab = strings.vocab;
  t.model = static_cast<HfModelKind>(hf->model());
  auto id_ok = [&](int32_t id) { return id >= 0 && static_cast<uint32_t>(id) < vocab_size; };
  auto text = [&](const flatbuffers::String* s, const std::string& field, std::string_view& out) -> Status {
    if (s == nullptr) return Status::ok();
    if (s->size() > kMaxPieceBytes)
      return fail(field + ": " + std::to_string(s->size()) + " bytes, more than " + std::to_string(kMaxPieceBytes));
    const std::string problem = utf8_problem(s->string_view(), field);
    if (!problem.empty()) return fail(problem);
    out = s->string_view();
    return Status::ok();
  };
  constexpr uint32_t kMaxSteps = 64;
  auto count_ok = [&](const auto* v, const char* field) -> Status {
    if (v != nullptr && v->size() > kMaxSteps)
      return fail(std::string("tokenizer.hf.") + field + ": more than " + std::to_string(kMaxSteps) + " entries");
    return Status::ok();
  };
  Status s = count_ok(hf->normalizers(), "normalizers");
  if (s) s = count_ok(hf->pre_tokenizers(), "pre_tokenizers");
  if (s) s = count_ok(hf->decoders(), "decoders");
  if (s) s = count_ok(hf->prefix_ids(), "prefix_ids");
  if (s) s = count_ok(hf->suffix_ids(), "suffix_ids");
  if (!s) return s.error();
  if (hf->normalizers()) {
    for (uint32_t i = 0; i < hf->normalizers()->size(); ++i) {
      const fb::HfNormalizer* n = hf->normalizers()->Get(i);
      const std::string field = "tokenizer.hf.normalizers[" + std::to_string(i) + "]";
      if (!enum_in_range(n->kind()) || n->kind() == static_cast<fb::HfNormalizerKind>(0))
        return fail(field + ".kind: unknown value");
      HfNormalizerStep step;
      step.kind = static_cast<HfNormalizerKind>(n->kind());
      step.pattern_is_regex = n->pattern_is_regex();
      step.strip_left = n->strip_left();
      step.strip_right = n->strip_right();
      if (!enum_in_range(n->strip_accents())) return fail(field + ".strip_accents: unknown value");
      step.clean_text = n->clean_text();
      step.handle_chinese_chars = n->handle_chinese_chars();
      step.lowercase = n->lowercase();
      // transformers.js: null strips with lowercase, else only when true.
      step.strip_accents = n->strip_accents() == fb::HfStripAccents::Yes ||
                           (n->strip_accents() == fb::HfStripAccents::FollowLowercase && step.lowercase);
      if (s) s = text(n->pattern(), field + ".pattern", step.pattern);
      if (s) s = text(n->content(), field + ".content", step.content);
      if (!s) return s.error();
      if (n->precompiled_charsmap() != nullptr) {  // its rules are checked where they are read (text/spm_normalizer.h)
        step.precompiled_charsmap = std::string_view(reinterpret_cast<const char*>(n->precompiled_charsmap()->data()),
                                                     n->precompiled_charsmap()->size());
      }
      if (step.kind == HfNormalizerKind::kPrecompiled && step.precompiled_charsmap.empty())
        return fail(field + ".precompiled_charsmap: missing or empty");
      if (step.kind == HfNormalizerKind::kReplace && step.pattern.empty()) return fail(field + ".pattern: empty");
      t.normalizers.push_back(step);
    }
  }
  if (hf->pre_tokenizers()) {
    for (uint32_t i = 0; i < hf->pre_tokenizers()->size(); ++i) {
      const fb::HfPreTokenizer* p = hf->pre_tokenizers()->Get(i);
      const std::string field = "tokenizer.hf.pre_tokenizers[" + std::to_string(i) + "]";
      if (!enum_in_range(p->kind()) || p->kind() == static_cast<fb::HfPreTokenizerKind>(0))
        return fail(field + ".kind: unknown value");
      if (!enum_in_range(p->behavior())) return fail(field + ".behavior: unknown value");
      if (!enum_in_range(p->prepend_scheme())) return fail(field + ".prepend_scheme: unknown value");
      HfPreTokenizerStep step;
      step.kind = static_cast<HfPreTokenizerKind>(p->kind());
      step.pattern_is_regex = p->pattern_is_regex();
      step.behavior = static_cast<HfSplitBehavior>(p->behavior());
      step.invert = p->invert();
      step.add_prefix_space = p->add_prefix_space();
      step.use_regex = p->use_regex();
      step.prepend_scheme = static_cast<HfPrependScheme>(p->prepend_scheme());
      step.individual_digits = p->individual_digits();
      step.split = p->split();
      if (s) s = text(p->pattern(), field + ".pattern", step.pattern);
      if (s) s = text(p->replacement(), field + ".replacement", step.replacement);
      if (!s) return s.error();
      if (step.kind == HfPreTokenizerKind::kSplit && step.pattern.empty()) return fail(field + ".pattern: empty");
      t.pre_tokenizers.push_back(step);
    }
  }
  if (hf->decoders()) {
    for (uint32_t i = 0; i < hf->decoders()->size(); ++i) {
      const fb::HfDecoder* d = hf->decoders()->Get(i);
      const std::string field = "tokenizer.hf.decoders[" + std::to_string(i) + "]";
      if (!enum_in_range(d->kind()) || d->kind() == static_cast<fb::HfDecoderKind>(0))
        return fail(field + ".kind: unknown value");
      HfDecoderStep step;
      step.kind = static_cast<HfDecoderKind>(d->kind());
      step.start = std::min<uint32_t>(d->start(), 1024);
      step.stop = std::min<uint32_t>(d->stop(), 1024);
      step.add_prefix_space = d->add_prefix_space();
      if (s) s = text(d->pattern(), field + ".pattern", step.pattern);
      if (s) s = text(d->content(), field + ".content", step.content);
      if (s) s = text(d->replacement(), field + ".replacement", step.replacement);
      if (s) s = text(d->prefix(), field + ".prefix", step.prefix);
      step.cleanup = d->cleanup();
      if (!s) return s.error();
      if ((step.kind == HfDecoderKind::kReplace && step.pattern.empty()) ||
          (step.kind == HfDecoderKind::kStrip && step.content.empty()) ||
          (step.kind == HfDecoderKind::kMetaspace && step.replacement.empty()))
        return fail(field + ": its string is empty");
      t.decoders.push_back(step);
    }
  }
  if (hf->added_tokens()) {
    if (hf->added_tokens()->size() > vocab_size) return fail("tokenizer.hf.added_tokens: more than vocab_size");
    for (uint32_t i = 0; i < hf->added_tokens()->size(); ++i) {
      const fb::HfAddedToken* a = hf->added_tokens()->Get(i);
      // (named only on failure: Gemma 3 has 6,414 of them)
      auto field = [i] { return "tokenizer.hf.added_tokens[" + std::to_string(i) + "]"; };
      if (!id_ok(a->id())) return fail(field() + ".id = " + std::to_string(a->id()) + " is not a token id");
      HfAddedTokenEntry e;
      e.id = a->id();
      e.special = a->special();
      e.lstrip = a->lstrip();
      e.rstrip = a->rstrip();
      e.single_word = a->single_word();
      e.normalized = a->normalized();
      const flatbuffers::String* content = a->content();
      if (content == nullptr || content->size() == 0) return fail(field() + ".content: empty");
      if (content->size() > kMaxPieceBytes || !is_valid_utf8(content->string_view())) {
        s = text(content, field() + ".content", e.content);  // says what is wrong
        if (!s) return s.error();
      }
      e.content = content->string_view();
      t.added_tokens.push_back(e);
    }
  }
  auto ids = [&](const flatbuffers::Vector<int32_t>* v, const char* field, std::vector<int32_t>& out) -> Status {
    if (v == nullptr) return Status::ok();
    if (v->size() > vocab_size) return fail(std::string("tokenizer.hf.") + field + ": more than vocab_size entries");
    for (uint32_t i = 0; i < v->size(); ++i) {
      if (!id_ok(v->Get(i)))
        return fail(std::string("tokenizer.hf.") + field + "[" + std::to_string(i) + "] = " +
                    std::to_string(v->Get(i)) + " is not a token id (vocab_size " + std::to_string(vocab_size) + ")");
      out.push_back(v->Get(i));
    }
    return Status::ok();
  };
  s = ids(hf->special_ids(), "special_ids", t.special_ids);
  if (s) s = ids(hf->prefix_ids(), "prefix_ids", t.prefix_ids);
  if (s) s = ids(hf->suffix_ids(), "suffix_ids", t.suffix_ids);
  if (!s) return s.error();
  if (hf->unk_id() != -1 && !id_ok(hf->unk_id()))
    return fail("tokenizer.hf.unk_id = " + std::to_string(hf->unk_id()) + " is not a token id");
  t.unk_id = hf->unk_id();
  t.byte_fallback = hf->byte_fallback();
  t.fuse_unk = hf->fuse_unk();
  t.ignore_merges = hf->ignore_merges();
  t.clean_up_spaces = hf->clean_up_spaces();
  if (hf->merges()) {
    static_assert(sizeof(BpeMergeEntry) == sizeof(fb::BpeMerge), "BpeMerge is viewed in place");
    t.merges = reinterpret_cast<const BpeMergeEntry*>(hf->merges()->Data());
    t.merge_count = hf->merges()->size();
  }
  auto table = [&](const flatbuffers::Vector<uint32_t>* slots, uint32_t max_probe, const char* field,
                   HfHashTable& out) -> Status {
    if (slots == nullptr || slots->size() == 0) return Status::ok();
    const size_t capacity = slots->size();
    if ((capacity & (capacity - 1)) != 0)
      return fail(std::string("tokenizer.hf.") + field + ": " + std::to_string(capacity) +
                  " slots, not a power of two");
    if (max_probe >= capacity || max_probe > detail::kMaxHashProbe)  // a lookup's work is bounded
      return fail(std::string("tokenizer.hf.") + field + ": max_probe " + std::to_string(max_probe) +
                  (max_probe >= capacity ? " is not below its capacity"
                                         : " exceeds the limit of " + std::to_string(detail::kMaxHashProbe)));
    out.slots = slots->data();
    out.capacity = capacity;
    out.max_probe = max_probe;
    return Status::ok();
  };
  s = table(hf->merge_slots(), hf->merge_max_probe(), "merge_slots", t.merge_index);
  if (s) s = table(hf->token_slots(), hf->token_max_probe(), "token_slots", t.token_index);
  if (s) s = text(hf->continuing_subword_prefix(), "tokenizer.hf.continuing_subword_prefix", t.continuing_subword_prefix);
  if (!s) return s.error();
  t.max_input_chars_per_word = hf->max_input_chars_per_word();
  if (t.model == HfModelKind::kWordPiece && t.token_index.capacity == 0)
    return fail("tokenizer.hf.token_slots: missing (a WordPiece model looks every piece up)");
  auto trie = bind_stored_trie(hf->added_trie_nodes(), hf->added_trie_labels(), "tokenizer.hf.added_trie_nodes",
                               "tokenizer.hf.added_trie_labels", fail);
  if (!trie) return trie.error();
  t.added_trie = trie.value();
  if (t.model == HfModelKind::kUnigram) {
    // Unigram: a score per piece, all finite (one pass over 8 bytes a piece: 2 MB for
    // XLM-R's 250k pieces, which also yields min_score); the piece length bound.
    const flatbuffers::Vector<double>* scores = hf->scores();
    if (scores == nullptr || scores->size() == 0) return fail("tokenizer.hf.scores: missing (model Unigram)");
    if (scores->size() > vocab_size)
      return fail("tokenizer.hf.scores: " + std::to_string(scores->size()) + " scores, more than vocab_size " +
                  std::to_string(vocab_size));
    t.scores = reinterpret_cast<const unsigned char*>(scores->Data());
    t.score_count = scores->size();
    t.min_score = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < t.score_count; ++i) {
      double v;
      std::memcpy(&v, t.scores + 8 * i, 8);  // little-endian hosts only (as every view of the file)
      if (!std::isfinite(v))
        return fail("tokenizer.hf.scores[" + std::to_string(i) + "]: not a finite number");
      t.min_score = std::min(t.min_score, v);
    }
    if (hf->max_piece_bytes() == 0 || hf->max_piece_bytes() > kMaxPieceBytes)
      return fail("tokenizer.hf.max_piece_bytes: " + std::to_string(hf->max_piece_bytes()) + ", not in 1.." +
                  std::to_string(kMaxPieceBytes));
    t.max_piece_bytes = hf->max_piece_bytes();
    if (t.unk_id >= 0 && static_cast<size_t>(t.unk_id) >= t.score_count)
      return fail("tokenizer.hf.unk_id = " + std::to_string(t.unk_id) + " is not one of the model's " +
                  std::to_string(t.score_count) + " pieces");
    if (t.token_index.capacity == 0) return fail("tokenizer.hf.token_slots: missing (model Unigram)");
  } else if (hf->scores() != nullptr) {
    return fail("tokenizer.hf.scores: present for a BPE model");
  }
  return t;
}

// A tokenizer.json pipeline in a line: "NFC | Split(regex) ByteLevel | BPE | ByteLevel".
std::string describe_hf(const HfTokenizerTables& t) {
  static const char* const kNormalizers[] = {"",      "NFC",   "NFD",       "NFKC",        "NFKD",          "Replace",
                                             "Prepend", "Strip", "Lowercase", "Precompiled", "BertNormalizer"};
  static const char* const kPreTokenizers[] = {"",           "Split",           "ByteLevel",        "Metaspace",  "Digits",
                                               "WhitespaceSplit", "Whitespace", "BertPreTokenizer", "Punctuation"};
  static const char* const kDecoders[] = {"", "ByteLevel", "Replace", "ByteFallback", "Fuse", "Strip", "Metaspace", "WordPiece"};
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() || out.back() == ' ' ? "" : " ") + s; };
  for (const HfNormalizerStep& n : t.normalizers) add(kNormalizers[static_cast<int>(n.kind)]);
  add("|");
  for (const HfPreTokenizerStep& p : t.pre_tokenizers)
    add(std::string(kPreTokenizers[static_cast<int>(p.kind)]) + (p.pattern_is_regex ? "(regex)" : "") +
        (p.split ? "(split)" : ""));
  if (t.model == HfModelKind::kWordPiece)
    add("| WordPiece |");
  else
    add(std::string(t.model == HfModelKind::kUnigram ? "| Unigram" : "| BPE") + (t.byte_fallback ? " (byte fallback)" : "") +
        (t.ignore_merges ? " (ignore merges)" : "") + " |");
  for (const HfDecoderStep& d : t.decoders) add(kDecoders[static_cast<int>(d.kind)]);
  return out;
}

class Binder {
 public:
  Binder(const fb::Model* model, const uint8_t* data, uint64_t data_size, std::string name)
      : model_(model), data_(data), data_size_(data_size), name_(std::move(name)) {}

  Error fail(const std::string& what) const {
    return Error{ErrorCode::kFormat, name_ + ": " + what};
  }

  // Checks every entry of the tensor table once; binding then only checks roles.
  Status check_tensor_table(ModelInfo* info) {
    const auto* tensors = model_->tensors();
    if (tensors->size() > (1u << 20)) return fail("tensor table has too many entries");
    for (uint32_t i = 0; i < tensors->size(); ++i) {
      const fb::Tensor* t = tensors->Get(i);
      if (!is_valid_utf8(t->name()->string_view()))
        return fail(utf8_problem(t->name()->string_view(), "tensor #" + std::to_string(i) + ": name"));
      std::string label = "tensor #" + std::to_string(i) + " '" + t->name()->str() + "'";
      auto raw_dtype = static_cast<int>(t->dtype());
      if (raw_dtype < 0 || raw_dtype > static_cast<int>(fb::DType::MAX))
        return fail(label + ": unknown dtype " + std::to_string(raw_dtype));
      if (!enum_in_range(t->layout()))
        return fail(label + ": unknown layout " + std::to_string(static_cast<int>(t->layout())));
      const bool packed = t->layout() == fb::Layout::Panel16;
      DType dtype = static_cast<DType>(raw_dtype);
      const auto* shape = t->shape();
      if (shape->size() == 0 || shape->size() > kMaxRank)
        return fail(label + ": rank " + std::to_string(shape->size()) + " is not in 1.." +
                    std::to_string(kMaxRank));
      if (packed && shape->size() != 2) return fail(label + ": a Panel16 tensor must be 2-D");
      // Format 1.10 moved Panel16 int4's block scales into the panels: an older file's
      // int4 panels cannot be read as they are (its other tensors could, but not the model).
      if (packed && dtype == DType::kInt4 && model_->format_minor() < kInt4ScalesInPanelsMinor)
        return fail(label + ": int4 panels of format " + std::to_string(model_->format_major()) + "." +
                    std::to_string(model_->format_minor()) +
                    " keep their block scales apart, which this build no longer reads; re-convert the model "
                    "with this petrel-convert (format " + std::to_string(kFormatMajor) + "." +
                    std::to_string(kInt4ScalesInPanelsMinor) + " or newer)");
      uint64_t elements = 1;
      for (uint64_t dim : *shape) {
        if (dim == 0) return fail(label + ": has a zero dimension");
        if (!checked_mul(elements, dim, &elements))
          return fail(label + ": shape product overflows 64 bits");
      }
      const uint64_t rows = shape->Get(0);
      // A 1-D tensor is one row; higher ranks are stored row-major over their last dimension.
      const uint64_t cols = shape->size() == 1 ? rows : elements / rows;
      StoredSize size;
      if (!stored_size(dtype, packed ? Layout::kPanel16 : Layout::kRowMajor, shape->size() == 1 ? 1 : rows, cols,
                       &size))
        return fail(label + ": byte size overflows 64 bits");
      const TypeTraits& traits = detail::traits(dtype);
      if (shape->size() != 2 && (traits.block > 1 || traits.row_scales))
        return fail(label + ": a " + to_string(dtype) + " tensor must be 2-D");
      const uint64_t bytes = size.data;
      if (t->data()->size() != bytes)
        return fail(label + ": data size " + std::to_string(t->data()->size()) +
                    " does not match shape, dtype and layout (" + std::to_string(bytes) + " bytes)");
      Status s = check_range(label + " data", *t->data());
      if (!s) return s;
      // Side arrays: their sizes come from the same traits as the data's.
      auto side = [&](const fb::DataRef* ref, uint64_t expected, const char* what, const char* unit) -> Status {
        if (expected == 0) {
          if (ref != nullptr && ref->size() != 0)
            return fail(label + ": " + what + " given where none belong");
          return Status::ok();
        }
        if (ref == nullptr) return fail(label + ": missing " + what);
        if (ref->size() != expected)
          return fail(label + ": " + what + " hold " + std::to_string(ref->size()) + " bytes, expected " + unit + " (" +
                      std::to_string(expected) + ")");
        return check_range(label + " " + what, *ref);
      };
      s = side(t->scales(), size.row_scales, "scales", "4 per row");
      if (s) s = side(t->row_sums(), size.row_sums, "row sums", "4 per row");
      if (s)
        s = side(t->block_scales(), size.block_scales, "block scales",
                 "1 per stored row and block of 32 columns, for row-major int4");
      if (!s) return s;
      const uint64_t side_bytes = size.row_scales + size.row_sums + size.block_scales;  // each checked within the data section
      const float activation_scale = t->activation_scale();
      if (activation_scale != 0.0f) {
        if (dtype != DType::kInt8) return fail(label + ": activation_scale given for a " + to_string(dtype) + " tensor");
        // A normal float, so 1 / scale is finite too (a subnormal one would make it
        // infinite, and 0 x inf a NaN that kernels clamp differently).
        if (!(activation_scale >= std::numeric_limits<float>::min() && std::isfinite(activation_scale)))
          return fail(label + ": activation_scale " + std::to_string(activation_scale) +
                      " is not a positive normal number");
        info->static_activation_scales = true;
      }
      TensorInfo ti{t->name()->str(), dtype, {shape->begin(), shape->end()}, packed,
                    t->data()->offset(), bytes + side_bytes, t->max_abs_error(), t->snr_db(), activation_scale};
      info->tensors.push_back(std::move(ti));
    }
    return Status::ok();
  }

  Status check_range(const std::string& label, const fb::DataRef& ref) const {
    uint64_t end = 0;
    if (!checked_add(ref.offset(), ref.size(), &end) || end > data_size_)
      return fail(label + ": range [" + std::to_string(ref.offset()) + ", +" +
                  std::to_string(ref.size()) + ") lies past the end of the data section (" +
                  std::to_string(data_size_) + " bytes)");
    if (ref.offset() % kDataAlignment != 0)
      return fail(label + ": offset " + std::to_string(ref.offset()) + " is not " +
                  std::to_string(kDataAlignment) + "-byte aligned");
    return Status::ok();
  }

  // Binds tensor `index` in `role` as a matrix of the given shape; any dtype.
  Status matrix(int32_t index, const std::string& role, uint64_t rows, uint64_t cols,
                Matrix* out, bool required = true) const {
    const fb::Tensor* t = nullptr;
    Status s = lookup(index, role, required, &t);
    if (!s || t == nullptr) return s;
    const auto* shape = t->shape();
    if (shape->size() != 2 || shape->Get(0) != rows || shape->Get(1) != cols)
      return fail(role + " (tensor '" + t->name()->str() + "'): shape " + shape_string(t) +
                  ", expected [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
    out->dtype = static_cast<DType>(t->dtype());
    out->layout = t->layout() == fb::Layout::Panel16 ? Layout::kPanel16 : Layout::kRowMajor;
    out->rows = rows;
    out->cols = cols;
    out->data = data_ + t->data()->offset();
    // check_tensor_table made sure each side array the traits call for is present and sized.
    const TypeTraits& traits = out->traits();
    out->scales = traits.row_scales ? reinterpret_cast<const float*>(data_ + t->scales()->offset()) : nullptr;
    out->row_sums = traits.packed_row_sums && out->packed()
                        ? reinterpret_cast<const int32_t*>(data_ + t->row_sums()->offset())
                        : nullptr;
    out->block_scales = traits.block > 1 && !out->packed() ? data_ + t->block_scales()->offset() : nullptr;
    out->activation_scale = t->activation_scale();  // checked by check_tensor_table
    return Status::ok();
  }

  // Binds tensor `index` in `role` as an f32 vector of `size` elements.
  Status vector(int32_t index, const std::string& role, uint64_t size, const float** out,
                bool required) const {
    const fb::Tensor* t = nullptr;
    Status s = lookup(index, role, required, &t);
    if (!s || t == nullptr) return s;
    const auto* shape = t->shape();
    if (shape->size() != 1 || shape->Get(0) != size)
      return fail(role + " (tensor '" + t->name()->str() + "'): shape " + shape_string(t) +
                  ", expected [" + std::to_string(size) + "]");
    if (t->dtype() != fb::DType::F32)
      return fail(role + " (tensor '" + t->name()->str() + "'): dtype must be f32");
    *out = reinterpret_cast<const float*>(data_ + t->data()->offset());
    return Status::ok();
  }

  Status linear(const fb::Linear* l, const std::string& role, uint64_t out, uint64_t in,
                Linear* dst) const {
    if (l == nullptr) return fail(role + ": missing");
    Status s = matrix(l->weight(), role + ".weight", out, in, &dst->weight);
    if (!s) return s;
    return vector(l->bias(), role + ".bias", out, &dst->bias, false);
  }

  // A LayerNorm has gamma and beta; an RMSNorm (norm_kind) gamma only.
  Status norm(const fb::Norm* n, const std::string& role, uint64_t d, Norm* dst) const {
    if (n == nullptr) return fail(role + ": missing");
    Status s = vector(n->gamma(), role + ".gamma", d, &dst->gamma, true);
    if (!s) return s;
    if (rms_norm_) {
      if (n->beta() != -1) return fail(role + ".beta: given for an RMSNorm (norm_kind rms-norm has none)");
      return Status::ok();
    }
    return vector(n->beta(), role + ".beta", d, &dst->beta, true);
  }
  // An optional norm: absent, or bound as norm() binds it.
  Status optional_norm(const fb::Norm* n, const std::string& role, uint64_t d, Norm* dst) const {
    return n == nullptr ? Status::ok() : norm(n, role, d, dst);
  }
  void set_rms_norm(bool rms) { rms_norm_ = rms; }

  Status ssru(const fb::Ssru* u, const std::string& role, uint64_t d, Layer* dst) const {
    if (u == nullptr) return fail(role + ": missing");
    Status s = linear(u->w(), role + ".w", d, d, &dst->ssru_w);
    if (s && dst->ssru_w.bias != nullptr) return fail(role + ".w: has a bias (an SSRU's x = h W has none)");
    if (s) s = linear(u->forget(), role + ".forget", d, d, &dst->ssru_forget);
    if (s && dst->ssru_forget.bias == nullptr) return fail(role + ".forget.bias: missing");
    return s;
  }

  // q and o span `heads` heads, k and v `kv_heads`, of head_dim each (encoder-decoder
  // models: heads x head_dim = kv_heads x head_dim = d).
  Status attention(const fb::Attention* a, const std::string& role, uint64_t d, uint64_t q_width, uint64_t kv_width,
                   Attention* dst) const {
    if (a == nullptr) return fail(role + ": missing");
    Status s = linear(a->q(), role + ".q", q_width, d, &dst->q);
    if (s) s = linear(a->k(), role + ".k", kv_width, d, &dst->k);
    if (s) s = linear(a->v(), role + ".v", kv_width, d, &dst->v);
    if (s) s = linear(a->o(), role + ".o", d, q_width, &dst->o);
    return s;
  }

 private:
  Status lookup(int32_t index, const std::string& role, bool required,
                const fb::Tensor** out) const {
    *out = nullptr;
    if (index == -1) return required ? Status(fail(role + ": missing")) : Status::ok();
    if (index < 0 || static_cast<uint32_t>(index) >= model_->tensors()->size())
      return fail(role + ": tensor index " + std::to_string(index) + " is out of range (" +
                  std::to_string(model_->tensors()->size()) + " tensors)");
    *out = model_->tensors()->Get(static_cast<uint32_t>(index));
    return Status::ok();
  }

  static std::string shape_string(const fb::Tensor* t) {
    std::string s = "[";
    for (uint32_t i = 0; i < t->shape()->size(); ++i)
      s += (i ? ", " : "") + std::to_string(t->shape()->Get(i));
    return s + "]";
  }

  const fb::Model* model_;
  const uint8_t* data_;
  uint64_t data_size_;
  std::string name_;
  bool rms_norm_ = false;
};

}  // namespace

Result<BoundModel> bind_model_file(const uint8_t* bytes, size_t size, const std::string& name) {
  auto fail = [&](const std::string& what) { return Error{ErrorCode::kFormat, name + ": " + what}; };
  // The format is little-endian and tensors are used in place: refuse rather than misread.
  if (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__)
    return Error{ErrorCode::kUnsupported, name + ": Petrel model files are little-endian; this host is big-endian"};
  if (reinterpret_cast<uintptr_t>(bytes) % kDataAlignment != 0)
    return Error{ErrorCode::kInvalidArgument, name + ": model bytes are not 64-byte aligned"};
  if (size < 12) return fail("file is too small to be a Petrel model (" + std::to_string(size) + " bytes)");
  if (!flatbuffers::BufferHasIdentifier(bytes, fb::ModelIdentifier(), /*size_prefixed=*/true))
    return fail("not a Petrel model: file identifier is not \"PTRL\"");
  uint32_t fb_size = flatbuffers::ReadScalar<uint32_t>(bytes);
  uint64_t data_start = data_section_start(fb_size);
  if (4ull + fb_size > size)
    return fail("header says the metadata holds " + std::to_string(fb_size) +
                " bytes but the file has only " + std::to_string(size) + " (truncated?)");
  // Verified with its size prefix: alignment is checked relative to the buffer start.
  flatbuffers::Verifier verifier(bytes, 4 + size_t{fb_size}, /*max_depth=*/64, /*max_tables=*/1u << 22);
  if (!fb::VerifySizePrefixedModelBuffer(verifier))
    return fail("metadata failed FlatBuffers verification (corrupt or truncated file)");
  const fb::Model* m = fb::GetSizePrefixedModel(bytes);

  if (m->format_major() != kFormatMajor)
    return Error{ErrorCode::kUnsupported,
                 name + ": format version " + std::to_string(m->format_major()) + "." +
                     std::to_string(m->format_minor()) + " is not readable by this build (reads " +
                     std::to_string(kFormatMajor) + ".x); " +
                     (m->format_major() > kFormatMajor ? "upgrade Petrel" : "re-convert the model")};
  if (data_start > size)
    return fail("data section would start at byte " + std::to_string(data_start) +
                " past the end of the file (" + std::to_string(size) + " bytes)");
  if (m->data_size() != size - data_start)
    return fail("data section holds " + std::to_string(size - data_start) +
                " bytes but the header says " + std::to_string(m->data_size()) + " (truncated?)");

  BoundModel out;
  ModelInfo& info = out.info;
  info.file_size = size;
  info.format_major = m->format_major();
  info.format_minor = m->format_minor();
  if (m->data_crc32().has_value()) info.data_crc32 = m->data_crc32().value();
  if (m->producer()) info.producer = m->producer()->str();
  if (m->model_type()) info.model_type = m->model_type()->str();
  if (m->source()) info.source = m->source()->str();

  if (m->architecture() != fb::Architecture::EncoderDecoder && m->architecture() != fb::Architecture::DecoderOnly)
    return Error{ErrorCode::kUnsupported,
                 name + ": architecture " + std::to_string(static_cast<int>(m->architecture())) +
                     " is not supported by this build (encoder-decoder and decoder-only models)"};
  info.decoder_only = m->architecture() == fb::Architecture::DecoderOnly;
  info.architecture = info.decoder_only ? "decoder-only" : "encoder-decoder";
  if (!enum_in_range(m->norm())) return fail("field 'norm': unknown value");
  if (!enum_in_range(m->norm_kind())) return fail("field 'norm_kind': unknown value");
  info.norm_kind = static_cast<NormKind>(m->norm_kind());
  if (!enum_in_range(m->activation())) return fail("field 'activation': unknown value");
  if (!enum_in_range(m->decoder_start())) return fail("field 'decoder_start': unknown value");
  info.decoder_start_zeros = m->decoder_start() == fb::DecoderStart::Zeros;
  info.norm = static_cast<NormPlacement>(m->norm());
  info.activation = static_cast<Activation>(m->activation());

  auto bounded = [&](uint32_t value, uint32_t max, const char* field, uint32_t* dst) -> Status {
    if (value == 0 || value > max)
      return fail(std::string("field '") + field + "' = " + std::to_string(value) +
                  " is out of range 1.." + std::to_string(max));
    *dst = value;
    return Status::ok();
  };
  Status s = bounded(m->d_model(), kMaxDModel, "d_model", &info.d_model);
  if (s) s = bounded(m->num_heads(), kMaxDModel, "num_heads", &info.num_heads);
  if (s) s = bounded(m->ffn_dim(), kMaxFfn, "ffn_dim", &info.ffn_dim);
  if (s) s = bounded(m->vocab_size(), kMaxVocab, "vocab_size", &info.vocab_size);
  if (s) s = bounded(m->max_positions(), kMaxPositions, "max_positions", &info.max_positions);
  if (!s) return s.error();
  info.target_vocab_size = info.vocab_size;
  if (m->target_vocab_size() != 0) {
    s = bounded(m->target_vocab_size(), kMaxVocab, "target_vocab_size", &info.target_vocab_size);
    if (!s) return s.error();
  }
  // Heads: d_model / num_heads each, unless head_dim says otherwise; grouped-query
  // attention shares each K/V head among num_heads / num_kv_heads query heads.
  info.num_kv_heads = m->num_kv_heads() != 0 ? m->num_kv_heads() : info.num_heads;
  if (m->head_dim() != 0) {
    s = bounded(m->head_dim(), kMaxDModel, "head_dim", &info.head_dim);
    if (!s) return s.error();
  } else if (info.d_model % info.num_heads != 0) {
    return fail("d_model " + std::to_string(info.d_model) + " is not divisible by num_heads " +
                std::to_string(info.num_heads));
  } else {
    info.head_dim = info.d_model / info.num_heads;
  }
  if (info.num_kv_heads > info.num_heads || info.num_heads % info.num_kv_heads != 0)
    return fail("num_heads " + std::to_string(info.num_heads) + " is not a multiple of num_kv_heads " +
                std::to_string(info.num_kv_heads));
  if (uint64_t{info.num_heads} * info.head_dim > kMaxDModel)
    return fail("num_heads x head_dim = " + std::to_string(uint64_t{info.num_heads} * info.head_dim) +
                " is more than " + std::to_string(kMaxDModel));
  if (!info.decoder_only && (info.num_kv_heads != info.num_heads || uint64_t{info.num_heads} * info.head_dim != info.d_model))
    return fail("encoder-decoder models need num_kv_heads = num_heads and num_heads x head_dim = d_model");
  if (!info.decoder_only && info.norm_kind != NormKind::kLayerNorm)
    return fail("field 'norm_kind': encoder-decoder models use LayerNorm");
  info.final_logit_softcap = m->final_logit_softcap();
  if (!(info.final_logit_softcap >= 0.0f && info.final_logit_softcap <= 1e6f))
    return fail("field 'final_logit_softcap' must be in 0..1e6");
  info.layer_norm_eps = m->layer_norm_eps();
  if (!(info.layer_norm_eps > 0.f && info.layer_norm_eps < 1.f))
    return fail("field 'layer_norm_eps' must be in (0, 1)");

  // Special tokens are produced or read by the decoder: target ids.
  auto token = [&](int32_t id, const char* field, int32_t* dst) -> Status {
    if (id < 0 || static_cast<uint32_t>(id) >= info.target_vocab_size)
      return fail(std::string("field '") + field + "' = " + std::to_string(id) +
                  " is not a token id (target vocabulary of " + std::to_string(info.target_vocab_size) + ")");
    *dst = id;
    return Status::ok();
  };
  s = token(m->pad_id(), "pad_id", &info.pad_id);
  if (s) s = token(m->eos_id(), "eos_id", &info.eos_id);
  if (s) s = token(m->decoder_start_id(), "decoder_start_id", &info.decoder_start_id);
  if (!s) return s.error();
  if (m->bad_word_ids()) {
    // Each once, in the file's order: every one is masked for every hypothesis at every
    // step, and 4 M repeats of one id cost time per step for nothing. (Files of older
    // converters may repeat one: they still load.)
    std::vector<bool> listed(info.target_vocab_size, false);
    for (int32_t id : *m->bad_word_ids()) {
      int32_t checked = 0;
      s = token(id, "bad_word_ids", &checked);
      if (!s) return s.error();
      if (!listed[static_cast<size_t>(checked)]) info.bad_word_ids.push_back(checked);
      listed[static_cast<size_t>(checked)] = true;
    }
  }

  Binder bind(m, bytes + data_start, m->data_size(), name);
  s = bind.check_tensor_table(&info);
  if (!s) return s.error();
  for (const TensorInfo& t : info.tensors) {
    uint64_t n = 1;
    for (uint64_t d : t.shape) n *= d;  // no overflow: checked above
    info.parameter_count += n;
  }

  bind.set_rms_norm(info.norm_kind == NormKind::kRmsNorm);
  const uint64_t d = info.d_model, ffn = info.ffn_dim, vocab = info.target_vocab_size;
  const uint64_t q_width = uint64_t{info.num_heads} * info.head_dim, kv_width = uint64_t{info.num_kv_heads} * info.head_dim;
  // The RoPE frequencies of full-attention and of sliding-window layers ([0], [1]), and
  // the first layer of each kind that had them.
  const float* rope_of_kind[2] = {nullptr, nullptr};
  std::string rope_layer_of_kind[2];
  // What a decoder-only layer has beyond an encoder-decoder's (schema: Layer, since 1.7).
  auto bind_decoder_only_parts = [&](const fb::Layer& l, const std::string& lr, Layer& layer) -> Status {
    if (l.cross_attn() != nullptr || l.cross_attn_norm() != nullptr)
      return fail(lr + ".cross_attn: a decoder-only model's layers have no cross-attention");
    if (l.ssru() != nullptr) return fail(lr + ".ssru: a decoder-only model's layers attend (no SSRU)");
    if ((l.q_norm() == nullptr) != (l.k_norm() == nullptr)) return fail(lr + ": q_norm and k_norm come together");
    Status st = bind.optional_norm(l.q_norm(), lr + ".q_norm", info.head_dim, &layer.q_norm);
    if (st) st = bind.optional_norm(l.k_norm(), lr + ".k_norm", info.head_dim, &layer.k_norm);
    if (st) st = bind.optional_norm(l.post_attn_norm(), lr + ".post_attn_norm", d, &layer.post_attn_norm);
    if (st) st = bind.optional_norm(l.post_ffn_norm(), lr + ".post_ffn_norm", d, &layer.post_ffn_norm);
    if (st && l.fc_gate() != nullptr) st = bind.linear(l.fc_gate(), lr + ".fc_gate", ffn, d, &layer.fc_gate);
    if (!st) return st;
    if (l.sliding_window() > kMaxPositions)
      return fail(lr + ".sliding_window = " + std::to_string(l.sliding_window()) + " is out of range 0.." +
                  std::to_string(kMaxPositions));
    layer.sliding_window = l.sliding_window();
    info.sliding_window_layers += layer.sliding_window != 0;
    if (l.rope_inv_freq() != -1) {
      st = bind.vector(l.rope_inv_freq(), lr + ".rope_inv_freq", info.head_dim / 2, &layer.rope_inv_freq, true);
      if (!st) return st;
      for (uint32_t i = 0; i < info.head_dim / 2; ++i)
        if (!std::isfinite(layer.rope_inv_freq[i]))
          return fail(lr + ".rope_inv_freq[" + std::to_string(i) + "] is not finite");
      // One table per kind of layer (Gemma 3: rope_theta for full attention,
      // rope_local_base_freq for sliding windows): the runtime computes cos/sin rows per
      // distinct table, so a table per layer would cost time and memory per layer. Equal
      // tables become one.
      auto equal = [&](const float* a, const float* b) {
        return std::memcmp(a, b, info.head_dim / 2 * sizeof(float)) == 0;
      };
      for (const float* other : rope_of_kind)  // a table equal to one seen is that one
        if (other != nullptr && equal(other, layer.rope_inv_freq)) {
          layer.rope_inv_freq = other;
          break;
        }
      const size_t kind = layer.sliding_window != 0;
      if (rope_of_kind[kind] == nullptr) {
        rope_of_kind[kind] = layer.rope_inv_freq;
        rope_layer_of_kind[kind] = lr;
      } else if (rope_of_kind[kind] != layer.rope_inv_freq) {
        return fail(lr + ".rope_inv_freq differs from " + rope_layer_of_kind[kind] +
                    "'s, a layer of the same kind (" + (kind ? "sliding-window" : "full") +
                    " attention): a model has one RoPE table per kind of layer");
      }
    }
    return Status::ok();
  };
  auto bind_stack = [&](const fb::Stack* stack, const char* role, bool decoder,
                        Stack* dst) -> Status {
    const uint64_t rows = decoder ? info.target_vocab_size : info.vocab_size;
    std::string r = role;
    if (stack == nullptr) return fail(r + ": missing");
    if (stack->layers()->size() == 0 || stack->layers()->size() > kMaxLayers)
      return fail(r + ": layer count " + std::to_string(stack->layers()->size()) +
                  " is out of range 1.." + std::to_string(kMaxLayers));
    const fb::Positions* p = stack->positions();
    if (!enum_in_range(p->kind()) || !enum_in_range(p->frequency()))
      return fail(r + ".positions: unknown kind or frequency convention");
    dst->positions = {static_cast<PositionKind>(p->kind()),
                      static_cast<FrequencyConvention>(p->frequency()), p->first_index()};
    if (p->first_index() > kMaxPositions)
      return fail(r + ".positions.first_index = " + std::to_string(p->first_index()) + " is out of range 0.." +
                  std::to_string(kMaxPositions));
    // Marian's exponents are i / (d/2 - 1): 0/0, NaN at every position, at d_model 2.
    if ((dst->positions.kind == PositionKind::kSinusoidalConcatenated ||
         dst->positions.kind == PositionKind::kSinusoidalInterleaved) &&
        dst->positions.frequency == FrequencyConvention::kMarianCpp && d < 4)
      return fail(r + ".positions.frequency: Marian's convention needs a d_model of 4 or more, not " +
                  std::to_string(d));
    Status st = bind.matrix(stack->embed_tokens(), r + ".embed_tokens", rows, d, &dst->embed_tokens);
    if (!st) return st;
    if (dst->positions.kind == PositionKind::kLearned) {
      // Position i reads row first_index + i (mBART's tables start at 2), so the
      // table holds first_index + max_positions rows.
      Matrix table;
      st = bind.matrix(p->table(), r + ".positions.table (first_index + max_positions rows)",
                       uint64_t{p->first_index()} + info.max_positions, d, &table);
      if (!st) return st;
      if (table.dtype != DType::kF32 || table.layout != Layout::kRowMajor)
        return fail(r + ".positions.table: must be f32, row-major");
      dst->position_table = static_cast<const float*>(table.data) + uint64_t{p->first_index()} * d;
    } else if (dst->positions.kind == PositionKind::kRotary) {
      if (!info.decoder_only) return fail(r + ".positions: rotary positions are for decoder-only models");
      if (info.head_dim % 2 != 0) return fail(r + ".positions: rotary positions need an even head_dim");
    } else if (dst->positions.kind != PositionKind::kNone) {
      if (d % 2 != 0) return fail(r + ".positions: sinusoidal tables need an even d_model");
    }
    for (uint32_t i = 0; i < stack->layers()->size(); ++i) {
      const fb::Layer* l = stack->layers()->Get(i);
      std::string lr = r + ".layers." + std::to_string(i);
      Layer layer;
      if (l->ssru() != nullptr) {  // a decoder layer whose recurrence replaces self-attention
        if (!decoder) return fail(lr + ".ssru: only decoder layers may have one");
        if (l->self_attn() != nullptr || l->self_attn_norm() != nullptr)
          return fail(lr + ": has both self_attn and ssru");
        st = bind.ssru(l->ssru(), lr + ".ssru", d, &layer);
        if (st) st = bind.norm(l->ssru_norm(), lr + ".ssru_norm", d, &layer.ssru_norm);
        info.ssru_layers += st ? 1 : 0;
      } else {
        if (l->ssru_norm() != nullptr) return fail(lr + ".ssru_norm: given without an ssru");
        st = bind.attention(l->self_attn(), lr + ".self_attn", d, q_width, kv_width, &layer.self_attn);
        if (st) st = bind.norm(l->self_attn_norm(), lr + ".self_attn_norm", d, &layer.self_attn_norm);
      }
      if (st && decoder && !info.decoder_only) {
        st = bind.attention(l->cross_attn(), lr + ".cross_attn", d, d, d, &layer.cross_attn);
        if (st) st = bind.norm(l->cross_attn_norm(), lr + ".cross_attn_norm", d, &layer.cross_attn_norm);
      }
      if (st && info.decoder_only) st = bind_decoder_only_parts(*l, lr, layer);
      if (st) st = bind.linear(l->fc1(), lr + ".fc1", ffn, d, &layer.fc1);
      if (st) st = bind.linear(l->fc2(), lr + ".fc2", d, ffn, &layer.fc2);
      if (st) st = bind.norm(l->ffn_norm(), lr + ".ffn_norm", d, &layer.ffn_norm);
      if (!st) return st;
      if (dst->positions.kind == PositionKind::kRotary && layer.rope_inv_freq == nullptr)
        return fail(lr + ".rope_inv_freq: missing (the stack's positions are rotary)");
      dst->layers.push_back(layer);
    }
    if (stack->embed_norm() != nullptr) {
      st = bind.norm(stack->embed_norm(), r + ".embed_norm", d, &dst->embed_norm);
      if (!st) return st;
    }
    if (info.norm == NormPlacement::kPre)
      return bind.norm(stack->final_norm(), r + ".final_norm", d, &dst->final_norm);
    return Status::ok();
  };
  ModelWeights& w = out.weights;
  if (info.decoder_only) {
    // What only encoder-decoder models use is refused rather than ignored.
    if (m->encoder() != nullptr) return fail("encoder: a decoder-only model has none");
    if (m->final_logits_bias() != -1) return fail("final_logits_bias: a decoder-only model has none");
    if (m->shortlist() != nullptr) return fail("shortlist: a decoder-only model has none");
    const fb::Stack* dec = m->decoder();
    if (dec != nullptr && dec->embed_norm() != nullptr) return fail("decoder.embed_norm: a decoder-only model has none");
    if (dec != nullptr && dec->positions()->kind() != fb::PositionKind::Rotary &&
        dec->positions()->kind() != fb::PositionKind::None)
      return fail("decoder.positions: a decoder-only model's positions are rotary (or none)");
    if (info.norm != NormPlacement::kPre) return fail("field 'norm': decoder-only models are pre-norm");
    if (info.target_vocab_size != info.vocab_size) return fail("target_vocab_size: a decoder-only model has one vocabulary");
  } else {
    s = bind_stack(m->encoder(), "encoder", false, &w.encoder);
  }
  if (s) s = bind_stack(m->decoder(), "decoder", true, &w.decoder);
  if (!s) return s.error();
  info.encoder_layers = static_cast<uint32_t>(w.encoder.layers.size());
  info.decoder_layers = static_cast<uint32_t>(w.decoder.layers.size());
  if (m->alignment_layer() != -1) {
    if (info.decoder_only || m->alignment_layer() < 0 || static_cast<uint32_t>(m->alignment_layer()) >= info.decoder_layers)
      return fail("field 'alignment_layer' = " + std::to_string(m->alignment_layer()) + " is not one of the " +
                  std::to_string(info.decoder_layers) + " decoder layers of an encoder-decoder model");
    info.alignment_layer = m->alignment_layer();
  }
  info.encoder_positions = w.encoder.positions;
  info.decoder_positions = w.decoder.positions;
  info.embedding_norm = w.encoder.embed_norm.present() || w.decoder.embed_norm.present();
  info.shared_embeddings = !info.decoder_only && m->encoder()->embed_tokens() == m->decoder()->embed_tokens();

  info.tied_output = m->output_proj() == -1;
  if (info.tied_output) {
    w.output_proj = w.decoder.embed_tokens;
  } else {
    s = bind.matrix(m->output_proj(), "output_proj", vocab, d, &w.output_proj);
    if (!s) return s.error();
  }
  s = bind.vector(m->final_logits_bias(), "final_logits_bias", vocab, &w.final_logits_bias, false);
  if (!s) return s.error();
  info.final_logits_bias = w.final_logits_bias != nullptr;

  if (m->folds()) {
    for (const fb::Fold* f : *m->folds()) {
      FoldInfo fi{f->what()->str(), f->value(), {}, f->note() ? f->note()->str() : ""};
      if (f->targets())
        for (const auto* t : *f->targets()) fi.targets.push_back(t->str());
      info.folds.push_back(std::move(fi));
    }
  }
  if (const fb::Shortlist* list = m->shortlist()) {
    s = bind_shortlist(*list, info, &w.shortlist, fail);
    if (!s) return s.error();
  }
  if (const fb::GenerationDefaults* g = m->generation()) {
    GenerationDefaults& gen = info.generation;
    gen.from_checkpoint = true;
    if (g->num_beams() < 1 || g->num_beams() > 64)
      return fail("generation.num_beams = " + std::to_string(g->num_beams()) + " is out of range 1..64");
    gen.num_beams = g->num_beams();
    gen.max_length = g->max_length();
    if (!(g->length_penalty() >= 0.0f && g->length_penalty() <= 10.0f))
      return fail("generation.length_penalty must be in 0..10");
    gen.length_penalty = g->length_penalty();
    if (!enum_in_range(g->beam_stop())) return fail("generation.beam_stop: unknown value");
    gen.beam_stop = g->beam_stop() == fb::BeamStop::FirstK ? BeamStop::kFirstK : BeamStop::kHeuristic;
    if (g->forced_eos_id() != -1) {
      s = token(g->forced_eos_id(), "generation.forced_eos_id", &gen.forced_eos_id);
      if (!s) return s.error();
    }
    if (g->forced_bos_id() != -1) {
      s = token(g->forced_bos_id(), "generation.forced_bos_id", &gen.forced_bos_id);
      if (!s) return s.error();
    }
    if (!(g->max_length_factor() >= 0.0f && g->max_length_factor() <= 1000.0f))
      return fail("generation.max_length_factor must be in 0..1000");
    gen.max_length_factor = g->max_length_factor();
  }
  if (const fb::LanguageModel* lm = m->lm()) {
    if (!info.decoder_only) return fail("lm: only decoder-only models have one");
    LanguageModelDefaults& d = info.lm;
    if (lm->bos_id() != -1) {
      s = token(lm->bos_id(), "lm.bos_id", &d.bos_id);
      if (!s) return s.error();
    }
    for (auto [field, value, dst, limit] :
         {std::tuple{"lm.chat_template", lm->chat_template(), &d.chat_template, size_t{1} << 20},
          std::tuple{"lm.bos_token", lm->bos_token(), &d.bos_token, kMaxPieceBytes},
          std::tuple{"lm.eos_token", lm->eos_token(), &d.eos_token, kMaxPieceBytes}}) {
      if (value == nullptr) continue;
      if (value->size() > limit)
        return fail(std::string(field) + ": " + std::to_string(value->size()) + " bytes, more than " +
                    std::to_string(limit));
      const std::string problem = utf8_problem(value->string_view(), field);
      if (!problem.empty()) return fail(problem);
      dst->assign(value->string_view());
    }
    if (lm->eos_ids()) {
      if (lm->eos_ids()->size() > 64) return fail("lm.eos_ids: more than 64 ids");
      for (int32_t id : *lm->eos_ids()) {
        int32_t checked = 0;
        s = token(id, "lm.eos_ids", &checked);
        if (!s) return s.error();
        d.eos_ids.push_back(checked);
      }
    }
    auto in_range = [&](float v, float lo, float hi, const char* field, float* dst) -> Status {
      if (!(v >= lo && v <= hi))
        return fail(std::string("field 'lm.") + field + "' = " + std::to_string(v) + " is out of range " +
                    std::to_string(lo) + ".." + std::to_string(hi));
      *dst = v;
      return Status::ok();
    };
    d.do_sample = lm->do_sample();
    s = in_range(lm->temperature(), kMinSamplingScale, kMaxSamplingScale, "temperature", &d.temperature);
    if (s) s = in_range(lm->top_p(), 1e-6f, 1.0f, "top_p", &d.top_p);
    if (s) s = in_range(lm->min_p(), 0.0f, 1.0f, "min_p", &d.min_p);
    if (s) s = in_range(lm->repetition_penalty(), kMinSamplingScale, kMaxSamplingScale, "repetition_penalty", &d.repetition_penalty);
    if (!s) return s.error();
    d.top_k = std::min(lm->top_k(), info.vocab_size);
    d.max_new_tokens = std::min(lm->max_new_tokens(), info.max_positions);
  } else if (info.decoder_only) {
    info.lm.eos_ids = {info.eos_id};
  }
  if (const fb::Tokenizer* tok = m->tokenizer()) {
    if (!enum_in_range(tok->kind())) return fail("tokenizer.kind: unknown value");
    auto strings = bind_tokenizer_strings(*tok, info.vocab_size, fail);
    if (!strings) return strings.error();
    const TokenizerStrings& bound_strings = strings.value();
    if (tok->kind() == fb::TokenizerKind::Marian) {
      auto parts = bind_marian_tokenizer(*tok, info, bound_strings, fail);
      if (!parts) return parts.error();
      TokenizerInfo& t = info.tokenizer;
      t.kind = "marian";
      describe_sentencepiece(*tok->source(), parts.value().source, t.source);
      describe_sentencepiece(*tok->target(), parts.value().target, t.target);
      t.separate_target_vocab = !parts.value().target_vocab.empty();
      for (std::string_view token : parts.value().vocab)
        if (token.size() > 4 && token.compare(0, 2, ">>") == 0 && token.compare(token.size() - 2, 2, "<<") == 0)
          t.language_codes.emplace_back(token);
      out.marian_tokenizer = std::move(parts.value());
      info.has_text_tokenizer = true;
    }
    if (tok->kind() == fb::TokenizerKind::SentencePieceIds) {
      auto parts = bind_spm_ids_tokenizer(*tok, info, bound_strings, fail);
      if (!parts) return parts.error();
      TokenizerInfo& t = info.tokenizer;
      t.kind = "sentencepiece";
      describe_sentencepiece(*tok->source(), parts.value().source, t.source);
      describe_sentencepiece(*tok->target(), parts.value().target, t.target);
      t.separate_target_vocab = tok->target() != tok->source();
      out.spm_ids_tokenizer = std::move(parts.value());
      info.has_text_tokenizer = true;
    }
    if (tok->kind() == fb::TokenizerKind::MarianWords) {
      MarianWordsTables parts;
      if (!bound_strings.has_vocab) return fail("tokenizer.vocab: a MarianWords tokenizer needs the vocabulary");
      parts.vocab = bound_strings.vocab;
      auto target_vocab = bind_target_vocab(*tok, info, bound_strings.blob, fail);
      if (!target_vocab) return target_vocab.error();
      parts.target_vocab = std::move(target_vocab.value());
      const uint32_t smaller = std::min(info.vocab_size, info.target_vocab_size);
      for (auto [id, field, dst] : {std::tuple{tok->eos_id(), "eos_id", &parts.eos_id},
                                    std::tuple{tok->unk_id(), "unk_id", &parts.unk_id}}) {
        if (id < 0 || static_cast<uint32_t>(id) >= smaller)
          return fail(std::string("tokenizer.") + field + " = " + std::to_string(id) +
                      " is not a source and target token id");
        *dst = id;
      }
      info.tokenizer.kind = "marian-words";
      info.tokenizer.separate_target_vocab = !parts.target_vocab.empty();
      out.marian_words_tokenizer = std::move(parts);
    }
    if (tok->kind() == fb::TokenizerKind::Fairseq) {
      if (info.target_vocab_size != info.vocab_size)
        return fail("tokenizer.kind: a Fairseq tokenizer needs one vocabulary for source and target");
      auto parts = bind_fairseq_parts(*tok, info.vocab_size, bound_strings, fail);
      if (!parts) return parts.error();
      TokenizerInfo& t = info.tokenizer;
      t.kind = "fairseq";
      describe_sentencepiece(*tok->source(), parts.value().spm, t.source);
      for (const auto& language : parts.value().languages) t.language_codes.emplace_back(language.first);
      t.family = std::string(parts.value().family);
      t.default_source_language = std::string(parts.value().default_source_language);
      out.fairseq_tokenizer = std::move(parts.value());
      info.has_text_tokenizer = true;
    }
    if (tok->kind() == fb::TokenizerKind::HuggingFace) {
      auto parts = bind_hf_parts(*tok, info.vocab_size, bound_strings, fail);
      if (!parts) return parts.error();
      TokenizerInfo& t = info.tokenizer;
      t.kind = "huggingface";
      t.merges = static_cast<uint32_t>(parts.value().merge_count);
      t.added_tokens = static_cast<uint32_t>(parts.value().added_tokens.size());
      t.pipeline = describe_hf(parts.value());
      for (int32_t id : parts.value().special_ids)
        t.special_tokens.push_back(to_valid_utf8(parts.value().vocab[static_cast<size_t>(id)]));
      out.hf_tokenizer = std::move(parts.value());
      info.has_text_tokenizer = true;
    }
    if (bound_strings.has_vocab) {
      info.vocab = bound_strings.vocab;  // Model::load makes it keep the file alive
      info.has_text_tokenizer = tok->kind() != fb::TokenizerKind::None;
      if (tok->kind() == fb::TokenizerKind::WordsThenChars) info.tokenizer.kind = "words";
      if (tok->kind() == fb::TokenizerKind::WordsThenChars && info.target_vocab_size != info.vocab_size)
        return fail("tokenizer.kind: a word tokenizer needs one vocabulary for source and target");
    }
  }
  s = check_text_fields(info, fail);
  if (!s) return s.error();
  return out;
}

Result<HfTokenizerTables> bind_hf_tokenizer(const fb::Tokenizer& tok, uint32_t vocab_size, const std::string& name) {
  auto fail = [&](const std::string& what) { return Error{ErrorCode::kFormat, name + ": " + what}; };
  if (tok.kind() != fb::TokenizerKind::HuggingFace) return fail("tokenizer.kind: not HuggingFace");
  auto strings = bind_tokenizer_strings(tok, vocab_size, fail);
  if (!strings) return strings.error();
  return bind_hf_parts(tok, vocab_size, strings.value(), fail);
}

Result<FairseqTokenizerTables> bind_fairseq_tokenizer(const fb::Tokenizer& tok, uint32_t vocab_size,
                                                             const std::string& name) {
  auto fail = [&](const std::string& what) { return Error{ErrorCode::kFormat, name + ": " + what}; };
  auto strings = bind_tokenizer_strings(tok, vocab_size, fail);
  if (!strings) return strings.error();
  return bind_fairseq_parts(tok, vocab_size, strings.value(), fail);
}

}  // namespace petrel::detail
