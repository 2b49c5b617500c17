// The C API over the C++ one: handles own C++ objects, errors become status codes
// plus a per-thread message, and no exception crosses the boundary.
#include "petrel/petrel.h"

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "petrel/translator.h"

struct petrel_model {
  std::shared_ptr<const petrel::Model> model;
};
struct petrel_session {
  petrel::Translator translator;
};
struct petrel_result {
  std::vector<petrel::Translation> translations;
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
  }
  return PETREL_INTERNAL;
}

petrel_status invalid(const char* message) { return fail({petrel::ErrorCode::kInvalidArgument, message}); }

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
  t.use_shortlist = o->use_shortlist != 0;
  t.kv_cache_f16 = o->kv_cache_f16 != 0;
  auto has = [&](size_t end_of_field) { return o->struct_size >= end_of_field; };
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

petrel_status load(petrel::Result<std::shared_ptr<const petrel::Model>> loaded, petrel_model** model) {
  if (!loaded) return fail(loaded.error());
  *model = new petrel_model{std::move(loaded.value())};
  return PETREL_OK;
}

}  // namespace

extern "C" {

const char* petrel_version(void) { return petrel::library_version(); }
uint32_t petrel_format_major(void) { return petrel::kFormatMajor; }
uint32_t petrel_format_minor(void) { return petrel::kFormatMinor; }
const char* petrel_last_error(void) { return last_error.c_str(); }

void petrel_options_init(petrel_options* o) {
  if (o == nullptr) return;
  petrel::TranslateOptions d;
  *o = {sizeof(petrel_options), d.beam_size, d.n_best, d.max_new_tokens, d.min_new_tokens, NAN,
        d.use_shortlist ? 1 : 0,  d.kv_cache_f16 ? 1 : 0, PETREL_BEAM_STOP_DEFAULT};
}

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
  return guarded([&] {
    if (model == nullptr || session == nullptr) return invalid("petrel_session_create: NULL argument");
    *session = nullptr;
    auto created = petrel::Translator::create(model->model, {isa ? isa : "", threads});
    if (!created) return fail(created.error());
    *session = new petrel_session{std::move(created.value())};
    return PETREL_OK;
  });
}

void petrel_session_free(petrel_session* session) { delete session; }

const char* petrel_session_isa(const petrel_session* session) { return session ? session->translator.isa() : ""; }

petrel_status petrel_translate_ids(petrel_session* session, const int32_t* const* inputs, const size_t* lengths,
                                   size_t batch, const petrel_options* options, petrel_result** result) {
  return guarded([&] {
    if (session == nullptr || result == nullptr || (batch > 0 && (inputs == nullptr || lengths == nullptr)))
      return invalid("petrel_translate_ids: NULL argument");
    *result = nullptr;
    std::vector<std::vector<int32_t>> cpp(batch);
    for (size_t i = 0; i < batch; ++i) {
      if (inputs[i] == nullptr && lengths[i] > 0) return invalid("petrel_translate_ids: NULL input");
      cpp[i].assign(inputs[i], inputs[i] + lengths[i]);
    }
    auto cpp_options = to_cpp(options);
    if (!cpp_options) return fail(cpp_options.error());
    auto translated = session->translator.translate(cpp, cpp_options.value());
    if (!translated) return fail(translated.error());
    *result = new petrel_result{std::move(translated.value())};
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

void petrel_result_free(petrel_result* result) { delete result; }

petrel_status petrel_translate_text(petrel_session* session, const char* text, const petrel_options* options,
                                    char** translation) {
  return guarded([&] {
    if (session == nullptr || text == nullptr || translation == nullptr)
      return invalid("petrel_translate_text: NULL argument");
    *translation = nullptr;
    const petrel::Model& model = session->translator.model();
    auto cpp_options = to_cpp(options);
    if (!cpp_options) return fail(cpp_options.error());
    auto ids = petrel::encode_text(model, text);
    if (!ids) return fail(ids.error());
    auto translated = session->translator.translate({ids.value()}, cpp_options.value());
    if (!translated) return fail(translated.error());
    const auto& hypotheses = translated.value()[0].hypotheses;
    if (hypotheses.empty())
      return invalid("petrel_translate_text: no token could be generated for this input (every candidate was "
                     "masked: min_new_tokens with a shortlist that allows only EOS?)");
    auto out = petrel::decode_text(model, hypotheses[0].ids);
    if (!out) return fail(out.error());
    *translation = static_cast<char*>(std::malloc(out.value().size() + 1));
    if (*translation == nullptr) return fail({petrel::ErrorCode::kInternal, "out of memory"});
    std::memcpy(*translation, out.value().c_str(), out.value().size() + 1);
    return PETREL_OK;
  });
}

void petrel_string_free(char* text) { std::free(text); }

}  // extern "C"
