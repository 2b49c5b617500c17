// What the model fuzz targets do with a model the loader accepted: check the promises
// the loader makes to the rest of the engine, verify the data checksum, and run what
// an app runs — a short greedy and a short beam decode on every kernel path this CPU
// has (f32 and f16 KV cache), with and without the file's shortlist, text in and out
// when the file carries a tokenizer. A broken promise aborts, which the fuzzer reports
// like a crash; so does any crash, leak or sanitizer report on the way.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/utf8.h"
#include "petrel/generator.h"
#include "petrel/translator.h"

namespace petrel::fuzz {

inline void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz target: broken promise: %s\n", what);
  std::abort();
}

inline void require_loader_promises(const ModelInfo& info) {
  // Heads: d_model / num_heads each (encoder-decoder), or head_dim each over num_kv_heads
  // K/V heads that divide them (decoder-only: grouped-query attention).
  require(info.d_model > 0 && info.num_heads > 0 && info.head_dim > 0 && info.num_kv_heads > 0 &&
              info.num_heads % info.num_kv_heads == 0,
          "head counts and widths are positive, K/V heads divide the query heads");
  require(info.decoder_only || (info.num_kv_heads == info.num_heads && info.num_heads * info.head_dim == info.d_model),
          "encoder-decoder heads divide d_model");
  for (int32_t id : info.lm.eos_ids) require(id >= 0 && static_cast<uint32_t>(id) < info.vocab_size, "EOS ids are tokens");
  require(info.vocab_size > 0 && info.target_vocab_size > 0 && info.max_positions > 0, "sizes are positive");
  for (int32_t id : {info.pad_id, info.eos_id, info.decoder_start_id})
    require(id >= 0 && static_cast<uint32_t>(id) < info.target_vocab_size, "special tokens are target ids");
  for (int32_t id : info.bad_word_ids)
    require(id >= 0 && static_cast<uint32_t>(id) < info.target_vocab_size, "bad words are target ids");
  require(info.vocab.empty() || info.vocab.size() == info.vocab_size, "the vocabulary covers the source ids");
  // Every string handed out is UTF-8 (so JSON writers and C callers get text).
  using detail::is_valid_utf8;
  bool text = is_valid_utf8(info.producer) && is_valid_utf8(info.source) && is_valid_utf8(info.shortlist.source) &&
              is_valid_utf8(info.model_type);
  for (const auto& t : info.tensors) text = text && is_valid_utf8(t.name);
  for (const auto& token : info.vocab) text = text && is_valid_utf8(token);
  const TokenizerInfo& tokenizer = info.tokenizer;
  text = text && is_valid_utf8(tokenizer.source.normalizer) && is_valid_utf8(tokenizer.target.normalizer);
  for (const auto& code : tokenizer.language_codes) text = text && is_valid_utf8(code);
  for (const auto& f : info.folds) {
    text = text && is_valid_utf8(f.what) && is_valid_utf8(f.note);
    for (const auto& target : f.targets) text = text && is_valid_utf8(target);
  }
  require(text, "every string is valid UTF-8");
}

// Two sentences of source ids at the vocabulary's edges, no longer than the model allows.
inline std::vector<std::vector<int32_t>> inputs_for(const ModelInfo& info) {
  const auto v = static_cast<int32_t>(info.vocab_size);
  std::vector<std::vector<int32_t>> batch = {{v - 1, 0, v / 2, v / 3}, {v / 5}};
  for (auto& ids : batch)
    if (ids.size() > info.max_positions) ids.resize(info.max_positions);
  return batch;
}

inline void translate(Translator& translator, const Model& model, const std::vector<std::vector<int32_t>>& batch,
                      const TranslateOptions& options) {
  const ModelInfo& info = model.info();
  auto result = translator.translate(batch, options);
  if (!result) {
    // The only failure a loaded model may cause: weights that compute NaN or infinity.
    require(result.error().code == ErrorCode::kFormat, "a loaded model translates or reports non-finite scores");
    return;
  }
  require(result.value().size() == batch.size(), "one translation per input");
  for (const Translation& t : result.value()) {
    require(t.hypotheses.size() <= options.n_best, "at most n-best hypotheses");
    for (const Hypothesis& h : t.hypotheses) {
      require(h.ids.size() <= options.max_new_tokens, "at most max_new_tokens tokens");
      require(h.alignment.size() == (options.alignment ? h.ids.size() + h.ended_on_eos : 0),
              "an alignment row per output token (EOS included), when asked for");
      for (int32_t id : h.ids)
        require(id >= 0 && static_cast<uint32_t>(id) < info.target_vocab_size, "outputs are target ids");
      if (info.has_text_tokenizer) {
        auto text = decode_text(model, h.ids);
        require(text.has_value() && detail::is_valid_utf8(text.value()), "output ids decode to UTF-8 text");
        auto tokens = output_tokens(model, h.ids);
        require(tokens.has_value() && tokens.value().size() == h.ids.size(), "output ids have tokens");
        for (const std::string& token : tokens.value()) require(detail::is_valid_utf8(token), "output tokens are UTF-8");
      }
    }
  }
}

// Everything above on a model the loader accepted, on the given kernel paths.
inline void exercise(const std::shared_ptr<const Model>& loaded,
                     const std::vector<std::string>& isas = petrel::runnable_isas()) {
  const Model& model = *loaded;
  const ModelInfo& info = model.info();
  require_loader_promises(info);
  const Status verified = model.verify_data();  // the checksum: present and right, wrong, or absent
  require(verified || verified.error().code == (info.data_crc32 ? ErrorCode::kFormat : ErrorCode::kUnsupported),
          "verify_data reports a mismatch or a missing checksum");

  std::vector<std::vector<int32_t>> batch = inputs_for(info);
  if (info.has_text_tokenizer) {
    // Text through the file's tokenizer: known words, unknown ones (spelled as
    // characters or refused), multi-byte and broken UTF-8.
    // (A Marian C++ model's vocabulary is its tokenizer's pieces: ModelInfo::vocab is empty.)
    const std::string last_token(info.vocab.empty() ? std::string_view("\xe2\x96\x81the") : info.vocab.back());
    for (const char* text : {"w1 w2", "\xc3\xa4 x\xff", ">>fr\xc3<< the \xef\xbc\xa1 </s>", last_token.c_str()}) {
      auto ids = encode_text(model, text);
      if (!ids) continue;
      for (int32_t id : ids.value())
        require(id >= 0 && static_cast<uint32_t>(id) < info.vocab_size, "text encodes to source ids");
      auto tokens = tokenize(model, text);
      require(tokens.has_value() && tokens.value().ids == ids.value(), "tokenize gives encode_text's ids");
      for (const std::string& piece : tokens.value().pieces) require(detail::is_valid_utf8(piece), "pieces are UTF-8");
      if (!ids.value().empty() && ids.value().size() <= info.max_positions) batch.push_back(ids.value());
    }
  }

  // Pads are masked as transformers masks them (pad != EOS): an input of nothing but pads
  // leaves nothing to translate and is refused by name, not a model's failure.
  if (info.pad_id != info.eos_id)
    batch.erase(std::remove_if(batch.begin(), batch.end(),
                               [&](const std::vector<int32_t>& ids) {
                                 return std::all_of(ids.begin(), ids.end(), [&](int32_t id) { return id == info.pad_id; });
                               }),
                batch.end());
  if (batch.empty()) return;  // every probe input was pads: nothing left to run

  const size_t steps = std::min<size_t>(3, info.max_positions);
  if (info.decoder_only) {  // a language model generates: greedy, and sampling with every filter
    GenerateOptions greedy_lm, sampled;
    greedy_lm.max_new_tokens = sampled.max_new_tokens = steps;
    greedy_lm.do_sample = false;
    sampled.do_sample = true;
    sampled.top_k = 5u;
    sampled.top_p = 0.9f;
    sampled.min_p = 0.05f;
    sampled.repetition_penalty = 1.3f;
    sampled.kv_cache_f16 = true;
    for (const std::string& isa : isas) {
      auto created = Generator::create(loaded, {isa, 1});
      require(created.has_value(), "a generator on every runnable kernel path");
      for (const GenerateOptions* o : {&greedy_lm, &sampled}) {
        auto result = created.value().generate(batch, *o);
        if (!result) {
          require(result.error().code == ErrorCode::kFormat || result.error().code == ErrorCode::kInvalidArgument,
                  "a loaded language model generates, or reports non-finite logits or a prompt too long");
          continue;
        }
        for (const Generation& g : result.value())
          for (int32_t id : g.ids) require(id >= 0 && static_cast<uint32_t>(id) < info.vocab_size, "generated ids are tokens");
      }
    }
    return;
  }
  TranslateOptions greedy;
  greedy.beam_size = 1;
  greedy.max_new_tokens = steps;
  TranslateOptions beam;
  beam.beam_size = 3;
  beam.n_best = 2;
  beam.max_new_tokens = steps;
  beam.min_new_tokens = 1;
  beam.kv_cache_f16 = true;
  beam.alignment = true;  // the layer the file names (checked at load), else the last
  for (const std::string& isa : isas) {
    // A file with static int8 activation scales (a Marian model's alphas) runs with them.
    TranslatorOptions to{isa, 1};
    if (info.static_activation_scales) to.activation_scales = ActivationScales::kFile;
    auto created = Translator::create(loaded, to);
    require(created.has_value(), "a translator on every runnable kernel path");
    for (bool shortlist : {false, true}) {
      if (shortlist && !info.shortlist.present) continue;
      greedy.use_shortlist = beam.use_shortlist = shortlist;
      translate(created.value(), model, batch, greedy);
      translate(created.value(), model, batch, beam);
    }
  }
}

}  // namespace petrel::fuzz
