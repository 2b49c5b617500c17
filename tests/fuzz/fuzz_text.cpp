// Fuzz target: the engine's text path on arbitrary bytes. Two opus-mt-shaped models are
// converted in-process once (tiny random weights; real SentencePiece models from
// tests/fixtures/sentencepiece, trained by spm_train):
//   0: one vocabulary for both sides (every piece of both models), source unigram with
//      nmt_nfkc, byte fallback and >>xx<< language codes, target BPE with byte fallback;
//   1: separate source and target vocabularies, the source's missing every fifth normal
//      piece (encoded as <unk>), case-folding source, target without ▁ escaping, no
//      clean-up of tokenization spaces.
// The input's first byte picks the model and the options (bit 0 model, bit 1 beam 2,
// bit 2 streamed text, bit 3 sentence splitting); the rest is the text. It goes through
// tokenize/encode_text, the sentence splitter, Translator::translate_text (3 tokens)
// and BatchTranslator::translate_text (the text and its first half), and the input's
// bytes read as output ids go through decode_text/output_tokens. Everything must keep
// the API's promises — ids in range, text and pieces UTF-8, EOS last, errors only
// where documented — without a crash, a leak or a sanitizer report.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "convert/convert.h"
#include "convert/spm_model.h"
#include "exercise_model.h"
#include "marian_checkpoint.h"
#include "petrel/batch_translator.h"
#include "support/build_paths.h"
#include "text/sentence_splitter.h"

namespace {

using namespace petrel;
using detail::is_valid_utf8;
using fuzz::require;
using json = nlohmann::json;

struct TextModel {
  std::shared_ptr<const Model> model;
  std::unique_ptr<Translator> translator;
  std::unique_ptr<BatchTranslator> batch;
  int32_t source_eos = -1;  // "</s>" in the source vocabulary
};

std::vector<std::string> pieces_of(const convert::SpmModel& m) { return {m.pieces.begin(), m.pieces.end()}; }

json ids_of(const std::vector<std::string>& tokens) {
  json j = json::object();
  for (size_t i = 0; i < tokens.size(); ++i) j[tokens[i]] = i;
  return j;
}

int32_t id_in(const std::vector<std::string>& tokens, const std::string& token) {
  auto it = std::find(tokens.begin(), tokens.end(), token);
  require(it != tokens.end(), "the fixture vocabulary has the special tokens");
  return static_cast<int32_t>(it - tokens.begin());
}

// Writes checkpoint `kind` (see the top of the file), converts it and loads it.
TextModel build(int kind) {
  static const fuzz::ScratchDir scratch("petrel-fuzz-text");
  const std::string models = petrel::test::fixture_dir() + "/sentencepiece/models/";
  const std::string source_spm = models + (kind == 0 ? "unigram_nfkc_bytes_udf.spm" : "unigram_nfkc_cf.spm");
  const std::string target_spm = models + (kind == 0 ? "bpe_identity_bytes_udf.spm" : "bpe_noescape.spm");
  const convert::SpmModel source = convert::read_spm_model(source_spm);
  const convert::SpmModel target = convert::read_spm_model(target_spm);

  std::vector<std::string> vocab, target_vocab;
  if (kind == 0) {  // Marian's joint vocabulary: every piece of either model once
    vocab = pieces_of(source);
    for (std::string_view p : target.pieces)
      if (std::find(vocab.begin(), vocab.end(), p) == vocab.end()) vocab.emplace_back(p);
  } else {
    size_t normal = 0;
    for (size_t i = 0; i < source.pieces.size(); ++i)
      if (source.types[i] != text::PieceType::kNormal || ++normal % 5 != 0) vocab.emplace_back(source.pieces[i]);
    target_vocab = pieces_of(target);
    target_vocab.emplace_back("<pad>");
  }
  vocab.emplace_back("<pad>");
  const std::vector<std::string>& outputs = kind == 0 ? vocab : target_vocab;

  fuzz::MarianShape shape;
  shape.vocab = static_cast<uint32_t>(vocab.size());
  shape.target_vocab = static_cast<uint32_t>(outputs.size());
  shape.positions = 128;
  shape.shared = shape.tied = kind == 0;
  shape.logits_bias = true;
  uint64_t state = 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(kind);
  auto next = [&state] {  // xorshift64*, values in [-0.5, 0.5)
    state ^= state >> 12, state ^= state << 25, state ^= state >> 27;
    return static_cast<float>((state * 0x2545f4914f6cdd1dull) >> 40) / float(1 << 24) - 0.5f;
  };
  const int32_t pad = id_in(outputs, "<pad>"), eos = id_in(outputs, "</s>");
  const json config = {{"model_type", "marian"}, {"d_model", shape.d}, {"encoder_layers", 1}, {"decoder_layers", 1},
                       {"encoder_attention_heads", 2}, {"decoder_attention_heads", 2}, {"encoder_ffn_dim", shape.ffn},
                       {"decoder_ffn_dim", shape.ffn}, {"vocab_size", shape.vocab},
                       {"decoder_vocab_size", shape.target_vocab}, {"max_position_embeddings", shape.positions},
                       {"scale_embedding", true}, {"activation_function", "swish"}, {"pad_token_id", pad},
                       {"eos_token_id", eos}, {"decoder_start_token_id", pad}, {"tie_word_embeddings", shape.tied},
                       {"share_encoder_decoder_embeddings", shape.shared}, {"bad_words_ids", {{pad}}}};
  const std::string dir = scratch.dir() + "/model" + std::to_string(kind);
  std::filesystem::create_directory(dir);
  fuzz::write_file(dir + "/config.json", config.dump());
  fuzz::write_file(dir + "/model.safetensors", fuzz::safetensors(fuzz::marian_tensors(shape, next)));
  fuzz::write_file(dir + "/source.spm", fuzz::read_file(source_spm));
  fuzz::write_file(dir + "/target.spm", fuzz::read_file(target_spm));
  fuzz::write_file(dir + "/vocab.json", ids_of(vocab).dump());
  if (kind == 1) {
    fuzz::write_file(dir + "/target_vocab.json", ids_of(target_vocab).dump());
    fuzz::write_file(dir + "/tokenizer_config.json", R"({"clean_up_tokenization_spaces": false})");
  }
  convert::ConvertOptions o;
  o.checkpoint_dir = dir;
  o.output_path = dir + ".petrel";
  o.linear_dtype = o.embedding_dtype = kind == 0 ? DType::kF32 : DType::kInt8;
  convert::convert_checkpoint(o);
  auto loaded = Model::load(o.output_path);
  require(loaded.has_value(), "the text model loads");
  TextModel m;
  m.model = loaded.value();
  require(m.model->info().has_text_tokenizer && m.model->info().tokenizer.kind == "marian", "a Marian tokenizer");
  m.source_eos = id_in(vocab, "</s>");
  auto translator = Translator::create(m.model, {"", 1});
  auto batch = BatchTranslator::create(m.model, {"", 1}, 1);
  require(translator.has_value() && batch.has_value(), "translators are created");
  m.translator = std::make_unique<Translator>(std::move(translator.value()));
  m.batch = std::make_unique<BatchTranslator>(std::move(batch.value()));
  return m;
}

TextModel& text_model(int kind) {
  static std::map<int, TextModel> models;
  auto it = models.find(kind);
  if (it == models.end()) it = models.emplace(kind, build(kind)).first;
  return it->second;
}

void require_text_hypotheses(const ModelInfo& info, const TextTranslation& t) {
  for (const TextHypothesis& h : t.hypotheses) {
    require(is_valid_utf8(h.text), "translations are UTF-8");
    require(h.pieces.size() == h.ids.size(), "a token per output id");
    for (const std::string& p : h.pieces) require(is_valid_utf8(p), "output tokens are UTF-8");
    for (int32_t id : h.ids)
      require(id >= 0 && static_cast<uint32_t>(id) < info.target_vocab_size, "outputs are target ids");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t control = data[0];
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  TextModel& m = text_model(control & 1);
  const Model& model = *m.model;
  const ModelInfo& info = model.info();

  // Text -> tokens: any bytes are accepted.
  auto tokens = tokenize(model, text);
  require(tokens.has_value(), "any text tokenizes");
  const TokenizedText& t = tokens.value();
  require(!t.ids.empty() && t.ids.size() == t.pieces.size(), "a piece per id, EOS included");
  require(t.ids.back() == m.source_eos, "EOS last");
  for (int32_t id : t.ids) require(id >= 0 && static_cast<uint32_t>(id) < info.vocab_size, "text encodes to source ids");
  for (const std::string& p : t.pieces) require(is_valid_utf8(p), "pieces are UTF-8");
  auto ids = encode_text(model, text);
  require(ids.has_value() && ids.value() == t.ids, "encode_text gives tokenize's ids");

  // Bytes as output ids, some past the target vocabulary: text or a refusal.
  std::vector<int32_t> outputs;
  for (size_t i = 1; i + 1 < size && outputs.size() < 64; i += 2)
    outputs.push_back(static_cast<int32_t>((data[i] | data[i + 1] << 8) % (info.target_vocab_size + 3)));
  const bool in_range = std::all_of(outputs.begin(), outputs.end(),
                                    [&](int32_t id) { return static_cast<uint32_t>(id) < info.target_vocab_size; });
  auto decoded = decode_text(model, outputs);
  auto output_pieces = output_tokens(model, outputs);
  require(decoded.has_value() == in_range && output_pieces.has_value() == in_range, "ids in range decode, others not");
  if (in_range) {
    require(is_valid_utf8(decoded.value()), "decoded text is UTF-8");
    for (const std::string& p : output_pieces.value()) require(is_valid_utf8(p), "output tokens are UTF-8");
  } else {
    require(decoded.error().code == ErrorCode::kInvalidArgument, "an id out of range is an invalid argument");
  }

  // Sentences: ordered spans inside the text.
  size_t previous_end = 0;
  for (const text::SentenceSpan& s : text::split_sentences(text)) {
    require(s.begin >= previous_end && s.begin < s.end && s.end <= text.size(), "sentences are ordered spans");
    previous_end = s.end;
  }

  TranslateOptions options;
  options.beam_size = control & 2 ? 2 : 1;
  options.max_new_tokens = 3;
  std::map<size_t, std::string> shown;
  if (control & 4) {
    options.stream_text = true;
    options.on_token = [&](const TokenEvent& e) {
      if (e.text_restarted) shown[e.input].clear();
      shown[e.input] += std::string(e.text_delta);
      require(shown[e.input] == e.text, "streamed text deltas add up to the text");
      require(is_valid_utf8(e.piece), "streamed pieces are UTF-8");
      return true;
    };
  }
  auto translated = m.translator->translate_text({text}, options);
  if (t.ids.size() > info.max_positions) {
    require(!translated.has_value() && translated.error().code == ErrorCode::kInvalidArgument,
            "a text too long for the model is refused");
  } else {
    require(translated.has_value() && translated.value().size() == 1, "a text the model can read translates");
    const TextTranslation& tr = translated.value()[0];
    require(tr.input.ids == t.ids, "the translated input is the tokenized text");
    require_text_hypotheses(info, tr);
    if (options.stream_text && !tr.hypotheses.empty())
      require(shown[0] == tr.hypotheses[0].text, "the streamed text is the translation");
  }

  // Many texts at once, in input order; with splitting, long texts go sentence by sentence.
  // Translation costs per sentence, not per byte: the batch gets the text's first 8 KB
  // (the passes over the whole text ran above), so a megabyte of short sentences stays
  // within the fuzzer's time limit.
  const std::string head = text.substr(0, 8192);
  BatchOptions batching;
  batching.max_batch_tokens = 96;
  batching.split_sentences = control & 8;
  options.on_token = nullptr;
  options.stream_text = false;
  size_t delivered = 0;
  const Status status = m.batch->translate_text(
      {head, head.substr(0, head.size() / 2)}, options, batching, [&](size_t index, Result<TextTranslation>&& r) {
        require(index == delivered++, "results come in input order");
        if (r) {
          require_text_hypotheses(info, r.value());
        } else {
          require(r.error().code == ErrorCode::kInvalidArgument, "a text is refused only as too long");
        }
      });
  require(status.has_value() && delivered == 2, "every input gets its result");
  return 0;
}
