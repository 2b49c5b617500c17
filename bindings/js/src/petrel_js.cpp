// The WebAssembly side of Petrel's JavaScript package (bindings/js): flat functions over
// the C++ API (translation, and generation with language models) that petrel.mjs calls,
// so JavaScript never guesses a struct's layout.
// Every function reports failure by its return value (0 / NULL) and leaves the status
// name's number and the engine's message for pjs_last_code / pjs_last_error; nothing
// here throws, prints or aborts.
#include <emscripten/emscripten.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "petrel/batch_translator.h"
#include "petrel/generator.h"
#include "petrel/model.h"
#include "petrel/translator.h"
#include "petrel/types.h"

using namespace petrel;

// Streaming: hands one step of a translation or a generation to the JavaScript callback of
// the running call (petrel.mjs sets Module.__petrelToken). Returns 0 to stop that input.
// ES5 only: emscripten 3.1.6's minifier mangles newer syntax.
EM_JS(int, pjs_emit_token,
      (int input, const int32_t* ids, int length, const char* piece, int piece_length, const char* text,
       int text_length, const char* delta, int delta_length, int restarted, int final_, int provisional),
      {
        var hook = Module["__petrelToken"];
        if (!hook) return 1;
        var idList = [];
        for (var i = 0; i < length; i++) idList.push(HEAP32[(ids >> 2) + i]);
        function str(ptr, len) { return len > 0 ? UTF8ArrayToString(HEAPU8, ptr, len) : ""; }
        return hook({
          input: input,
          ids: idList,
          piece: str(piece, piece_length),
          text: str(text, text_length),
          delta: str(delta, delta_length),
          restarted: !!restarted,
          final: !!final_,
          provisional: !!provisional
        }) ? 1 : 0;
      });

namespace {

int last_code = 0;
std::string last_message;
// Intra-op threads of every model loaded from now on (pjs_set_threads).
size_t model_threads = 1;

void clear_error() {
  last_code = 0;
  last_message.clear();
}

void fail(const Error& e) {
  last_code = static_cast<int>(e.code);
  last_message = e.message;
}

void fail(ErrorCode code, const std::string& message) { fail(Error{code, message}); }

// Runs `body`, turning an escaping exception (std::bad_alloc) into an error.
template <class T, class Body>
T guarded(T on_error, Body body) {
  try {
    clear_error();
    return body();
  } catch (const std::bad_alloc&) {
    fail(ErrorCode::kOutOfMemory, "out of memory");
  } catch (const std::exception& e) {
    fail(ErrorCode::kInternal, std::string("unexpected error: ") + e.what());
  } catch (...) {
    fail(ErrorCode::kInternal, "unexpected error");
  }
  return on_error;
}

// --- JSON (ModelInfo) -----------------------------------------------------------------

void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

struct JsonObject {
  std::string& out;
  bool first = true;
  explicit JsonObject(std::string& o) : out(o) { out += '{'; }
  ~JsonObject() { out += '}'; }
  void key(const char* k) {
    if (!first) out += ',';
    first = false;
    json_string(out, k);
    out += ':';
  }
  void str(const char* k, const std::string& v) { key(k); json_string(out, v); }
  void num(const char* k, double v) {
    key(k);
    if (!std::isfinite(v)) { out += "null"; return; }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    out += buf;
  }
  void integer(const char* k, long long v) { key(k); out += std::to_string(v); }
  void boolean(const char* k, bool v) { key(k); out += v ? "true" : "false"; }
  void strings(const char* k, const std::vector<std::string>& v) {
    key(k);
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ',';
      json_string(out, v[i]);
    }
    out += ']';
  }
};

// A float32 as the shortest text that reads back as the same float; null when not finite
// (petrel.mjs turns it back into NaN).
void json_float(std::string& out, double v) {
  if (!std::isfinite(v)) { out += "null"; return; }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  out += buf;
}

void json_range(std::string& out, const TextRange& r) {
  out += '[';
  out += std::to_string(r.begin);
  out += ',';
  out += std::to_string(r.end);
  out += ']';
}

void json_ranges(std::string& out, const std::vector<TextRange>& ranges) {
  out += '[';
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (i) out += ',';
    json_range(out, ranges[i]);
  }
  out += ']';
}

// A text translation as bergamot's Response holds it: the sentences' byte ranges and
// tokens, the alignments and quality scores when asked, the source markup in html mode.
std::string sentences_json(const TextTranslation& t, bool html, bool alignment, bool quality) {
  std::string out;
  {
  JsonObject o(out);
  if (html) o.str("source", t.source_html);
  o.key("sentences");
  out += '[';
  for (size_t k = 0; k < t.sentences.size(); ++k) {
    const SentenceTranslation& s = t.sentences[k];
    if (k) out += ',';
    JsonObject sentence(out);
    sentence.key("source");
    json_range(out, s.source);
    sentence.key("target");
    json_range(out, s.target);
    sentence.key("sourceTokens");
    json_ranges(out, s.source_tokens);
    sentence.key("targetTokens");
    json_ranges(out, s.target_tokens);
  }
  out += ']';
  if (alignment) {
    o.key("alignments");
    out += '[';
    for (size_t k = 0; k < t.sentences.size(); ++k) {
      if (k) out += ',';
      out += '[';
      const auto& rows = t.sentences[k].alignment;
      for (size_t r = 0; r < rows.size(); ++r) {
        if (r) out += ',';
        out += '[';
        for (size_t c = 0; c < rows[r].size(); ++c) {
          if (c) out += ',';
          json_float(out, rows[r][c]);
        }
        out += ']';
      }
      out += ']';
    }
    out += ']';
  }
  if (quality) {
    o.key("qualityScores");
    out += '[';
    for (size_t k = 0; k < t.sentences.size(); ++k) {
      if (k) out += ',';
      const std::optional<SentenceQuality>& q = t.sentences[k].quality;
      if (!q) { out += "null"; continue; }
      JsonObject score(out);
      score.key("sentenceScore");
      json_float(out, q->score);
      score.key("wordScores");
      out += '[';
      for (size_t w = 0; w < q->word_scores.size(); ++w) {
        if (w) out += ',';
        json_float(out, q->word_scores[w]);
      }
      out += ']';
      score.key("wordByteRanges");
      json_ranges(out, q->words);
      score.key("wordTokenRanges");
      json_ranges(out, q->word_tokens);
    }
    out += ']';
  }
  }  // closes the object
  return out;
}

void json_ids(std::string& out, const std::vector<int32_t>& ids) {
  out += '[';
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(ids[i]);
  }
  out += ']';
}

// max_prompt_bytes: a language model's Generator::max_prompt_bytes.
std::string info_json(const ModelInfo& info, size_t max_prompt_bytes) {
  std::string out;
  { JsonObject o(out);
  o.str("format", std::to_string(info.format_major) + "." + std::to_string(info.format_minor));
  o.str("producer", info.producer);
  o.str("source", info.source);
  o.str("architecture", info.architecture);
  o.str("family", info.tokenizer.family.empty() ? info.tokenizer.kind : info.tokenizer.family);
  o.integer("d_model", info.d_model);
  o.integer("num_heads", info.num_heads);
  o.integer("ffn_dim", info.ffn_dim);
  o.integer("encoder_layers", info.encoder_layers);
  o.integer("decoder_layers", info.decoder_layers);
  o.integer("ssru_layers", info.ssru_layers);
  o.integer("max_positions", info.max_positions);
  o.integer("vocab_size", info.vocab_size);
  o.integer("target_vocab_size", info.target_vocab_size);
  o.str("activation", to_string(info.activation));
  o.str("norm", to_string(info.norm));
  o.integer("eos_id", info.eos_id);
  o.integer("pad_id", info.pad_id);
  o.integer("decoder_start_id", info.decoder_start_id);
  // The dtypes of the weights: every distinct one, the most common first ("dtype").
  std::vector<std::pair<std::string, uint64_t>> dtypes;
  for (const TensorInfo& t : info.tensors) {
    const std::string name = to_string(t.dtype);
    bool found = false;
    for (auto& d : dtypes)
      if (d.first == name) { d.second += t.bytes; found = true; }
    if (!found) dtypes.push_back({name, t.bytes});
  }
  std::vector<std::string> dtype_names;
  while (!dtypes.empty()) {
    size_t best = 0;
    for (size_t i = 1; i < dtypes.size(); ++i)
      if (dtypes[i].second > dtypes[best].second) best = i;
    dtype_names.push_back(dtypes[best].first);
    dtypes.erase(dtypes.begin() + static_cast<std::ptrdiff_t>(best));
  }
  o.str("dtype", dtype_names.empty() ? std::string() : dtype_names.front());
  o.strings("dtypes", dtype_names);
  o.boolean("has_tokenizer", info.has_text_tokenizer);
  o.str("tokenizer", info.tokenizer.kind);
  const bool multilingual = !info.tokenizer.family.empty();
  o.boolean("multilingual", multilingual);
  o.strings("languages", multilingual ? info.tokenizer.language_codes : std::vector<std::string>{});
  o.str("default_source_language", info.tokenizer.default_source_language);
  o.boolean("shortlist", info.shortlist.present);
  o.boolean("shortlist_by_default", info.shortlist.by_default);
  o.integer("num_beams", info.generation.num_beams);
  o.integer("max_length", info.generation.max_length);
  o.num("length_penalty", info.generation.length_penalty);
  o.num("max_length_factor", info.generation.max_length_factor);
  o.integer("file_size", static_cast<long long>(info.file_size));
  o.integer("parameter_count", static_cast<long long>(info.parameter_count));
  o.boolean("checksum", info.data_crc32.has_value());
  // Language models (decoder-only): their shape and generation_config.json's defaults.
  o.boolean("decoder_only", info.decoder_only);
  o.str("model_type", info.model_type);
  o.integer("num_kv_heads", info.num_kv_heads);
  o.integer("head_dim", info.head_dim);
  o.integer("sliding_window_layers", info.sliding_window_layers);
  o.key("lm");
  if (!info.decoder_only) {
    out += "null";
  } else {
    const LanguageModelDefaults& lm = info.lm;
    JsonObject d(out);
    d.integer("bos_id", lm.bos_id);
    d.key("eos_ids");
    json_ids(out, lm.eos_ids);
    d.boolean("do_sample", lm.do_sample);
    d.key("temperature");
    json_float(out, lm.temperature);
    d.integer("top_k", lm.top_k);
    d.key("top_p");
    json_float(out, lm.top_p);
    d.key("min_p");
    json_float(out, lm.min_p);
    d.key("repetition_penalty");
    json_float(out, lm.repetition_penalty);
    d.integer("max_new_tokens", lm.max_new_tokens);
    d.boolean("has_chat_template", !lm.chat_template.empty());
    d.str("chat_template", lm.chat_template);
    d.str("bos_token", lm.bos_token);
    d.str("eos_token", lm.eos_token);
    d.strings("special_tokens", info.tokenizer.special_tokens);
    d.integer("max_prompt_bytes", static_cast<long long>(max_prompt_bytes));
  }
  }  // closes the object
  return out;
}

}  // namespace

struct PjsModel;

// A conversation with a language model (petrel::Conversation over its model's Generator),
// owned by that model: freeing the model frees its conversations first.
struct PjsChat {
  PjsModel* owner;
  Conversation conversation;
  std::string messages;  // pjs_chat_messages' JSON, valid until the next call
};

struct PjsModel {
  std::shared_ptr<const Model> model;
  std::optional<Translator> translator;  // a translation model's
  std::optional<BatchTranslator> batch;  // sentence splitting; made on first use
  std::optional<Generator> generator;    // a language model's (decoder-only)
  std::vector<std::unique_ptr<PjsChat>> chats;  // after generator: destroyed before it
  std::string name;  // loadModel's: for messages
  std::string info;
  TranslatorOptions options;  // as requested (isa "": the best), for the batch translator too
  std::shared_ptr<TranslationCache> cache;  // loadModel's cacheBytes; null: none
  std::shared_ptr<const Model> draft;       // pjs_set_draft_model's; a batch translator made later takes it too
  std::string speculation;                  // pjs_translate_speculation's JSON of the last translation
};

// A generation's text and the rest of it as JSON (ids, how it ended, token counts, timings).
struct PjsGeneration {
  std::string text;
  std::string json;
};

struct PjsResult {
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> ids;
  std::vector<double> scores;
  std::vector<int> eos;     // the translation ended on EOS (not on the length limit)
  std::vector<int> status;  // 0, or the ErrorCode of this input's own error (split mode)
  std::vector<std::string> errors;
  std::vector<std::string> sentences;  // per input: sentences_json
};

namespace {
// Speculative decoding's counts as JSON (verifications, draftedTokens, acceptedTokens,
// draftModelTokens); draft_model_tokens < 0: not counted (a batch translator's totals).
std::string speculation_json(size_t verifications, size_t drafted, size_t accepted, long long draft_model_tokens) {
  return "{\"verifications\":" + std::to_string(verifications) + ",\"draftedTokens\":" + std::to_string(drafted) +
         ",\"acceptedTokens\":" + std::to_string(accepted) +
         (draft_model_tokens >= 0 ? ",\"draftModelTokens\":" + std::to_string(draft_model_tokens) : std::string()) + "}";
}
}  // namespace

extern "C" {

EMSCRIPTEN_KEEPALIVE const char* pjs_version() { return library_version(); }
EMSCRIPTEN_KEEPALIVE int pjs_last_code() { return last_code; }
EMSCRIPTEN_KEEPALIVE const char* pjs_last_error() { return last_message.c_str(); }

// The threads each model loaded from now on computes with (the caller's included); more
// than 1 only in the threaded module (emscripten pthreads). Returns 0 when refused.
EMSCRIPTEN_KEEPALIVE int pjs_set_threads(int threads) {
  clear_error();
#if defined(__EMSCRIPTEN_PTHREADS__)
  const int limit = 1024;
#else
  const int limit = 1;
#endif
  if (threads < 1 || threads > limit) {
    fail(ErrorCode::kInvalidArgument, "threads must be in 1.." + std::to_string(limit) +
                                          (limit == 1 ? " in the single-threaded module" : "") + ", got " +
                                          std::to_string(threads));
    return 0;
  }
  model_threads = static_cast<size_t>(threads);
  return 1;
}

EMSCRIPTEN_KEEPALIVE void* pjs_buffer_alloc(size_t size) {
  return guarded<void*>(nullptr, [&]() -> void* {
    void* p = Model::allocate_buffer(size);
    if (!p) fail(ErrorCode::kOutOfMemory, "out of memory: cannot allocate " + std::to_string(size) + " bytes for the model");
    return p;
  });
}
EMSCRIPTEN_KEEPALIVE void pjs_buffer_free(void* buffer) { Model::free_buffer(buffer); }

// Takes over `buffer` (freed at once when loading fails).
// isa: NULL or "" for the best kernel path ("simd128"), or "scalar"; activation_scales:
// 0 dynamic, 1 the file's (a Marian int8 model's alphas).
EMSCRIPTEN_KEEPALIVE PjsModel* pjs_model_load(void* buffer, size_t size, const char* name, const char* isa,
                                              int activation_scales, double cache_bytes) {
  return guarded<PjsModel*>(nullptr, [&]() -> PjsModel* {
    // The name is copied before load_from_buffer owns the buffer: free it if that throws.
    std::string model_name;
    try {
      model_name = name && *name ? name : "<memory>";
    } catch (...) {
      Model::free_buffer(buffer);
      throw;
    }
    auto loaded = Model::load_from_buffer(buffer, size, model_name);
    if (!loaded) { fail(loaded.error()); return nullptr; }
    TranslatorOptions t;
    if (isa) t.isa = isa;
    t.threads = model_threads;
    t.activation_scales = activation_scales == 1 ? ActivationScales::kFile : ActivationScales::kDynamic;
    auto handle = std::make_unique<PjsModel>();
    handle->options = t;
    if (loaded.value()->info().decoder_only) {  // a language model: it generates
      if (cache_bytes > 0) {
        fail(ErrorCode::kInvalidArgument, model_name + " is a language model: cacheBytes keeps translated sentences "
                                          "(setPromptCacheBytes keeps a language model's prompts)");
        return nullptr;
      }
      auto created = Generator::create(loaded.value(), t);
      if (!created) { fail(created.error()); return nullptr; }
      handle->generator.emplace(std::move(created.value()));
    } else {
      auto created = Translator::create(loaded.value(), t);
      if (!created) { fail(created.error()); return nullptr; }
      handle->translator.emplace(std::move(created.value()));
      if (cache_bytes > 0) handle->cache = TranslationCache::create(static_cast<size_t>(cache_bytes));
    }
    handle->model = std::move(loaded.value());
    handle->name = model_name;
    handle->info = info_json(handle->model->info(), handle->generator ? handle->generator->max_prompt_bytes() : 0);
    return handle.release();
  });
}

EMSCRIPTEN_KEEPALIVE const char* pjs_model_info(PjsModel* m) { return m->info.c_str(); }
EMSCRIPTEN_KEEPALIVE void pjs_model_free(PjsModel* m) { delete m; }
EMSCRIPTEN_KEEPALIVE const char* pjs_model_isa(PjsModel* m) {
  return m->translator ? m->translator->isa() : m->generator->isa();
}
// The threads the model computes with: pjs_set_threads' count, or fewer when the module's
// Workers were all taken by other models.
EMSCRIPTEN_KEEPALIVE int pjs_model_threads(PjsModel* m) {
  return static_cast<int>(m->translator ? m->translator->threads() : m->generator->threads());
}
// The translation cache's counters as JSON ("null" without a cache); valid until the next call.
EMSCRIPTEN_KEEPALIVE const char* pjs_model_cache_stats(PjsModel* m) {
  static std::string json;
  if (!m->cache) return "null";
  const TranslationCache::Stats st = m->cache->stats();
  json = "{\"hits\":" + std::to_string(st.hits) + ",\"misses\":" + std::to_string(st.misses) +
         ",\"entries\":" + std::to_string(st.entries) + ",\"bytes\":" + std::to_string(st.bytes) + "}";
  return json.c_str();
}

// Translates `count` texts as one batch (split = 0, html = 0), or sentence by sentence
// through the batch translator (split != 0 or html != 0; each input may fail alone).
// Unset options: max_new 0, min_new 0, length_penalty NaN, shortlist 0 (the model's),
// languages NULL, split_mode -1 (split != 0: the text's sentences anywhere; html: lines
// as paragraphs), max_length_factor NaN, quality_model NULL (the free estimator).
// split_mode: 0 sentence per line, 1 paragraph per line, 2 wrapped text (bergamot's
// ssplit-mode sentence / paragraph / wrapped_text).
// second: NULL, or the model that translates m's translation on (source -> pivot -> target
// in one call, bergamot's translateViaPivoting: petrel::translate_via_pivot); it may be m.
EMSCRIPTEN_KEEPALIVE PjsResult* pjs_translate(PjsModel* m, PjsModel* second, const char* const* texts, int count, int beam,
                                              int max_new, int min_new, double length_penalty, int shortlist,
                                              int kv_f16, const char* source_language, const char* target_language,
                                              int stream, int split, int split_mode, int html, int quality,
                                              int alignment, const void* quality_model, size_t quality_model_size,
                                              double max_length_factor, int limit_by_longest,
                                              int shortlist_of_input, int lookup_ngram, int max_draft_tokens) {
  return guarded<PjsResult*>(nullptr, [&]() -> PjsResult* {
    for (PjsModel* used : {m, second})
      if (used && !used->translator) {
        fail(ErrorCode::kInvalidArgument, used->name + " is a language model (decoder-only): it "
                                          "generates (generate, chat), translate takes a translation model");
        return nullptr;
      }
    TranslateOptions o;
    o.beam_size = static_cast<size_t>(beam);
    o.max_new_tokens = static_cast<size_t>(max_new);
    o.min_new_tokens = static_cast<size_t>(min_new);
    if (!std::isnan(length_penalty)) o.length_penalty = length_penalty;
    if (!std::isnan(max_length_factor)) o.max_length_factor = max_length_factor;
    if (shortlist) o.use_shortlist = shortlist > 0;
    o.kv_cache_f16 = kv_f16 != 0;
    if (source_language) o.source_language = source_language;
    if (target_language) o.target_language = target_language;
    o.html = html != 0;
    o.quality_scores = quality != 0;
    o.alignment = alignment != 0;
    o.lookup_ngram = static_cast<size_t>(lookup_ngram);  // the engine checks both, naming them
    o.max_draft_tokens = static_cast<size_t>(max_draft_tokens);
    if (quality_model) {
      auto parsed = parse_quality_model(quality_model, quality_model_size, "qualityModel");
      if (!parsed) { fail(parsed.error()); return nullptr; }
      o.quality_model = std::move(parsed.value());
    }
    if (stream) {
      o.stream_text = true;
      o.on_token = [](const TokenEvent& e) {
        return pjs_emit_token(static_cast<int>(e.input), e.ids, static_cast<int>(e.length), e.piece.data(),
                              static_cast<int>(e.piece.size()), e.text.data(), static_cast<int>(e.text.size()),
                              e.text_delta.data(), static_cast<int>(e.text_delta.size()), e.text_restarted,
                              e.final, e.provisional) != 0;
      };
    }
    auto resolved = resolve_options(*m->model, o);
    if (!resolved) { fail(resolved.error()); return nullptr; }
    // A cache serves batches (a streamed translation goes around it).
    const bool batched = split != 0 || o.html || second != nullptr || (m->cache && !stream);
    if (batched && stream) {
      fail(ErrorCode::kInvalidArgument, second ? "streaming (onToken) cannot be combined with a second (pivot) model"
                                        : o.html ? "streaming (onToken) cannot be combined with html"
                                                 : "streaming (onToken) cannot be combined with sentence splitting");
      return nullptr;
    }
    if (second) {
      auto checked = resolve_options(*second->model, o);
      if (!checked) { fail(checked.error()); return nullptr; }
    }
    BatchOptions b;
    b.split_sentences = split != 0;
    switch (split_mode) {
      case -1: break;
      case 0: b.split_mode = SentenceSplit::kSentencePerLine; break;
      case 1: b.split_mode = SentenceSplit::kParagraphPerLine; break;
      case 2: b.split_mode = SentenceSplit::kWrappedText; break;
      default:
        fail(ErrorCode::kInvalidArgument, "unknown sentence split mode " + std::to_string(split_mode));
        return nullptr;
    }
    b.limit_by_longest_sentence = limit_by_longest != 0;
    b.shortlist_of_input = shortlist_of_input != 0;
    if (count == 0) return new PjsResult();  // the options are valid
    std::vector<std::string> inputs(texts, texts + count);
    auto result = std::make_unique<PjsResult>();
    const size_t n = inputs.size();
    result->texts.resize(n);
    result->ids.resize(n);
    result->scores.assign(n, 0.0);
    result->eos.assign(n, 0);
    result->status.assign(n, 0);
    result->errors.resize(n);
    result->sentences.resize(n);
    auto take = [&](size_t i, TextTranslation& t) {
      result->sentences[i] = sentences_json(t, o.html, o.alignment, o.quality_scores);
      if (t.hypotheses.empty()) return;
      TextHypothesis& h = t.hypotheses[0];
      result->eos[i] = h.ended_on_eos ? 1 : 0;
      result->texts[i] = std::move(h.text);
      result->ids[i] = std::move(h.ids);
      result->scores[i] = h.score;
    };
    if (batched) {
      for (PjsModel* used : {m, second}) {
        if (!used || used->batch) continue;
        auto created = BatchTranslator::create(used->model, used->options, 1);
        if (!created) { fail(created.error()); return nullptr; }
        if (used->draft) {
          const Status drafted = created.value().set_draft_model(used->draft);
          if (!drafted) { fail(drafted.error()); return nullptr; }
        }
        used->batch.emplace(std::move(created.value()));
      }
      b.max_batch_size = std::min<size_t>(std::max<size_t>(8, n), kMaxBatchSize);  // more texts: several batches
      b.window = std::max<size_t>(1, n);
      b.cache = m->cache;  // also for the second model's sentences: the key names the model
      const BatchTranslator::TextSink deliver = [&](size_t i, Result<TextTranslation>&& r) {
        if (!r) {
          result->status[i] = static_cast<int>(r.error().code);
          result->errors[i] = r.error().message;
          return;
        }
        take(i, r.value());
      };
      Status s = second ? translate_via_pivot(*m->batch, *second->batch, inputs, o, b, deliver)
                        : m->batch->translate_text(inputs, o, b, deliver);
      if (!s) { fail(s.error()); return nullptr; }
      const BatchTotals totals = m->batch->last_totals();
      m->speculation = speculation_json(totals.verifications, totals.drafted_tokens, totals.accepted_tokens, -1);
      return result.release();
    }
    auto translated = m->translator->translate_text(inputs, o);
    if (!translated) { fail(translated.error()); return nullptr; }
    const TranslateTimings& t = m->translator->last_timings();
    m->speculation = speculation_json(t.verifications, t.drafted_tokens, t.accepted_tokens,
                                      static_cast<long long>(t.draft_model_tokens));
    for (size_t i = 0; i < n && i < translated.value().size(); ++i) take(i, translated.value()[i]);
    return result.release();
  });
}

// The last translation's speculative decoding counts as JSON ("null" before one); valid
// until the next call.
EMSCRIPTEN_KEEPALIVE const char* pjs_translate_speculation(PjsModel* m) {
  return m->speculation.empty() ? "null" : m->speculation.c_str();
}

// Speculative decoding's draft model for `m` (draft NULL: none): a model of the same kind
// and vocabulary, checked by the engine (a refused one changes nothing). `m` keeps the
// draft's weights: the draft may be freed afterwards. 1 on success, 0 with the error set.
EMSCRIPTEN_KEEPALIVE int pjs_set_draft_model(PjsModel* m, PjsModel* draft) {
  return guarded<int>(0, [&]() -> int {
    std::shared_ptr<const Model> model = draft ? draft->model : nullptr;
    Status s = m->generator ? m->generator->set_draft_model(model) : m->translator->set_draft_model(model);
    if (!s) { fail(s.error()); return 0; }
    if (m->batch) {
      s = m->batch->set_draft_model(model);
      if (!s) { fail(s.error()); return 0; }
    }
    m->draft = std::move(model);
    return 1;
  });
}

// How `text` tokenizes: {"pieces": [...], "ids": [...]} (EOS included), or NULL.
EMSCRIPTEN_KEEPALIVE const char* pjs_tokenize(PjsModel* m, const char* text, const char* source_language) {
  static std::string out;
  return guarded<const char*>(nullptr, [&]() -> const char* {
    auto t = tokenize(*m->model, text, source_language ? source_language : "");
    if (!t) { fail(t.error()); return nullptr; }
    out.clear();
    {
      JsonObject o(out);
      o.strings("pieces", t.value().pieces);
      o.key("ids");
      out += '[';
      for (size_t i = 0; i < t.value().ids.size(); ++i) {
        if (i) out += ',';
        out += std::to_string(t.value().ids[i]);
      }
      out += ']';
    }
    return out.c_str();
  });
}

EMSCRIPTEN_KEEPALIVE const char* pjs_result_text(PjsResult* r, int i) { return r->texts[i].c_str(); }
EMSCRIPTEN_KEEPALIVE const int32_t* pjs_result_ids(PjsResult* r, int i) { return r->ids[i].data(); }
EMSCRIPTEN_KEEPALIVE int pjs_result_length(PjsResult* r, int i) { return static_cast<int>(r->ids[i].size()); }
EMSCRIPTEN_KEEPALIVE double pjs_result_score(PjsResult* r, int i) { return r->scores[i]; }
EMSCRIPTEN_KEEPALIVE int pjs_result_eos(PjsResult* r, int i) { return r->eos[i]; }
EMSCRIPTEN_KEEPALIVE int pjs_result_status(PjsResult* r, int i) { return r->status[i]; }
EMSCRIPTEN_KEEPALIVE const char* pjs_result_error(PjsResult* r, int i) { return r->errors[i].c_str(); }
// The input's sentences as JSON (sentences_json).
EMSCRIPTEN_KEEPALIVE const char* pjs_result_sentences(PjsResult* r, int i) { return r->sentences[i].c_str(); }
EMSCRIPTEN_KEEPALIVE void pjs_result_free(PjsResult* r) { delete r; }

}  // extern "C"

// --- Language models ---------------------------------------------------------------------

namespace {

// The generator of `m`, or null with the error set: a translation model does not generate.
Generator* generator_of(PjsModel* m) {
  if (m->generator) return &*m->generator;
  fail(ErrorCode::kInvalidArgument, m->name + " is a translation model: translate with it; generate and chat take a "
                                    "language model (decoder-only: Gemma 3, Llama, Qwen)");
  return nullptr;
}

// Template flags as two parallel arrays (names, values 0/1).
std::vector<std::pair<std::string, bool>> template_flags(const char* const* names, const int* values, int count) {
  std::vector<std::pair<std::string, bool>> flags;
  for (int i = 0; i < count; ++i) flags.emplace_back(names[i], values[i] != 0);
  return flags;
}

std::string timings_json(const GenerateTimings& t) {
  std::string out;
  {
    JsonObject o(out);
    o.num("prefillMs", t.prefill_ms);
    o.num("generateMs", t.generate_ms);
    o.integer("promptTokens", static_cast<long long>(t.prompt_tokens));
    o.integer("generatedTokens", static_cast<long long>(t.generated_tokens));
    o.integer("reusedTokens", static_cast<long long>(t.reused_tokens));
    o.integer("verifications", static_cast<long long>(t.verifications));
    o.integer("draftedTokens", static_cast<long long>(t.drafted_tokens));
    o.integer("acceptedTokens", static_cast<long long>(t.accepted_tokens));
    o.integer("draftModelTokens", static_cast<long long>(t.draft_model_tokens));
  }
  return out;
}

}  // namespace

extern "C" {

// Generates with a language model: `chat` non-null: the conversation's reply to `text`;
// else `text` non-null: text in, text out (generate_text); else the prompt `ids` (count
// ids_count), ids out. Unset options: max_new 0, do_sample -1, temperature, top_p, min_p,
// repetition_penalty NaN, top_k -1 (it reaches 2^32 - 1: a double). seed: its low and
// high 32 bits. kv_cache: 0 f32, 1 f16, 2 int8. stream: call the token hook after each
// token (with the text so far in text modes). grammar, json_schema: NULL for none.
// lookup_ngram, max_draft_tokens: speculative decoding's (0: off, the default).
EMSCRIPTEN_KEEPALIVE PjsGeneration* pjs_generate(PjsModel* m, PjsChat* chat, const char* text, const int32_t* ids,
                                                 int ids_count, int max_new, int do_sample, double temperature,
                                                 double top_k, double top_p, double min_p, double repetition_penalty,
                                                 uint32_t seed_low, uint32_t seed_high, int ignore_eos, int kv_cache,
                                                 int stream, const char* const* stop, int stop_count,
                                                 const char* grammar, const char* json_schema, int lookup_ngram,
                                                 int max_draft_tokens) {
  return guarded<PjsGeneration*>(nullptr, [&]() -> PjsGeneration* {
    Generator* generator = generator_of(m);
    if (!generator) return nullptr;
    GenerateOptions o;
    o.max_new_tokens = static_cast<size_t>(max_new);
    if (do_sample >= 0) o.do_sample = do_sample != 0;
    if (!std::isnan(temperature)) o.temperature = static_cast<float>(temperature);
    if (top_k >= 0) o.top_k = static_cast<uint32_t>(top_k);
    if (!std::isnan(top_p)) o.top_p = static_cast<float>(top_p);
    if (!std::isnan(min_p)) o.min_p = static_cast<float>(min_p);
    if (!std::isnan(repetition_penalty)) o.repetition_penalty = static_cast<float>(repetition_penalty);
    o.seed = (uint64_t{seed_high} << 32) | seed_low;
    o.ignore_eos = ignore_eos != 0;
    o.kv_cache_f16 = kv_cache == 1;
    o.kv_cache_int8 = kv_cache == 2;
    o.stop.assign(stop, stop + stop_count);
    if (grammar) o.grammar = grammar;
    if (json_schema) o.json_schema = json_schema;
    o.lookup_ngram = static_cast<size_t>(lookup_ngram);
    o.max_draft_tokens = static_cast<size_t>(max_draft_tokens);
    const bool text_mode = chat != nullptr || text != nullptr;
    if (stream) {
      o.stream_text = text_mode;
      o.on_token = [](const TokenEvent& e) {
        return pjs_emit_token(static_cast<int>(e.input), e.ids, static_cast<int>(e.length), e.piece.data(),
                              static_cast<int>(e.piece.size()), e.text.data(), static_cast<int>(e.text.size()),
                              e.text_delta.data(), static_cast<int>(e.text_delta.size()), 0, e.final, 0) != 0;
      };
    }
    auto result = std::make_unique<PjsGeneration>();
    std::string& out = result->json;
    if (!text_mode) {
      auto generated = generator->generate({std::vector<int32_t>(ids, ids + ids_count)}, o);
      if (!generated) { fail(generated.error()); return nullptr; }
      const Generation& g = generated.value()[0];
      {
        JsonObject j(out);
        j.key("ids");
        json_ids(out, g.ids);
        j.boolean("endedOnEos", g.ended_on_eos);
        j.integer("promptTokens", ids_count);
        j.integer("reusedTokens", static_cast<long long>(g.reused_tokens));
        j.key("timings");
        out += timings_json(generator->last_timings());
      }
      return result.release();
    }
    auto generated = chat ? chat->conversation.reply(text, o) : generator->generate_text(text, o);
    if (!generated) { fail(generated.error()); return nullptr; }
    TextGeneration& g = generated.value();
    result->text = std::move(g.text);
    {
      JsonObject j(out);
      j.key("ids");
      json_ids(out, g.ids);
      j.boolean("endedOnEos", g.ended_on_eos);
      j.boolean("endedOnStop", g.ended_on_stop);
      j.integer("promptTokens", static_cast<long long>(g.prompt_tokens));
      j.integer("reusedTokens", static_cast<long long>(g.reused_tokens));
      j.key("timings");
      out += timings_json(generator->last_timings());
    }
    return result.release();
  });
}

EMSCRIPTEN_KEEPALIVE const char* pjs_generation_text(PjsGeneration* g) { return g->text.c_str(); }
EMSCRIPTEN_KEEPALIVE int pjs_generation_text_length(PjsGeneration* g) { return static_cast<int>(g->text.size()); }
EMSCRIPTEN_KEEPALIVE const char* pjs_generation_json(PjsGeneration* g) { return g->json.c_str(); }
EMSCRIPTEN_KEEPALIVE void pjs_generation_free(PjsGeneration* g) { delete g; }

// The model's chat template applied to messages (roles[i], contents[i]), as
// Generator::apply_chat_template; valid until the next call, NULL on failure.
EMSCRIPTEN_KEEPALIVE const char* pjs_apply_chat_template(PjsModel* m, const char* const* roles,
                                                         const char* const* contents, int count,
                                                         int add_generation_prompt, const char* const* flag_names,
                                                         const int* flag_values, int flag_count) {
  static std::string out;
  return guarded<const char*>(nullptr, [&]() -> const char* {
    Generator* generator = generator_of(m);
    if (!generator) return nullptr;
    std::vector<ChatMessage> messages;
    for (int i = 0; i < count; ++i) messages.push_back({roles[i], contents[i]});
    auto rendered = generator->apply_chat_template(messages, add_generation_prompt != 0,
                                                   template_flags(flag_names, flag_values, flag_count));
    if (!rendered) { fail(rendered.error()); return nullptr; }
    out = std::move(rendered.value());
    return out.c_str();
  });
}

// The text of token ids (special tokens skipped), or NULL.
EMSCRIPTEN_KEEPALIVE const char* pjs_detokenize(PjsModel* m, const int32_t* ids, int count) {
  static std::string out;
  return guarded<const char*>(nullptr, [&]() -> const char* {
    auto text = decode_text(*m->model, std::vector<int32_t>(ids, ids + count));
    if (!text) { fail(text.error()); return nullptr; }
    out = std::move(text.value());
    return out.c_str();
  });
}

// A conversation (system: NULL or "" for none), owned by m; NULL on failure.
EMSCRIPTEN_KEEPALIVE PjsChat* pjs_chat_create(PjsModel* m, const char* system, const char* const* flag_names,
                                              const int* flag_values, int flag_count) {
  return guarded<PjsChat*>(nullptr, [&]() -> PjsChat* {
    Generator* generator = generator_of(m);
    if (!generator) return nullptr;
    auto created = Conversation::create(*generator, system ? system : "", template_flags(flag_names, flag_values, flag_count));
    if (!created) { fail(created.error()); return nullptr; }
    m->chats.push_back(std::unique_ptr<PjsChat>(new PjsChat{m, std::move(created.value()), {}}));
    return m->chats.back().get();
  });
}

EMSCRIPTEN_KEEPALIVE void pjs_chat_free(PjsChat* chat) {
  auto& chats = chat->owner->chats;
  for (auto it = chats.begin(); it != chats.end(); ++it)
    if (it->get() == chat) {
      chats.erase(it);
      return;
    }
}

// The conversation's messages as JSON [{"role", "content"}, ...], or NULL.
EMSCRIPTEN_KEEPALIVE const char* pjs_chat_messages(PjsChat* chat) {
  return guarded<const char*>(nullptr, [&]() -> const char* {
    std::string& out = chat->messages;
    out = "[";
    const std::vector<ChatMessage>& messages = chat->conversation.messages();
    for (size_t i = 0; i < messages.size(); ++i) {
      if (i) out += ',';
      JsonObject o(out);
      o.str("role", messages[i].role);
      o.str("content", messages[i].content);
    }
    out += ']';
    return out.c_str();
  });
}

// Conversation::make_room: how many exchanges it dropped, or -1 on failure.
EMSCRIPTEN_KEEPALIVE double pjs_chat_make_room(PjsChat* chat, const char* message, double new_tokens) {
  return guarded<double>(-1, [&]() -> double {
    auto dropped = chat->conversation.make_room(message, static_cast<size_t>(new_tokens));
    if (!dropped) { fail(dropped.error()); return -1; }
    return static_cast<double>(dropped.value());
  });
}

// Prompt caches (Generator::set_prompt_cache_bytes ...). The files are paths of the
// module's in-memory file system (petrel.mjs moves their bytes in and out).
EMSCRIPTEN_KEEPALIVE int pjs_set_prompt_cache_bytes(PjsModel* m, double bytes) {
  return guarded<int>(0, [&]() -> int {
    Generator* generator = generator_of(m);
    if (!generator) return 0;
    generator->set_prompt_cache_bytes(static_cast<size_t>(bytes));
    return 1;
  });
}

// {"budget", "bytes", "entries"}, or NULL; valid until the next call.
EMSCRIPTEN_KEEPALIVE const char* pjs_prompt_cache_stats(PjsModel* m) {
  static std::string out;
  return guarded<const char*>(nullptr, [&]() -> const char* {
    Generator* generator = generator_of(m);
    if (!generator) return nullptr;
    const PromptCacheStats st = generator->prompt_cache_stats();
    out.clear();
    {
      JsonObject o(out);
      o.integer("budget", static_cast<long long>(st.budget));
      o.integer("bytes", static_cast<long long>(st.bytes));
      o.integer("entries", static_cast<long long>(st.entries));
    }
    return out.c_str();
  });
}

EMSCRIPTEN_KEEPALIVE int pjs_save_prompt_cache(PjsModel* m, const char* path) {
  return guarded<int>(0, [&]() -> int {
    Generator* generator = generator_of(m);
    if (!generator) return 0;
    const Status saved = generator->save_prompt_cache(path);
    if (!saved) { fail(saved.error()); return 0; }
    return 1;
  });
}

EMSCRIPTEN_KEEPALIVE int pjs_load_prompt_cache(PjsModel* m, const char* path) {
  return guarded<int>(0, [&]() -> int {
    Generator* generator = generator_of(m);
    if (!generator) return 0;
    const Status loaded = generator->load_prompt_cache(path);
    if (!loaded) { fail(loaded.error()); return 0; }
    return 1;
  });
}

}  // extern "C"
