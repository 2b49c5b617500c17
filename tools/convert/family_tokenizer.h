// The text tokenizer of NLLB-200, M2M100 and mBART-50 checkpoints (FAMILIES.md §6;
// tools/reference/family_tokenizers.py is the executable statement of the rules): read
// from the checkpoint directory's sentencepiece.bpe.model, vocab.json (M2M100) and
// tokenizer_config.json, and written as a Fairseq tokenizer table (schema/petrel.fbs).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "convert/convert.h"
#include "convert/spm_model.h"
#include "core/string_hash.h"
#include "petrel_generated.h"

namespace petrel::convert {

struct FamilyTokenizer {
  std::string family;                   // "nllb", "m2m100", "mbart50"
  SpmModel spm;                         // sentencepiece.bpe.model
  std::vector<int32_t> spm_vocab_ids;   // per SentencePiece id: model id, -1 (<unk>)
  std::vector<std::string> vocab;       // model id -> token text; "" for ids never produced
  int32_t eos_id = -1, unk_id = -1, pad_id = -1, mask_id = -1;
  std::vector<int32_t> special_ids;     // <s>, <pad>, </s>, <unk>, every language, <mask>
  std::vector<std::pair<std::string, int32_t>> languages;  // token text ("eng_Latn", "__en__", "en_XX") -> id
  bool language_last = false;           // NLLB legacy_behaviour: `X </s> [lang]`
  bool join_pieces = false;             // NLLB: pieces joined, "▁" -> " " (no SentencePiece decoding)
  bool clean_up_spaces = false;         // tokenizer_config.json's clean_up_tokenization_spaces
  std::string default_source_language;  // tokenizer_config.json's src_lang (else transformers' default)
};

// `tokenizer_class`: config.json's or tokenizer_config.json's ("NllbTokenizer",
// "M2M100Tokenizer", "MBart50Tokenizer", their Fast twins; empty: tokenizer_config.json's,
// else M2M100 when `model_type` is m2m_100 and vocab.json exists). `model_type`: "m2m_100"
// or "mbart". nullopt (with a note) when the tokenizer files are absent or the class is
// not one of these: the model then converts with token ids only. Throws ConvertError
// naming the file and key on anything malformed.
std::optional<FamilyTokenizer> read_family_tokenizer(const std::string& dir, const std::string& model_type,
                                                     const std::string& tokenizer_class, uint32_t vocab_size,
                                                     std::vector<std::string>* notes);

// The same from the files' contents (nullopt: absent); `dir` names them in errors.
// What read_family_tokenizer runs, and what fuzz_checkpoint_json fuzzes.
struct FamilyTokenizerFiles {
  std::string dir;
  std::optional<std::string> tokenizer_config, vocab, sentencepiece;  // the .model's bytes
};
std::optional<FamilyTokenizer> family_tokenizer_from(const FamilyTokenizerFiles& files, const std::string& model_type,
                                                     const std::string& tokenizer_class, uint32_t vocab_size,
                                                     std::vector<std::string>* notes);

// A tokenizer's string tables (vocabularies, pieces) as the file stores them, in the
// layout ConvertOptions::tokenizer_strings says.
class TokenizerStrings {
 public:
  // One table: `strings` ([string]) or `spans`, as the layout says.
  struct Table {
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>> strings;
    flatbuffers::Offset<flatbuffers::Vector<const fb::StringSpan*>> spans;
  };
  TokenizerStrings(flatbuffers::FlatBufferBuilder& fbb, StringLayout layout) : fbb_(fbb), layout_(layout) {}
  Table add(const std::vector<std::string_view>& strings);
  Table add(const std::vector<std::string>& strings);
  // Tokenizer.strings (none for kStringVectors): after every add(), before the Tokenizer
  // table is begun. Throws ConvertError past 4 GiB (spans are 32-bit).
  flatbuffers::Offset<flatbuffers::Vector<uint8_t>> blob();
  // Sets Tokenizer.vocab or vocab_spans, target_vocab or target_vocab_spans, strings.
  static void add_vocab(fb::TokenizerBuilder& b, const Table& t);
  static void add_target_vocab(fb::TokenizerBuilder& b, const Table& t);
  static void add_blob(fb::TokenizerBuilder& b, flatbuffers::Offset<flatbuffers::Vector<uint8_t>> blob);

 private:
  flatbuffers::FlatBufferBuilder& fbb_;
  StringLayout layout_;
  std::string bytes_;
  detail::StringMap<std::string, uint32_t> offset_of_;
};

flatbuffers::Offset<fb::Tokenizer> write_family_tokenizer(flatbuffers::FlatBufferBuilder& fbb, const FamilyTokenizer& t,
                                                          StringLayout layout = StringLayout::kSpans);

// A SentencePiece model as the engine stores it, with vocab_ids (per piece: model id,
// -1 absent) when given, its pieces added to `strings`. Shared with the Marian
// tokenizers' writers.
flatbuffers::Offset<fb::SentencePieceModel> write_sentencepiece_model(flatbuffers::FlatBufferBuilder& fbb,
                                                                      const SpmModel& m,
                                                                      const std::vector<int32_t>* vocab_ids,
                                                                      TokenizerStrings& strings);

}  // namespace petrel::convert
