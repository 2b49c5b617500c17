// The C API over the C++ one: handles own C++ objects, errors become status codes
// plus a per-thread message, and no exception crosses the boundary.
#include "petrel/petrel.h"

#include <cmath>
#include <cstddef>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <utility>

#include <optional>

#include "petrel/batch_translator.h"
#include "petrel/generator.h"
#include "format/format_version.h"
#include "petrel/translator.h"
#include "text_sentences.h"

struct petrel_model {
  std::shared_ptr<const petrel::Model> model;
};
// A session translates, or for a decoder-only model generates: one of the two is set.
struct petrel_session {
  std::optional<petrel::Translator> translator;
  std::optional<petrel::Generator> generator;
  const char* isa() const { return translator ? translator->isa() : generator->isa(); }
};
struct petrel_result {
  std::vector<petrel::Translation> translations;
  std::vector<std::vector<std::string>> texts;  // per input and hypothesis; empty for ids
  // petrel_result_alignment's row-major copies, made when first asked for.
  mutable std::map<std::pair<size_t, size_t>, std::vector<float>> flat_alignments;
};
struct petrel_conversation {
  petrel::Conversation conversation;
};

namespace {

// The calling thread's last error: per thread, so sessions on several threads
// never see each other's messages.
thread_local std::string last_error;

petrel_status fail(const petrel::Error& e) {
  last_error = e.message;
  switch (e.code) {
    case petrel::ErrorCode::kInvalidArgument: return PETREL_INVALID_ARGUMENT;
    case petrel::ErrorCode::kIo: return PETREL_IO;
    case petrel::ErrorCode::kFormat: return PETREL_FORMAT;
    case petrel::ErrorCode::kUnsupported: return PETREL_UNSUPPORTED;
    case petrel::ErrorCode::kInternal: return PETREL_INTERNAL;
    case petrel::ErrorCode::kOutOfMemory: return PETREL_OUT_OF_MEMORY;
    case petrel::ErrorCode::kCancelled: return PETREL_CANCELLED;
  }
  return PETREL_INTERNAL;
}

petrel_status invalid(const std::string& message) { return fail({petrel::ErrorCode::kInvalidArgument, message}); }

// Runs `body`, turning an escaping exception (only std::bad_alloc is expected) into a status.
template <class Body>
petrel_status guarded(Body body) {
  try {
    last_error.clear();
    return body();
  } catch (const std::bad_alloc&) {
    return fail({petrel::ErrorCode::kOutOfMemory, "out of memory"});
  } catch (...) {
    return fail({petrel::ErrorCode::kInternal, "unexpected error"});
  }
}

// The fields every petrel_options has had (library 0.1): a caller's struct must hold
// at least these; fields after them (beam_stop, ...) are read only when struct_size
// covers them.
constexpr size_t kFirstOptionsSize = offsetof(petrel_options, kv_cache_f16) + sizeof(int);

// The bytes of a caller's petrel_options to take: struct_size cut back to the end of the
// last block of fields it covers whole (blocks: the first fields, beam_stop, the
// streaming fields, the language and prefix fields, max_length_factor, the alignment fields,
// html and quality_scores, the speculative decoding fields).
size_t whole_blocks(size_t struct_size) {
  if (struct_size >= sizeof(petrel_options)) return sizeof(petrel_options);
  for (size_t end : {offsetof(petrel_options, quality_scores) + sizeof(int),
                     offsetof(petrel_options, alignment_head) + sizeof(size_t),
                     offsetof(petrel_options, max_length_factor) + sizeof(double),
                     offsetof(petrel_options, target_prefix_length) + sizeof(size_t),
                     offsetof(petrel_options, stream_text) + sizeof(int), offsetof(petrel_options, beam_stop) + sizeof(int),
                     kFirstOptionsSize})
    if (struct_size >= end) return end;
  return 0;  // to_cpp refuses such a size first
}

// A token event for a C callback, its strings NUL-terminated copies: the piece views the
// model's string table and a delta its text, neither ending in a NUL. The text and its
// delta are NULL only when the call streams no text (text.data() is null then; an empty
// text is "", as on the first steps of a multilingual model, whose language token is "").
struct EventStrings {
  std::string piece, text, delta;
  petrel_token_event convert(const petrel::TokenEvent& e) {
    piece.assign(e.piece);
    text.assign(e.text);
    delta.assign(e.text_delta);
    const bool has_text = e.text.data() != nullptr;
    return {e.input, e.ids, e.length, piece.c_str(), e.provisional ? 1 : 0, e.final ? 1 : 0,
            has_text ? text.c_str() : nullptr, has_text ? delta.c_str() : nullptr, e.text_restarted ? 1 : 0};
  }
};

// Ids a caller passes in one array: far more than any model's positions. A longer length
// is garbage (and would wrap the end pointer around the address space).
constexpr size_t kMaxCallerIds = size_t{1} << 20;

// A caller's options, reading only the fields its struct_size covers (an older
// header's caller gets defaults for fields added since).
petrel::Result<petrel::TranslateOptions> to_cpp(const petrel_options* o) {
  petrel::TranslateOptions t;
  if (o == nullptr) return t;
  if (o->struct_size < kFirstOptionsSize)
    return petrel::Error{petrel::ErrorCode::kInvalidArgument,
                         "petrel_options.struct_size is " + std::to_string(o->struct_size) +
                             ": initialise the options with petrel_options_init"};
  if (o->struct_size > sizeof(petrel_options))
    return petrel::Error{petrel::ErrorCode::kInvalidArgument,
                         "petrel_options.struct_size " + std::to_string(o->struct_size) + " is larger than this " +
                             "library's " + std::to_string(sizeof(petrel_options)) +
                             ": the caller was built with a newer petrel.h than the library it runs with"};
  t.beam_size = o->beam_size;
  t.n_best = o->n_best;
  t.max_new_tokens = o->max_new_tokens;
  t.min_new_tokens = o->min_new_tokens;
  if (!std::isnan(o->length_penalty)) t.length_penalty = o->length_penalty;
  if (o->use_shortlist != 0) t.use_shortlist = o->use_shortlist > 0;  // 0: the model's choice
  t.kv_cache_f16 = o->kv_cache_f16 != 0;
  auto has = [&](size_t end_of_field) { return o->struct_size >= end_of_field; };
  if (has(offsetof(petrel_options, stream_text) + sizeof(int)) && o->on_token != nullptr) {
    const petrel_token_fn fn = o->on_token;
    void* const data = o->on_token_data;
    t.stream_text = o->stream_text != 0;
    t.on_token = [fn, data, strings = EventStrings()](const petrel::TokenEvent& e) mutable {
      const petrel_token_event c = strings.convert(e);
      return fn(data, &c) != 0;
    };
  }
  if (has(offsetof(petrel_options, target_prefix_length) + sizeof(size_t))) {
    if (o->source_language != nullptr) t.source_language = o->source_language;
    if (o->target_language != nullptr) t.target_language = o->target_language;
    if (o->target_prefix_length > 0 && o->target_prefix == nullptr)
      return petrel::Error{petrel::ErrorCode::kInvalidArgument,
                           "petrel_options.target_prefix is NULL but target_prefix_length is " +
                               std::to_string(o->target_prefix_length)};
    if (o->target_prefix_length > kMaxCallerIds)
      return petrel::Error{petrel::ErrorCode::kInvalidArgument,
                           "petrel_options.target_prefix_length is " + std::to_string(o->target_prefix_length) +
                               ": far over any model's positions"};
    t.target_prefix.assign(o->target_prefix, o->target_prefix + o->target_prefix_length);
  }
  if (has(offsetof(petrel_options, max_length_factor) + sizeof(double))) t.max_length_factor = o->max_length_factor;
  if (has(offsetof(petrel_options, alignment_head) + sizeof(size_t)) && o->alignment != 0) {
    t.alignment = true;
    if (o->alignment_layer < -1)
      return petrel::Error{petrel::ErrorCode::kInvalidArgument,
                           "petrel_options.alignment_layer = " + std::to_string(o->alignment_layer) +
                               ": a decoder layer (0-based), or -1 for the model's"};
    if (o->alignment_layer >= 0) t.alignment_layer = static_cast<size_t>(o->alignment_layer);
    t.alignment_head = o->alignment_head;
  }
  if (has(offsetof(petrel_options, quality_scores) + sizeof(int))) {
    t.html = o->html != 0;
    t.quality_scores = o->quality_scores != 0;
  }
  if (has(offsetof(petrel_options, max_draft_tokens) + sizeof(size_t))) {
    t.lookup_ngram = o->lookup_ngram;  // the Translator checks both, naming them
    t.max_draft_tokens = o->max_draft_tokens;
  }
  if (has(offsetof(petrel_options, beam_stop) + sizeof(int))) {
    switch (o->beam_stop) {
      case PETREL_BEAM_STOP_DEFAULT: t.beam_stop = petrel::BeamStop::kDefault; break;
      case PETREL_BEAM_STOP_HEURISTIC: t.beam_stop = petrel::BeamStop::kHeuristic; break;
      case PETREL_BEAM_STOP_FIRST_K: t.beam_stop = petrel::BeamStop::kFirstK; break;
      default:
        return petrel::Error{petrel::ErrorCode::kInvalidArgument,
                             "petrel_options.beam_stop = " + std::to_string(o->beam_stop) +
                                 " is not one of PETREL_BEAM_STOP_DEFAULT, _HEURISTIC, _FIRST_K"};
    }
  }
  return t;
}

// A malloc'ed copy for the caller (petrel_string_free).
petrel_status copy_string(const std::string& text, char** out) {
  *out = static_cast<char*>(std::malloc(text.size() + 1));
  if (*out == nullptr) return fail({petrel::ErrorCode::kOutOfMemory, "out of memory"});
  std::memcpy(*out, text.c_str(), text.size() + 1);
  return PETREL_OK;
}

// The first version of petrel_generate_options ended at on_token_data, the second at
// stop_count, the third at json_schema, the fourth at kv_cache_int8 (its sizeof: that
// field rounded up to the struct's alignment).
constexpr size_t kGenerateOptionsV1 = offsetof(petrel_generate_options, stream_text);
constexpr size_t kGenerateOptionsV2 = offsetof(petrel_generate_options, grammar);
constexpr size_t kGenerateOptionsV3 = offsetof(petrel_generate_options, kv_cache_int8);
constexpr size_t kGenerateOptionsV4 =
    (offsetof(petrel_generate_options, kv_cache_int8) + sizeof(int) + alignof(petrel_generate_options) - 1) /
    alignof(petrel_generate_options) * alignof(petrel_generate_options);
static_assert(kGenerateOptionsV4 <= offsetof(petrel_generate_options, lookup_ngram),
              "the fourth version's struct ends before the speculative decoding fields");

petrel::Result<petrel::GenerateOptions> to_cpp(const petrel_generate_options* o) {
  petrel::GenerateOptions g;
  if (o == nullptr) return g;
  if (o->struct_size != sizeof(petrel_generate_options) && o->struct_size != kGenerateOptionsV1 &&
      o->struct_size != kGenerateOptionsV2 && o->struct_size != kGenerateOptionsV3 &&
      o->struct_size != kGenerateOptionsV4)
    return petrel::Error{petrel::ErrorCode::kInvalidArgument,
                         "petrel_generate_options.struct_size is " + std::to_string(o->struct_size) + ", expected " +
                             std::to_string(sizeof(petrel_generate_options)) +
                             ": initialise the options with petrel_generate_options_init"};
  g.max_new_tokens = o->max_new_tokens;
  if (o->do_sample >= 0) g.do_sample = o->do_sample != 0;
  if (!std::isnan(o->temperature)) g.temperature = o->temperature;
  if (o->top_k < -1)
    return petrel::Error{petrel::ErrorCode::kInvalidArgument, "petrel_generate_options.top_k is " +
                                                                  std::to_string(o->top_k) + ": 0 (off), -1 (the model's) or a count"};
  if (o->top_k >= 0) g.top_k = static_cast<uint32_t>(o->top_k);
  if (!std::isnan(o->top_p)) g.top_p = o->top_p;
  if (!std::isnan(o->min_p)) g.min_p = o->min_p;
  if (!std::isnan(o->repetition_penalty)) g.repetition_penalty = o->repetition_penalty;
  g.seed = o->seed;
  g.ignore_eos = o->ignore_eos != 0;
  g.kv_cache_f16 = o->kv_cache_f16 != 0;
  if (o->struct_size >= kGenerateOptionsV3) {
    if (o->grammar != nullptr) g.grammar = o->grammar;
    if (o->json_schema != nullptr) g.json_schema = o->json_schema;
  }
  if (o->struct_size >= kGenerateOptionsV4) g.kv_cache_int8 = o->kv_cache_int8 != 0;
  if (o->struct_size >= sizeof(petrel_generate_options)) {
    g.lookup_ngram = o->lookup_ngram;  // the Generator checks both, naming them
    g.max_draft_tokens = o->max_draft_tokens;
  }
  if (o->struct_size >= kGenerateOptionsV2) {
    g.stream_text = o->stream_text != 0;
    if (o->stop_count > 0 && o->stop == nullptr)
      return petrel::Error{petrel::ErrorCode::kInvalidArgument, "petrel_generate_options.stop: NULL with stop_count > 0"};
    if (o->stop_count > 1024)
      return petrel::Error{petrel::ErrorCode::kInvalidArgument, "petrel_generate_options.stop_count: more than 1024"};
    for (size_t i = 0; i < o->stop_count; ++i) {
      if (o->stop[i] == nullptr)
        return petrel::Error{petrel::ErrorCode::kInvalidArgument, "petrel_generate_options.stop[" + std::to_string(i) + "]: NULL"};
      g.stop.emplace_back(o->stop[i]);
    }
  }
  if (o->on_token != nullptr) {
    const petrel_token_fn fn = o->on_token;
    void* const data = o->on_token_data;
    g.on_token = [fn, data, strings = EventStrings()](const petrel::TokenEvent& e) mutable {
      const petrel_token_event c = strings.convert(e);
      return fn(data, &c) != 0;
    };
  }
  return g;
}

// A text generation as a result: one input, one hypothesis, its ids and text.
petrel_result* text_result(petrel::TextGeneration g) {
  auto r = std::make_unique<petrel_result>();
  r->translations.resize(1);
  r->translations[0].hypotheses.push_back({std::move(g.ids), 0.0, g.ended_on_eos, {}, {}});
  r->texts.push_back({std::move(g.text)});
  return r.release();
}

petrel_status load(petrel::Result<std::shared_ptr<const petrel::Model>> loaded, petrel_model** model) {
  if (!loaded) return fail(loaded.error());
  *model = new petrel_model{std::move(loaded.value())};
  return PETREL_OK;
}

}  // namespace

extern "C" {

const char* petrel_version(void) { return petrel::library_version(); }
uint32_t petrel_format_major(void) { return petrel::detail::kFormatMajor; }
uint32_t petrel_format_minor(void) { return petrel::detail::kFormatMinor; }
const char* petrel_last_error(void) { return last_error.c_str(); }

void petrel_options_init_sized(petrel_options* o, size_t size) {
  if (o == nullptr) return;
  petrel::TranslateOptions d;
  const petrel_options defaults = {
      sizeof(petrel_options), d.beam_size, d.n_best, d.max_new_tokens, d.min_new_tokens, NAN,
      0,                      d.kv_cache_f16 ? 1 : 0, PETREL_BEAM_STOP_DEFAULT, nullptr, nullptr, 0,
      nullptr,                nullptr,                 nullptr,                  0,
      0.0,                    0,                       -1,                       0,
      0,                      0,                       0,                        0};
  size = std::min(size, sizeof(petrel_options));
  std::memcpy(static_cast<void*>(o), &defaults, size);
  if (size >= sizeof(size_t)) o->struct_size = size;  // to_cpp reads the fields this covers
}

#undef petrel_options_init
// Apps built before petrel_options_init became a macro: their struct ended at
// target_prefix_length (max_length_factor came later).
void petrel_options_init(petrel_options* o) { petrel_options_init_sized(o, offsetof(petrel_options, max_length_factor)); }

petrel_status petrel_model_load(const char* path, petrel_model** model) {
  return guarded([&] {
    if (path == nullptr || model == nullptr) return invalid("petrel_model_load: NULL argument");
    *model = nullptr;
    return load(petrel::Model::load(path), model);
  });
}

petrel_status petrel_model_load_memory(const void* data, size_t size, petrel_model** model) {
  return guarded([&] {
    if (model == nullptr) return invalid("petrel_model_load_memory: NULL model pointer");
    *model = nullptr;
    return load(petrel::Model::load_from_memory(data, size), model);
  });
}

void* petrel_buffer_alloc(size_t size) { return petrel::Model::allocate_buffer(size); }

void petrel_buffer_free(void* buffer) { petrel::Model::free_buffer(buffer); }

petrel_status petrel_model_load_buffer(void* buffer, size_t size, petrel_model** model) {
  return guarded([&] {
    if (model == nullptr) {
      petrel::Model::free_buffer(buffer);
      return invalid("petrel_model_load_buffer: NULL model pointer");
    }
    *model = nullptr;
    return load(petrel::Model::load_from_buffer(buffer, size), model);
  });
}

void petrel_model_free(petrel_model* model) { delete model; }

petrel_status petrel_model_verify(const petrel_model* model) {
  return guarded([&] {
    if (model == nullptr) return invalid("petrel_model_verify: NULL model");
    petrel::Status s = model->model->verify_data();
    return s ? PETREL_OK : fail(s.error());
  });
}

petrel_status petrel_session_create(const petrel_model* model, const char* isa, size_t threads,
                                    petrel_session** session) {
  return petrel_session_create_with(model, isa, threads, PETREL_ACTIVATION_SCALES_DYNAMIC, session);
}

petrel_status petrel_session_create_with(const petrel_model* model, const char* isa, size_t threads,
                                         int activation_scales, petrel_session** session) {
  return guarded([&] {
    if (model == nullptr || session == nullptr) return invalid("petrel_session_create: NULL argument");
    *session = nullptr;
    if (activation_scales != PETREL_ACTIVATION_SCALES_DYNAMIC && activation_scales != PETREL_ACTIVATION_SCALES_FILE)
      return fail({petrel::ErrorCode::kInvalidArgument, "petrel_session_create_with: activation_scales " +
                                                            std::to_string(activation_scales) +
                                                            " is not PETREL_ACTIVATION_SCALES_DYNAMIC or _FILE"});
    petrel::TranslatorOptions to{isa ? isa : "", threads};
    if (activation_scales == PETREL_ACTIVATION_SCALES_FILE) to.activation_scales = petrel::ActivationScales::kFile;
    if (model->model->info().decoder_only) {
      auto created = petrel::Generator::create(model->model, to);
      if (!created) return fail(created.error());
      *session = new petrel_session{std::nullopt, std::move(created.value())};
      return PETREL_OK;
    }
    auto created = petrel::Translator::create(model->model, to);
    if (!created) return fail(created.error());
    *session = new petrel_session{std::move(created.value()), std::nullopt};
    return PETREL_OK;
  });
}

void petrel_session_free(petrel_session* session) { delete session; }

const char* petrel_session_isa(const petrel_session* session) { return session ? session->isa() : ""; }

petrel_status petrel_translate_ids(petrel_session* session, const int32_t* const* inputs, const size_t* lengths,
                                   size_t batch, const petrel_options* options, petrel_result** result) {
  return guarded([&] {
    if (session == nullptr || result == nullptr || (batch > 0 && (inputs == nullptr || lengths == nullptr)))
      return invalid("petrel_translate_ids: NULL argument");
    *result = nullptr;
    std::vector<std::vector<int32_t>> cpp(batch);
    for (size_t i = 0; i < batch; ++i) {
      if (inputs[i] == nullptr && lengths[i] > 0) return invalid("petrel_translate_ids: NULL input");
      if (lengths[i] > kMaxCallerIds)
        return invalid("petrel_translate_ids: input " + std::to_string(i + 1) + " has length " +
                       std::to_string(lengths[i]) + ", far over any model's positions");
      cpp[i].assign(inputs[i], inputs[i] + lengths[i]);
    }
    auto cpp_options = to_cpp(options);
    if (!cpp_options) return fail(cpp_options.error());
    if (!session->translator) return invalid("petrel_translate_ids: a language model's session generates (petrel_generate)");
    auto translated = session->translator->translate(cpp, cpp_options.value());
    if (!translated) return fail(translated.error());
    *result = new petrel_result{std::move(translated.value()), {}, {}};
    return PETREL_OK;
  });
}

size_t petrel_result_inputs(const petrel_result* r) { return r ? r->translations.size() : 0; }

size_t petrel_result_hypotheses(const petrel_result* r, size_t input) {
  return r && input < r->translations.size() ? r->translations[input].hypotheses.size() : 0;
}

const int32_t* petrel_result_ids(const petrel_result* r, size_t input, size_t k, size_t* length) {
  if (length) *length = 0;
  if (petrel_result_hypotheses(r, input) <= k) return nullptr;
  static const int32_t kEmpty[1] = {0};  // an empty hypothesis is not "out of range"
  const auto& ids = r->translations[input].hypotheses[k].ids;
  if (length) *length = ids.size();
  return ids.empty() ? kEmpty : ids.data();
}

double petrel_result_score(const petrel_result* r, size_t input, size_t k) {
  return petrel_result_hypotheses(r, input) > k ? r->translations[input].hypotheses[k].score : 0.0;
}

const char* petrel_result_text(const petrel_result* r, size_t input, size_t k) {
  if (petrel_result_hypotheses(r, input) <= k || r->texts.size() <= input) return nullptr;
  return r->texts[input][k].c_str();
}

const float* petrel_result_alignment(const petrel_result* r, size_t input, size_t k, size_t* rows, size_t* columns) {
  if (rows) *rows = 0;
  if (columns) *columns = 0;
  if (petrel_result_hypotheses(r, input) <= k) return nullptr;
  const auto& alignment = r->translations[input].hypotheses[k].alignment;
  if (alignment.empty()) return nullptr;
  const size_t width = alignment[0].size();
  try {
    std::vector<float>& flat = r->flat_alignments[{input, k}];
    if (flat.empty())
      for (const auto& row : alignment) flat.insert(flat.end(), row.begin(), row.end());
    if (rows) *rows = alignment.size();
    if (columns) *columns = width;
    return flat.data();
  } catch (const std::bad_alloc&) {
    fail({petrel::ErrorCode::kOutOfMemory, "petrel_result_alignment: out of memory"});
    return nullptr;
  }
}

void petrel_result_free(petrel_result* result) { delete result; }

petrel_status petrel_translate_texts(petrel_session* session, const char* const* texts, size_t count,
                                     const petrel_options* options, petrel_result** result) {
  return guarded([&] {
    if (session == nullptr || result == nullptr || (count > 0 && texts == nullptr))
      return invalid("petrel_translate_texts: NULL argument");
    *result = nullptr;
    std::vector<std::string> cpp(count);
    for (size_t i = 0; i < count; ++i) {
      if (texts[i] == nullptr) return invalid("petrel_translate_texts: NULL text");
      cpp[i] = texts[i];
    }
    auto cpp_options = to_cpp(options);
    if (!cpp_options) return fail(cpp_options.error());
    if (!session->translator) return invalid("petrel_translate_texts: a language model's session generates (petrel_generate)");
    auto translated = session->translator->translate_text(cpp, cpp_options.value());
    if (!translated) return fail(translated.error());
    auto out = std::make_unique<petrel_result>();
    for (auto& t : translated.value()) {
      petrel::Translation ids;
      std::vector<std::string> strings;
      for (auto& h : t.hypotheses) {
        ids.hypotheses.push_back({std::move(h.ids), h.score, h.ended_on_eos, std::move(h.alignment), std::move(h.token_scores)});
        strings.push_back(std::move(h.text));
      }
      out->translations.push_back(std::move(ids));
      out->texts.push_back(std::move(strings));
    }
    *result = out.release();
    return PETREL_OK;
  });
}

petrel_status petrel_translate_text(petrel_session* session, const char* text, const petrel_options* options,
                                    char** translation) {
  return guarded([&] {
    if (session == nullptr || text == nullptr || translation == nullptr)
      return invalid("petrel_translate_text: NULL argument");
    *translation = nullptr;
    auto cpp_options = to_cpp(options);
    if (!cpp_options) return fail(cpp_options.error());
    if (!session->translator) return invalid("a language model's session generates (petrel_generate)");
    auto translated = session->translator->translate_text({text}, cpp_options.value());
    if (!translated) return fail(translated.error());
    const auto& hypotheses = translated.value()[0].hypotheses;
    if (hypotheses.empty())
      return invalid("petrel_translate_text: no token could be generated for this input (every candidate was "
                     "masked: min_new_tokens with a shortlist that allows only EOS?)");
    return copy_string(hypotheses[0].text, translation);
  });
}

void petrel_string_free(char* text) { std::free(text); }

void petrel_batch_options_init_sized(petrel_batch_options* o, size_t size) {
  if (o == nullptr) return;
  petrel::BatchOptions d;
  const petrel_batch_options defaults = {sizeof(petrel_batch_options), d.max_batch_tokens, d.max_batch_size, 1, 1,
                                         d.split_sentences ? 1 : 0, PETREL_SPLIT_TEXT,
                                         d.limit_by_longest_sentence ? 1 : 0, d.shortlist_of_input ? 1 : 0};
  size = std::min(size, sizeof(petrel_batch_options));
  std::memcpy(static_cast<void*>(o), &defaults, size);
  if (size >= sizeof(size_t)) o->struct_size = size;  // prepare reads the fields this covers
}

#undef petrel_batch_options_init
// Apps built before petrel_batch_options_init became a macro: their struct ended at
// limit_by_longest_sentence.
void petrel_batch_options_init(petrel_batch_options* o) {
  petrel_batch_options_init_sized(o, offsetof(petrel_batch_options, shortlist_of_input));
}

// What petrel_translate_many and petrel_translate_responses (through a pivot too) take
// from their caller.
struct ManyTexts {
  std::vector<std::string> texts;
  petrel::TranslateOptions options;
  petrel::BatchOptions batching;
  std::optional<petrel::BatchTranslator> translator;
  // petrel_translate_responses_via_pivot: the second model's, on the same kernel path,
  // threads and workers.
  std::optional<petrel::BatchTranslator> pivot;
  petrel::TranslatorOptions session;
  size_t workers = 1;

  // An error status when an argument is wrong.
  std::optional<petrel_status> prepare(const petrel_model* model, const char* isa, const char* const* given,
                                       size_t count, const petrel_options* o, const petrel_batch_options* batch,
                                       const char* function) {
    petrel_batch_options b;
    petrel_batch_options_init_sized(&b, sizeof b);
    if (batch != nullptr) {
      if (batch->struct_size < sizeof(size_t) || batch->struct_size > sizeof b)
        return invalid("petrel_batch_options.struct_size is wrong: initialise it with petrel_batch_options_init");
      std::memcpy(&b, batch, batch->struct_size);
    }
    if (b.split_mode < PETREL_SPLIT_TEXT || b.split_mode > PETREL_SPLIT_WRAPPED_TEXT)
      return invalid("petrel_batch_options.split_mode = " + std::to_string(b.split_mode) +
                     " is not one of PETREL_SPLIT_TEXT, _SENTENCE_PER_LINE, _PARAGRAPH_PER_LINE, _WRAPPED_TEXT");
    auto cpp_options = to_cpp(o);
    if (!cpp_options) return fail(cpp_options.error());
    options = std::move(cpp_options.value());
    texts.resize(count);
    for (size_t i = 0; i < count; ++i) {
      if (given[i] == nullptr) return invalid(std::string(function) + ": NULL text");
      texts[i] = given[i];
    }
    session = {isa ? isa : "", b.threads};
    workers = b.workers;
    auto created = petrel::BatchTranslator::create(model->model, session, workers);
    if (!created) return fail(created.error());
    translator.emplace(std::move(created.value()));
    batching.max_batch_tokens = b.max_batch_tokens;
    batching.max_batch_size = b.max_batch_size;
    batching.split_sentences = b.split_sentences != 0;
    batching.split_mode = static_cast<petrel::SentenceSplit>(b.split_mode);
    batching.limit_by_longest_sentence = b.limit_by_longest_sentence != 0;
    batching.shortlist_of_input = b.shortlist_of_input != 0;
    return std::nullopt;
  }

  // After prepare, for translation through a pivot: the second model's translator.
  std::optional<petrel_status> prepare_pivot(const petrel_model* second) {
    auto created = petrel::BatchTranslator::create(second->model, session, workers);
    if (!created) return fail(created.error());
    pivot.emplace(std::move(created.value()));
    return std::nullopt;
  }

  petrel::Status translate_text(const petrel::BatchTranslator::TextSink& deliver) {
    if (pivot) return petrel::translate_via_pivot(*translator, *pivot, texts, options, batching, deliver);
    return translator->translate_text(texts, options, batching, deliver);
  }

  // translate_text, each result handed to a C response sink as bergamot's Response.
  petrel_status respond(petrel_response_sink sink, void* user_data);

  // Why `model` (the caller's argument `name`) cannot be one of a pivot's two models, if it
  // cannot: the second reads the first's translation sentence by sentence, which takes
  // tokenizers that tell their tokens' bytes.
  static std::optional<petrel_status> refuse_for_pivot(const petrel_model* model, const char* name) {
    const std::string function = "petrel_translate_responses_via_pivot: ";
    if (model->model->info().decoder_only)
      return invalid(function + name + " is a language model, not a translation model");
    if (!model->model->info().has_text_tokenizer)
      return fail({petrel::ErrorCode::kUnsupported, function + name + " carries no text tokenizer"});
    if (!petrel::detail::has_token_ranges(*model->model))
      return fail({petrel::ErrorCode::kUnsupported, function + name + "'s tokenizer does not give the byte ranges of "
                                                    "its tokens (a Marian model's does)"});
    return std::nullopt;
  }
};

petrel_status petrel_translate_many(const petrel_model* model, const char* isa, const char* const* texts, size_t count,
                                    const petrel_options* options, const petrel_batch_options* batching,
                                    petrel_text_sink sink, void* user_data) {
  return guarded([&] {
    if (model == nullptr || sink == nullptr || (count > 0 && texts == nullptr))
      return invalid("petrel_translate_many: NULL argument");
    ManyTexts many;
    if (auto refused = many.prepare(model, isa, texts, count, options, batching, "petrel_translate_many")) return *refused;
    petrel::Status s = many.translator->translate_text(
        many.texts, many.options, many.batching, [&](size_t i, petrel::Result<petrel::TextTranslation>&& r) {
          if (!r) {
            const std::string message = r.error().message;
            petrel_status code = fail(r.error());  // the code; the thread's message is the last error
            sink(user_data, i, code, message.c_str(), 0.0);
            last_error.clear();
            return;
          }
          const auto& hyps = r.value().hypotheses;
          sink(user_data, i, PETREL_OK, hyps.empty() ? "" : hyps[0].text.c_str(), hyps.empty() ? 0.0 : hyps[0].score);
        });
    if (!s) return fail(s.error());
    return PETREL_OK;
  });
}

struct petrel_response {
  const petrel::TextTranslation* translation = nullptr;
  const std::string* input = nullptr;
  std::vector<std::vector<float>> alignments;  // per sentence, row-major
};

const char* petrel_response_text(const petrel_response* r) {
  if (r == nullptr || r->translation->hypotheses.empty()) return "";
  return r->translation->hypotheses[0].text.c_str();
}

const char* petrel_response_source(const petrel_response* r) {
  if (r == nullptr) return "";
  return r->translation->source_html.empty() ? r->input->c_str() : r->translation->source_html.c_str();
}

size_t petrel_response_sentences(const petrel_response* r) { return r == nullptr ? 0 : r->translation->sentences.size(); }

int petrel_response_sentence(const petrel_response* r, size_t k, size_t ranges[4]) {
  if (r == nullptr || ranges == nullptr || k >= r->translation->sentences.size()) return 0;
  const petrel::SentenceTranslation& s = r->translation->sentences[k];
  ranges[0] = s.source.begin;
  ranges[1] = s.source.end;
  ranges[2] = s.target.begin;
  ranges[3] = s.target.end;
  return 1;
}

float petrel_response_sentence_quality(const petrel_response* r, size_t k) {
  if (r == nullptr || k >= r->translation->sentences.size() || !r->translation->sentences[k].quality) return 0.0f;
  return r->translation->sentences[k].quality->score;
}

size_t petrel_response_words(const petrel_response* r, size_t k) {
  if (r == nullptr || k >= r->translation->sentences.size() || !r->translation->sentences[k].quality) return 0;
  return r->translation->sentences[k].quality->word_scores.size();
}

int petrel_response_word(const petrel_response* r, size_t k, size_t w, size_t range[2], float* score) {
  if (w >= petrel_response_words(r, k)) return 0;
  const petrel::SentenceQuality& q = *r->translation->sentences[k].quality;
  if (range != nullptr) {
    range[0] = q.words[w].begin;
    range[1] = q.words[w].end;
  }
  if (score != nullptr) *score = q.word_scores[w];
  return 1;
}

const float* petrel_response_alignment(const petrel_response* r, size_t k, size_t* rows, size_t* columns) {
  if (rows != nullptr) *rows = 0;
  if (columns != nullptr) *columns = 0;
  if (r == nullptr || k >= r->alignments.size() || r->alignments[k].empty()) return nullptr;
  const auto& soft = r->translation->sentences[k].alignment;
  if (rows != nullptr) *rows = soft.size();
  if (columns != nullptr) *columns = soft[0].size();
  return r->alignments[k].data();
}

petrel_status ManyTexts::respond(petrel_response_sink sink, void* user_data) {
  petrel::Status s = translate_text([&](size_t i, petrel::Result<petrel::TextTranslation>&& r) {
    if (!r) {
      const std::string message = r.error().message;
      petrel_status code = fail(r.error());
      sink(user_data, i, code, nullptr, message.c_str());
      last_error.clear();
      return;
    }
    petrel_response response;
    response.translation = &r.value();
    response.input = &texts[i];
    for (const petrel::SentenceTranslation& sentence : r.value().sentences) {
      response.alignments.emplace_back();
      for (const auto& row : sentence.alignment)
        response.alignments.back().insert(response.alignments.back().end(), row.begin(), row.end());
    }
    sink(user_data, i, PETREL_OK, &response, nullptr);
  });
  if (!s) return fail(s.error());
  return PETREL_OK;
}

petrel_status petrel_translate_responses(const petrel_model* model, const char* isa, const char* const* texts,
                                         size_t count, const petrel_options* options,
                                         const petrel_batch_options* batching, petrel_response_sink sink,
                                         void* user_data) {
  return guarded([&] {
    if (model == nullptr || sink == nullptr || (count > 0 && texts == nullptr))
      return invalid("petrel_translate_responses: NULL argument");
    ManyTexts many;
    if (auto refused = many.prepare(model, isa, texts, count, options, batching, "petrel_translate_responses"))
      return *refused;
    return many.respond(sink, user_data);
  });
}

petrel_status petrel_translate_responses_via_pivot(const petrel_model* first_model, const petrel_model* second_model,
                                                   const char* isa, const char* const* texts, size_t count,
                                                   const petrel_options* options, const petrel_batch_options* batching,
                                                   petrel_response_sink sink, void* user_data) {
  return guarded([&] {
    if (first_model == nullptr || second_model == nullptr || sink == nullptr || (count > 0 && texts == nullptr))
      return invalid("petrel_translate_responses_via_pivot: NULL argument");
    if (auto refused = ManyTexts::refuse_for_pivot(first_model, "first_model")) return *refused;
    if (auto refused = ManyTexts::refuse_for_pivot(second_model, "second_model")) return *refused;
    ManyTexts many;
    if (auto refused = many.prepare(first_model, isa, texts, count, options, batching,
                                    "petrel_translate_responses_via_pivot"))
      return *refused;
    if (auto refused = many.prepare_pivot(second_model)) return *refused;
    return many.respond(sink, user_data);
  });
}

petrel_status petrel_translate_stream(petrel_session* session, const char* text, const petrel_options* options,
                                      petrel_token_fn on_token, void* user_data, char** translation) {
  return guarded([&] {
    petrel_options o;
    petrel_options_init_sized(&o, sizeof o);
    if (options != nullptr) {
      auto checked = to_cpp(options);  // the caller's struct_size must make sense
      if (!checked) return fail(checked.error());
      // An older caller's fields, whole blocks only (a size that ends inside a pointer must
      // not leave half of it behind); the rest keep their defaults.
      std::memcpy(&o, options, whole_blocks(options->struct_size));
      o.struct_size = sizeof o;
    }
    o.on_token = on_token;
    o.on_token_data = user_data;
    o.stream_text = 1;
    return petrel_translate_text(session, text, &o, translation);
  });
}

void petrel_generate_options_init_sized(petrel_generate_options* o, size_t size) {
  if (o == nullptr) return;
  petrel_generate_options defaults{};
  defaults.struct_size = sizeof(petrel_generate_options);
  defaults.do_sample = -1;
  defaults.temperature = defaults.top_p = defaults.min_p = defaults.repetition_penalty = NAN;
  defaults.top_k = -1;
  size = std::min(size, sizeof(petrel_generate_options));
  std::memcpy(static_cast<void*>(o), &defaults, size);
  if (size >= sizeof(size_t)) o->struct_size = size;
}

int petrel_model_is_decoder_only(const petrel_model* model) { return model && model->model->info().decoder_only; }

petrel_status petrel_generator_set_prompt_cache_bytes(petrel_session* session, size_t bytes) {
  return guarded([&] {
    if (session == nullptr) return invalid("petrel_generator_set_prompt_cache_bytes: NULL argument");
    if (!session->generator) return invalid("petrel_generator_set_prompt_cache_bytes: a translation model's session has no prompt cache");
    session->generator->set_prompt_cache_bytes(bytes);
    return PETREL_OK;
  });
}

petrel_status petrel_generator_save_prompt_cache(petrel_session* session, const char* path) {
  return guarded([&] {
    if (session == nullptr || path == nullptr) return invalid("petrel_generator_save_prompt_cache: NULL argument");
    if (!session->generator) return invalid("petrel_generator_save_prompt_cache: a translation model's session has no prompt cache");
    const petrel::Status saved = session->generator->save_prompt_cache(path);
    return saved ? PETREL_OK : fail(saved.error());
  });
}

petrel_status petrel_generator_load_prompt_cache(petrel_session* session, const char* path) {
  return guarded([&] {
    if (session == nullptr || path == nullptr) return invalid("petrel_generator_load_prompt_cache: NULL argument");
    if (!session->generator) return invalid("petrel_generator_load_prompt_cache: a translation model's session has no prompt cache");
    const petrel::Status loaded = session->generator->load_prompt_cache(path);
    return loaded ? PETREL_OK : fail(loaded.error());
  });
}

petrel_status petrel_generator_set_draft_model(petrel_session* session, const petrel_model* draft) {
  return guarded([&] {
    if (session == nullptr) return invalid("petrel_generator_set_draft_model: NULL session");
    if (!session->generator)
      return invalid("petrel_generator_set_draft_model: a translation model's session takes "
                     "petrel_translator_set_draft_model");
    const petrel::Status set = session->generator->set_draft_model(draft ? draft->model : nullptr);
    return set ? PETREL_OK : fail(set.error());
  });
}

petrel_status petrel_translator_set_draft_model(petrel_session* session, const petrel_model* draft) {
  return guarded([&] {
    if (session == nullptr) return invalid("petrel_translator_set_draft_model: NULL session");
    if (!session->translator)
      return invalid("petrel_translator_set_draft_model: a language model's session takes "
                     "petrel_generator_set_draft_model");
    const petrel::Status set = session->translator->set_draft_model(draft ? draft->model : nullptr);
    return set ? PETREL_OK : fail(set.error());
  });
}

petrel_status petrel_session_speculation_stats_sized(const petrel_session* session, petrel_speculation_stats* stats,
                                                     size_t size) {
  return guarded([&] {
    if (session == nullptr || stats == nullptr) return invalid("petrel_session_speculation_stats: NULL argument");
    if (size < sizeof(size_t))
      return invalid("petrel_session_speculation_stats: a struct of " + std::to_string(size) +
                     " bytes cannot hold its struct_size");
    petrel_speculation_stats s{};
    if (session->translator) {
      const petrel::TranslateTimings& t = session->translator->last_timings();
      s = {sizeof s, t.verifications, t.drafted_tokens, t.accepted_tokens, t.draft_model_tokens, t.generated_tokens};
    } else {
      const petrel::GenerateTimings& t = session->generator->last_timings();
      s = {sizeof s, t.verifications, t.drafted_tokens, t.accepted_tokens, t.draft_model_tokens, t.generated_tokens};
    }
    size = std::min(size, sizeof s);
    std::memcpy(static_cast<void*>(stats), &s, size);
    stats->struct_size = size;
    return PETREL_OK;
  });
}

petrel_status petrel_generate(petrel_session* session, const int32_t* prompt, size_t length,
                              const petrel_generate_options* o, petrel_result** result) {
  return guarded([&] {
    if (session == nullptr || result == nullptr || (length > 0 && prompt == nullptr))
      return invalid("petrel_generate: NULL argument");
    *result = nullptr;
    if (!session->generator) return invalid("petrel_generate: a translation model's session translates (petrel_translate_ids)");
    if (length > kMaxCallerIds)
      return invalid("petrel_generate: the prompt's length " + std::to_string(length) +
                     " is far over any model's positions");
    auto g = to_cpp(o);
    if (!g) return fail(g.error());
    auto generated = session->generator->generate({std::vector<int32_t>(prompt, prompt + length)}, g.value());
    if (!generated) return fail(generated.error());
    std::vector<petrel::Translation> out(1);
    const petrel::Generation& first = generated.value()[0];
    out[0].hypotheses.push_back({first.ids, 0.0, first.ended_on_eos, {}, {}});
    *result = new petrel_result{std::move(out), {}, {}};
    return PETREL_OK;
  });
}

petrel_status petrel_generate_text(petrel_session* session, const char* prompt, const petrel_generate_options* o,
                                   petrel_result** result) {
  return guarded([&] {
    if (session == nullptr || result == nullptr || prompt == nullptr) return invalid("petrel_generate_text: NULL argument");
    *result = nullptr;
    if (!session->generator) return invalid("petrel_generate_text: a translation model's session translates");
    auto g = to_cpp(o);
    if (!g) return fail(g.error());
    auto generated = session->generator->generate_text(prompt, g.value());
    if (!generated) return fail(generated.error());
    *result = text_result(std::move(generated.value()));
    return PETREL_OK;
  });
}

petrel_status petrel_apply_chat_template(petrel_session* session, const char* const* roles, const char* const* contents,
                                         size_t count, int add_generation_prompt, char** text) {
  return guarded([&] {
    if (session == nullptr || text == nullptr || (count > 0 && (roles == nullptr || contents == nullptr)))
      return invalid("petrel_apply_chat_template: NULL argument");
    *text = nullptr;
    if (!session->generator) return invalid("petrel_apply_chat_template: a translation model has no chat template");
    std::vector<petrel::ChatMessage> messages(count);
    for (size_t i = 0; i < count; ++i) {
      if (roles[i] == nullptr || contents[i] == nullptr) return invalid("petrel_apply_chat_template: NULL message");
      messages[i] = {roles[i], contents[i]};
    }
    auto rendered = session->generator->apply_chat_template(messages, add_generation_prompt != 0);
    if (!rendered) return fail(rendered.error());
    return copy_string(rendered.value(), text);
  });
}

petrel_status petrel_conversation_new(petrel_session* session, const char* system, petrel_conversation** conversation) {
  return guarded([&] {
    if (session == nullptr || conversation == nullptr) return invalid("petrel_conversation_new: NULL argument");
    *conversation = nullptr;
    if (!session->generator) return invalid("petrel_conversation_new: a translation model does not chat");
    auto created = petrel::Conversation::create(*session->generator, system ? system : "");
    if (!created) return fail(created.error());
    *conversation = new petrel_conversation{std::move(created.value())};
    return PETREL_OK;
  });
}

petrel_status petrel_conversation_reply(petrel_conversation* conversation, const char* message,
                                        const petrel_generate_options* o, petrel_result** result) {
  return guarded([&] {
    if (conversation == nullptr || message == nullptr || result == nullptr)
      return invalid("petrel_conversation_reply: NULL argument");
    *result = nullptr;
    auto g = to_cpp(o);
    if (!g) return fail(g.error());
    auto reply = conversation->conversation.reply(message, g.value());
    if (!reply) return fail(reply.error());
    *result = text_result(std::move(reply.value()));
    return PETREL_OK;
  });
}

petrel_status petrel_conversation_make_room(petrel_conversation* conversation, const char* message,
                                            size_t new_tokens, size_t* dropped) {
  return guarded([&] {
    if (conversation == nullptr || message == nullptr || dropped == nullptr)
      return invalid("petrel_conversation_make_room: NULL argument");
    *dropped = 0;
    auto made = conversation->conversation.make_room(message, new_tokens);
    if (!made) return fail(made.error());
    *dropped = made.value();
    return PETREL_OK;
  });
}

void petrel_conversation_free(petrel_conversation* conversation) { delete conversation; }

}  // extern "C"
