// A model file's tokenizer section as the loader binds it: plain tables viewing into
// the file, checked for sizes, ids and UTF-8 (model_file.cpp). The model builds its
// text tokenizer from them (text/); the converter fills a SentencePieceSpec from a
// .spm file the same way. Data only: nothing here knows how text is encoded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "petrel/types.h"

namespace petrel::detail {

enum class SpmAlgorithm : uint8_t { kUnigram = 1, kBpe = 2 };  // TrainerSpec.ModelType values
enum class PieceType : uint8_t {                               // ModelProto.SentencePiece.Type values
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// The longest piece, in bytes, a tokenizer accepts (loader, SentencePiece::create,
// petrel-convert's .spm reader). Upstream's trainer refuses max_sentencepiece_length
// above 512 characters (trainer_interface.cc; the default is 16), i.e. at most 2048
// bytes of UTF-8; user-defined symbols may be longer but are tags a few bytes long.
// 4096 leaves room for both, and bounds the work per text position of unigram's
// lattice and the trie build, which a 4 MB piece would otherwise turn into a hang.
inline constexpr size_t kMaxPieceBytes = 4096;

// TrainerSpec.unk_surface's default: " ⁇ " (U+2047 between spaces).
inline constexpr std::string_view kDefaultUnkSurface = " \xe2\x81\x87 ";

// A node of a SentencePiece model's piece trie (text::PieceTrie's layout): the
// children of node n are the nodes [nodes[n].first_child, nodes[n + 1].first_child).
// A model file stores it as it is here (FlatBuffers struct PieceTrieNode: two
// little-endian 32-bit fields), so the loader views it in place.
struct PieceTrieNode {
  uint32_t first_child;
  int32_t id;  // the piece ending here, or -1
};

// A piece trie as a model file stores it (since format 1.5), viewing into the file:
// `size` nodes and as many labels (labels[n]: the byte leading to node n). Checked when
// the tokenizer is built (text::PieceTrie::adopt). size 0: none stored (built at load).
struct StoredPieceTrie {
  const PieceTrieNode* nodes = nullptr;
  const unsigned char* labels = nullptr;
  size_t size = 0;
};

// The fields of a SentencePiece ModelProto that encoding and decoding use, as views.
// Defaults are the proto2 defaults of an absent field.
struct SentencePieceSpec {
  SpmAlgorithm algorithm = SpmAlgorithm::kUnigram;  // TrainerSpec.model_type
  StringTable pieces;                                // id -> piece (ModelProto.pieces)
  std::vector<float> scores;                         // id -> score
  std::vector<PieceType> types;                      // id -> type
  // NormalizerSpec
  std::string_view precompiled_charsmap;  // may be empty: no character rules
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
  // TrainerSpec
  bool treat_whitespace_as_suffix = false;
  bool byte_fallback = false;
  std::string_view unk_surface = kDefaultUnkSurface;  // what decoding prints for the unknown piece
  StoredPieceTrie trie;  // the converter's piece trie (a model file's); none: built from the pieces
  // A model file's scores and types (one per piece), viewed in place instead of
  // `scores` and `types` (then empty): copies would cost 1.25 MiB of page faults per
  // load for NLLB. They must outlive the model built; null: use the vectors.
  const float* stored_scores = nullptr;
  const PieceType* stored_types = nullptr;
  // The unknown id is the one piece of type kUnknown (as upstream: TrainerSpec.unk_id
  // is not consulted); bos/eos/pad are control pieces like any other.
};

// opus-mt's tokenizer (text::MarianTokenizer): two SentencePiece models and the
// model's vocabulary.
struct MarianTokenizerTables {
  SentencePieceSpec source, target;
  const int32_t* source_vocab_ids = nullptr;   // per source piece: vocabulary id, or -1
  StringTable vocab;         // source vocabulary, id -> token
  StringTable target_vocab;  // empty: vocab
  int32_t eos_id = -1, unk_id = -1, pad_id = -1;  // source vocabulary ids
  bool clean_up_spaces = true;
};

// Marian C++ models' tokenizer (text::SentencePieceIdsTokenizer): the SentencePiece ids
// are the model's ids. Source pieces = vocab_size, target pieces = target_vocab_size.
struct SentencePieceIdsTables {
  SentencePieceSpec source, target;
  int32_t eos_id = -1, unk_id = -1;  // the pieces "</s>" and "<unk>" (of both models)
};

// Marian C++ models with word vocabularies (text::MarianWordsTokenizer).
struct MarianWordsTables {
  StringTable vocab, target_vocab;  // target_vocab empty: vocab
  int32_t eos_id = -1, unk_id = -1;
};

enum class LanguagePlacement : uint8_t { kFirst, kLast };      // of the source language token
enum class PieceDecoding : uint8_t { kSentencePiece, kJoinPieces };  // output pieces -> text

// The multilingual families' tokenizer (text::FairseqTokenizer): NLLB, M2M100, mBART-50.
// Every id has been checked against vocab.size() and spm_vocab_ids' length.
struct FairseqTokenizerTables {
  SentencePieceSpec spm;
  const int32_t* spm_vocab_ids = nullptr;  // per SentencePiece id: model id, or -1 (<unk>)
  StringTable vocab;                       // model id -> token text
  int32_t eos_id = -1, unk_id = -1, pad_id = -1;
  int32_t mask_id = -1;                    // -1: none
  std::vector<int32_t> special_ids;        // cut out of the input, skipped in the output
  std::vector<std::pair<std::string_view, int32_t>> languages;  // code (the token's text) -> id
  LanguagePlacement placement = LanguagePlacement::kFirst;
  PieceDecoding piece_decoding = PieceDecoding::kSentencePiece;
  bool clean_up_spaces = false;
  std::string_view family;                   // "nllb", "m2m100", "mbart50"
  std::string_view default_source_language;  // empty: none
};

// A tokenizer.json tokenizer (text::HfTokenizer; format 1.8's Tokenizer.hf), as views.
// Every id has been checked against vocab.size(); the hash tables' capacities are
// powers of two with max_probe below them, their slots unchecked (a lookup checks the
// slot it reads, so a corrupt table gives wrong tokens, never a bad read).
enum class HfNormalizerKind : uint8_t { kNfc = 1, kNfd, kNfkc, kNfkd, kReplace, kPrepend, kStrip, kLowercase, kPrecompiled,
                                        kBertNormalizer };
enum class HfSplitBehavior : uint8_t { kRemoved = 0, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
enum class HfPrependScheme : uint8_t { kAlways = 0, kNever, kFirst };
enum class HfPreTokenizerKind : uint8_t { kSplit = 1, kByteLevel, kMetaspace, kDigits, kWhitespaceSplit, kWhitespace,
                                          kBertPreTokenizer, kPunctuation };
enum class HfDecoderKind : uint8_t { kByteLevel = 1, kReplace, kByteFallback, kFuse, kStrip, kMetaspace, kWordPiece };
enum class HfModelKind : uint8_t { kBpe = 1, kUnigram = 2, kWordPiece = 3 };

struct HfNormalizerStep {
  HfNormalizerKind kind = HfNormalizerKind::kNfc;
  std::string_view pattern;  // Replace
  bool pattern_is_regex = false;
  std::string_view content;  // Replace, Prepend
  bool strip_left = false, strip_right = false;
  std::string_view precompiled_charsmap;
  // BertNormalizer (strip_accents resolved: JSON null follows lowercase).
  bool clean_text = false, handle_chinese_chars = false, strip_accents = false, lowercase = false;
};
struct HfPreTokenizerStep {
  HfPreTokenizerKind kind = HfPreTokenizerKind::kSplit;
  std::string_view pattern;  // Split
  bool pattern_is_regex = false;
  HfSplitBehavior behavior = HfSplitBehavior::kIsolated;
  bool invert = false;
  bool add_prefix_space = false;  // ByteLevel, Metaspace
  bool use_regex = true;          // ByteLevel
  std::string_view replacement;   // Metaspace
  HfPrependScheme prepend_scheme = HfPrependScheme::kAlways;
  bool individual_digits = false;  // Digits
  bool split = false;              // Metaspace: cut before each replacement (Unigram tokenizers)
};
struct HfDecoderStep {
  HfDecoderKind kind = HfDecoderKind::kByteLevel;
  std::string_view pattern, content;  // Replace; Strip's content
  uint32_t start = 0, stop = 0;       // Strip
  std::string_view replacement;       // Metaspace
  bool add_prefix_space = false;      // Metaspace
  std::string_view prefix;            // WordPiece
  bool cleanup = false;               // WordPiece
};
struct HfAddedTokenEntry {
  int32_t id = -1;
  std::string_view content;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
};
// FlatBuffers struct BpeMerge's layout (three little-endian int32), viewed in place.
struct BpeMergeEntry {
  int32_t left, right, result;
};

// The hash tables' keys (the converter builds them, the engine probes them).
inline uint32_t hf_token_hash(std::string_view token) {  // FNV-1a, 32 bits
  uint32_t h = 2166136261u;
  for (unsigned char c : token) h = (h ^ c) * 16777619u;
  return h;
}
inline uint32_t hf_merge_hash(int32_t left, int32_t right) {
  const uint64_t key = (uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right);
  return static_cast<uint32_t>((key * 0x9E3779B97F4A7C15ull) >> 32);
}

// The most slots past its hash a converter-built table may place an entry: a lookup
// reads at most kMaxHashProbe + 1 slots. Real tables at half load: tokens 11 (Gemma 3,
// 262,145), 13 (Qwen3, 151,669), 38 (Llama 3, 128,256); merges 39 (Gemma 3, 514,906),
// 11 (Qwen3, Llama 3). The converter doubles a table whose keys probe further.
constexpr uint32_t kMaxHashProbe = 64;

struct HfHashTable {
  const uint32_t* slots = nullptr;  // entry index + 1; 0: empty
  size_t capacity = 0;              // a power of two (0: no table)
  uint32_t max_probe = 0;           // < capacity, <= kMaxHashProbe
};

struct HfTokenizerTables {
  StringTable vocab;  // id -> token (ids without one: empty)
  std::vector<HfNormalizerStep> normalizers;
  std::vector<HfPreTokenizerStep> pre_tokenizers;
  std::vector<HfDecoderStep> decoders;
  std::vector<HfAddedTokenEntry> added_tokens;
  std::vector<int32_t> special_ids, prefix_ids, suffix_ids;
  int32_t unk_id = -1;
  bool byte_fallback = false, fuse_unk = false, ignore_merges = false, clean_up_spaces = false;
  const BpeMergeEntry* merges = nullptr;
  size_t merge_count = 0;
  HfHashTable merge_index;  // merge index + 1, keyed by hf_merge_hash(left, right)
  HfHashTable token_index;  // id + 1, keyed by hf_token_hash(token)
  StoredPieceTrie added_trie;  // of the contents of added_tokens not `normalized` (size 0: none stored)
  HfModelKind model = HfModelKind::kBpe;
  std::string_view continuing_subword_prefix;  // WordPiece
  uint32_t max_input_chars_per_word = 100;     // WordPiece
  // Unigram (model kUnigram): ids 0 .. score_count - 1 are its pieces; `scores` views
  // score_count little-endian doubles in the file (read with memcpy: the view may be
  // unaligned), each checked finite; min_score is their minimum (the unknown
  // character's score is min_score - 10).
  const unsigned char* scores = nullptr;
  size_t score_count = 0;
  double min_score = 0;
  uint32_t max_piece_bytes = 0;  // 1 .. kMaxPieceBytes for Unigram
};

}  // namespace petrel::detail
