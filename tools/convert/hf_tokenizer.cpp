// tokenizer.json -> the model file's Tokenizer (kind HuggingFace). The semantics are
// transformers.js 3.7's (the oracle, tools/reference/make_hf_tokenizer_fixtures.mjs):
// what it reads is stored, what it would read differently from Hugging Face's Rust
// tokenizers, or not at all, is refused by name rather than guessed. A Unigram model
// (T5, ALBERT, XLM-R, mT5) is read with Rust tokenizers' semantics instead (0.19 ..
// 0.21; the oracle is SentencePiece itself, tools/reference/make_hf_unigram_fixtures.py):
// transformers.js 3.7 approximates its Precompiled normalizer by NFKC and drops
// Metaspace's prefix when add_prefix_space is absent, as modern files write it.
// The parts, by what they read and write: hf_model.cpp, hf_pipeline.cpp (hf_tokenizer_parts.h).
#include "convert/hf_tokenizer.h"

#include <algorithm>

#include "convert/config_reader.h"
#include "convert/family_tokenizer.h"
#include "convert/hf_tokenizer_parts.h"
#include "text/split_regex.h"
#include "text/spm_trie.h"

namespace petrel::convert {

flatbuffers::Offset<fb::Tokenizer> write_hf_tokenizer(flatbuffers::FlatBufferBuilder& fbb, const HfTokenizerFiles& files,
                                                      uint32_t vocab_size, HfTokenizerSummary* summary) {
  using namespace hf_tokenizer_detail;
  const std::string file = files.dir + "/tokenizer.json";
  const json root = parse_json(file, files.tokenizer_json);
  const JsonAt top(file, root, "");
  if (!root.is_object()) top.fail("not a JSON object");
  HfTokenizerSummary sum;
  // The model: BPE, Unigram or WordPiece.
  const JsonAt model = top.at("model");
  const HfModel m = read_model(file, top, model, vocab_size, sum);

  // tokenizer_config.json: clean-up and the extra special tokens.
  bool clean_up_spaces = true;  // transformers.js's default
  std::vector<int32_t> special_ids;
  for (const Added& a : m.added_tokens)
    if (a.special) special_ids.push_back(a.id);
  if (files.tokenizer_config) {
    const ConfigReader config(files.dir + "/tokenizer_config.json", *files.tokenizer_config);
    clean_up_spaces = config.flag("clean_up_tokenization_spaces", true);
    for (const std::string& token : config.token_list("additional_special_tokens"))
      if (auto it = m.t.id_of.find(token); it != m.t.id_of.end()) special_ids.push_back(it->second);
  }
  std::sort(special_ids.begin(), special_ids.end());
  special_ids.erase(std::unique(special_ids.begin(), special_ids.end()), special_ids.end());

  std::vector<std::string> pipeline;
  const auto normalizers = write_normalizers(fbb, top, pipeline, sum);
  pipeline.push_back("|");
  const auto pre_tokenizers = write_pre_tokenizers(fbb, top, m.unigram, pipeline, sum);
  pipeline.push_back(m.wordpiece ? "| WordPiece |" : m.unigram ? "| Unigram |" : "| BPE |");
  std::vector<int32_t> prefix_ids, suffix_ids;
  read_post_processor(top, m.t, prefix_ids, suffix_ids, pipeline);
  const auto decoders = write_decoders(fbb, top, m.unigram, pipeline);

  std::vector<flatbuffers::Offset<fb::HfAddedToken>> added_offsets;
  std::vector<std::string_view> added_contents;
  for (const Added& a : m.added_tokens) {
    added_offsets.push_back(fb::CreateHfAddedToken(fbb, a.id, fbb.CreateString(a.content), a.special, a.lstrip, a.rstrip,
                                                   a.single_word, a.normalized));
    if (!a.normalized) added_contents.push_back(a.content);
  }
  text::PieceTrie added_trie;
  added_trie.build(added_contents);  // distinct contents: no duplicate to report

  const int32_t unk_id = read_unk_id(model, m.unigram, m.scores, m.t);

  auto added_vector = fbb.CreateVector(added_offsets);
  auto normalizer_vector = fbb.CreateVector(normalizers);
  auto pre_vector = fbb.CreateVector(pre_tokenizers);
  auto decoder_vector = fbb.CreateVector(decoders);
  auto special_vector = fbb.CreateVector(special_ids);
  auto prefix_vector = fbb.CreateVector(prefix_ids);
  auto suffix_vector = fbb.CreateVector(suffix_ids);
  auto merge_vector = fbb.CreateVectorOfStructs(m.t.merges);
  auto merge_slots = fbb.CreateVector(m.t.merge_slots);
  auto token_slots = fbb.CreateVector(m.t.token_slots);
  flatbuffers::Offset<flatbuffers::Vector<const fb::PieceTrieNode*>> added_trie_nodes;
  flatbuffers::Offset<flatbuffers::Vector<uint8_t>> added_trie_labels;
  if (!added_contents.empty()) {
    added_trie_nodes = fbb.CreateVectorOfStructs(reinterpret_cast<const fb::PieceTrieNode*>(added_trie.nodes()),
                                                 added_trie.node_count());
    added_trie_labels = fbb.CreateVector(added_trie.labels(), added_trie.node_count());
  }
  flatbuffers::Offset<flatbuffers::String> prefix_string;
  if (m.wordpiece) prefix_string = fbb.CreateString(m.continuing_prefix);
  flatbuffers::Offset<flatbuffers::Vector<double>> score_vector;
  if (m.unigram) score_vector = fbb.CreateVector(m.scores);
  fb::HfTokenizerBuilder hb(fbb);
  hb.add_model(m.wordpiece ? fb::HfModelKind::WordPiece : m.unigram ? fb::HfModelKind::Unigram : fb::HfModelKind::Bpe);
  if (m.wordpiece) {
    hb.add_continuing_subword_prefix(prefix_string);
    hb.add_max_input_chars_per_word(m.max_input_chars);
  }
  if (m.unigram) {
    hb.add_scores(score_vector);
    hb.add_max_piece_bytes(m.max_piece_bytes);
  }
  hb.add_normalizers(normalizer_vector);
  hb.add_pre_tokenizers(pre_vector);
  hb.add_decoders(decoder_vector);
  hb.add_added_tokens(added_vector);
  hb.add_special_ids(special_vector);
  hb.add_prefix_ids(prefix_vector);
  hb.add_suffix_ids(suffix_vector);
  hb.add_unk_id(unk_id);
  hb.add_byte_fallback(model.flag("byte_fallback", false));
  hb.add_fuse_unk(!m.unigram && model.flag("fuse_unk", false));  // Unigram fuses in the model, per word
  hb.add_ignore_merges(model.flag("ignore_merges", false));
  hb.add_clean_up_spaces(clean_up_spaces);
  hb.add_merges(merge_vector);
  hb.add_merge_slots(merge_slots);
  hb.add_merge_max_probe(m.t.merge_max_probe);
  hb.add_token_slots(token_slots);
  hb.add_token_max_probe(m.t.token_max_probe);
  if (!added_contents.empty()) {
    hb.add_added_trie_nodes(added_trie_nodes);
    hb.add_added_trie_labels(added_trie_labels);
  }
  const auto hf = hb.Finish();

  TokenizerStrings strings(fbb, StringLayout::kSpans);
  const TokenizerStrings::Table vocab_table = strings.add(m.t.vocab);
  const auto blob = strings.blob();
  fb::TokenizerBuilder b(fbb);
  b.add_kind(fb::TokenizerKind::HuggingFace);
  TokenizerStrings::add_vocab(b, vocab_table);
  TokenizerStrings::add_blob(b, blob);
  b.add_unk_id(unk_id);
  b.add_hf(hf);
  if (summary != nullptr) {
    for (const std::string& step : pipeline) sum.pipeline += (sum.pipeline.empty() ? "" : " ") + step;
    *summary = sum;
  }
  return b.Finish();
}

void check_hf_regexes(const HfTokenizerFiles& files, const HfTokenizerSummary& summary) {
  for (const auto& [path, pattern] : summary.regexes) {
    auto compiled = text::SplitRegex::compile(pattern);
    if (!compiled) throw ConvertError(files.dir + "/tokenizer.json: " + path + ": " + compiled.error().message);
  }
}

HfTokenizerFiles read_hf_tokenizer_files(const std::string& dir) {
  HfTokenizerFiles files;
  files.dir = dir;
  files.tokenizer_json = read_text(dir + "/tokenizer.json", "");
  const std::string config = dir + "/tokenizer_config.json";
  if (file_exists(config)) files.tokenizer_config = read_text(config, "");
  return files;
}

std::vector<uint8_t> hf_tokenizer_buffer(const HfTokenizerFiles& files, uint32_t vocab_size,
                                         HfTokenizerSummary* summary) {
  flatbuffers::FlatBufferBuilder fbb(1 << 20);
  fbb.Finish(write_hf_tokenizer(fbb, files, vocab_size, summary));
  return {fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize()};
}

}  // namespace petrel::convert
