// petrel._petrel: the engine's C++ API for the Python package (bindings/python/petrel,
// which gives it its Python shape). A _Model holds a loaded model and the sessions that
// run it (a BatchTranslator, a Translator for streaming, a Generator), each created at
// its first use. Every call into the engine releases the GIL; each session has a mutex,
// taken after the GIL is released, so Python threads sharing a _Model take turns. A
// Python callback (streaming) runs on the engine's thread with the GIL re-acquired; an
// exception it raises stops the call and is raised when the call returns.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common.h"

namespace petrel::python {

const char* code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "InvalidArgument";
    case ErrorCode::kIo: return "Io";
    case ErrorCode::kFormat: return "Format";
    case ErrorCode::kUnsupported: return "Unsupported";
    case ErrorCode::kInternal: return "Internal";
    case ErrorCode::kOutOfMemory: return "OutOfMemory";
    case ErrorCode::kCancelled: return "Cancelled";
  }
  return "Internal";
}

py::str to_str(std::string_view text) {
  PyObject* s = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  if (s == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s);
}

std::string utf8(const py::handle& object, const std::string& what) {
  if (!PyUnicode_Check(object.ptr()))
    throw py::type_error(what + " must be a str, not " + std::string(py::str(object.get_type().attr("__name__"))));
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(object.ptr(), &size);
  if (data == nullptr) throw py::error_already_set();  // a lone surrogate
  return std::string(data, static_cast<size_t>(size));
}

namespace {

// --- Arguments -------------------------------------------------------------------------

std::vector<std::string> text_list(const py::handle& texts, const std::string& what) {
  if (PyUnicode_Check(texts.ptr()) || !PySequence_Check(texts.ptr()))
    throw py::type_error(what + " must be a list of str");
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(PySequence_Size(texts.ptr())));
  for (py::handle t : texts) out.push_back(utf8(t, what + "[" + std::to_string(out.size()) + "]"));
  return out;
}

std::vector<int32_t> id_list(const py::handle& ids, const std::string& what) {
  if (PyUnicode_Check(ids.ptr()) || !PySequence_Check(ids.ptr()))
    throw py::type_error(what + " must be a list of int token ids");
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(PySequence_Size(ids.ptr())));
  for (py::handle item : ids) {
    if (PyBool_Check(item.ptr()) || !PyIndex_Check(item.ptr()))
      throw py::type_error(what + " must be a list of int token ids, not a list holding " +
                           std::string(py::str(item.get_type().attr("__name__"))));
    py::int_ i = py::reinterpret_steal<py::int_>(PyNumber_Index(item.ptr()));
    int overflow = 0;
    const long long id = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
    if (overflow != 0 || id < INT32_MIN || id > INT32_MAX)
      raise_error(ErrorCode::kInvalidArgument, what + ", position " + std::to_string(out.size() + 1) +
                                                   ": token id " + std::string(py::str(i)) + " is out of range");
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

std::vector<std::vector<int32_t>> id_batch(const py::handle& batch, const std::string& what) {
  if (PyUnicode_Check(batch.ptr()) || !PySequence_Check(batch.ptr()))
    throw py::type_error(what + " must be a list of lists of int token ids");
  std::vector<std::vector<int32_t>> out;
  for (py::handle ids : batch) out.push_back(id_list(ids, what + "[" + std::to_string(out.size()) + "]"));
  return out;
}

std::vector<std::pair<std::string, bool>> template_flags(const py::object& flags) {
  std::vector<std::pair<std::string, bool>> out;
  if (flags.is_none()) return out;
  if (!PyDict_Check(flags.ptr())) throw py::type_error("template_flags must be a dict of str to bool");
  for (auto item : py::reinterpret_borrow<py::dict>(flags)) {
    if (!PyBool_Check(item.second.ptr()))
      throw py::type_error("template_flags['" + utf8(item.first, "a template flag's name") + "'] must be a bool");
    out.emplace_back(utf8(item.first, "a template flag's name"), item.second.cast<bool>());
  }
  return out;
}

std::vector<ChatMessage> chat_messages(const py::handle& messages) {
  if (PyUnicode_Check(messages.ptr()) || !PySequence_Check(messages.ptr()))
    throw py::type_error("messages must be a list of {'role': ..., 'content': ...} dicts");
  std::vector<ChatMessage> out;
  for (py::handle m : messages) {
    const std::string where = "messages[" + std::to_string(out.size()) + "]";
    if (PyDict_Check(m.ptr())) {
      py::dict d = py::reinterpret_borrow<py::dict>(m);
      if (!d.contains("role") || !d.contains("content"))
        throw py::value_error(where + " must have 'role' and 'content'");
      out.push_back({utf8(d["role"], where + "['role']"), utf8(d["content"], where + "['content']")});
    } else if (PyTuple_Check(m.ptr()) && PyTuple_Size(m.ptr()) == 2) {
      py::tuple t = py::reinterpret_borrow<py::tuple>(m);
      out.push_back({utf8(t[0], where + "[0]"), utf8(t[1], where + "[1]")});
    } else {
      throw py::type_error(where + " must be a {'role': ..., 'content': ...} dict or a (role, content) tuple");
    }
  }
  return out;
}

// --- Calls without the GIL ---------------------------------------------------------------

// A Python callable the engine calls on its thread (TranslateOptions / GenerateOptions::
// on_token). It returns False to stop; None or anything true goes on. The first exception
// it raises stops the call (every later event returns false) and is raised afterwards.
class PythonTokenCallback {
 public:
  explicit PythonTokenCallback(py::object fn) : fn_(std::move(fn)) {}
  ~PythonTokenCallback() {
    py::gil_scoped_acquire gil;  // the stored error and function hold Python objects
    error_.reset();
    fn_ = py::object();
  }

  bool operator()(const TokenEvent& event) {
    py::gil_scoped_acquire gil;
    if (error_) return false;
    try {
      py::object answer = fn_(token_event_record(event));
      if (answer.is_none()) return true;
      const int truth = PyObject_IsTrue(answer.ptr());
      if (truth < 0) throw py::error_already_set();
      return truth == 1;
    } catch (py::error_already_set& e) {
      error_ = std::make_unique<py::error_already_set>(std::move(e));
    } catch (const std::exception& e) {  // a conversion of ours (out of memory)
      PyErr_SetString(PyExc_RuntimeError, e.what());
      error_ = std::make_unique<py::error_already_set>();
    }
    return false;
  }

  // With the GIL: raises what the callable raised, if it did.
  void raise_if_failed() {
    if (error_) {
      py::error_already_set e = std::move(*error_);
      error_.reset();
      throw e;
    }
  }

  // The engine copies its options (and so their on_token): the copies call this object
  // through a pointer, so no Python reference is copied without the GIL.
  TokenCallback as_engine_callback() {
    return [this](const TokenEvent& event) { return (*this)(event); };
  }

 private:
  py::object fn_;
  std::unique_ptr<py::error_already_set> error_;
};

struct ActiveCall {
  std::atomic<long>& count;
  explicit ActiveCall(std::atomic<long>& c) : count(c) { ++count; }
  ~ActiveCall() { --count; }
};

// Runs `body` without the GIL when this thread holds it: a destructor may run with it (Python
// releasing an object) or without (the interpreter's exit).
template <class Body>
void without_gil_if_held(Body&& body) {
  if (Py_IsInitialized() && PyGILState_Check()) {
    py::gil_scoped_release release;
    body();
  } else {
    body();
  }
}

size_t hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

// --- A loaded model and its sessions ----------------------------------------------------

class ModelHandle {
 public:
  ModelHandle(std::shared_ptr<const Model> model, TranslatorOptions options, size_t workers, std::string name)
      : model_(std::move(model)), options_(std::move(options)), workers_(workers), name_(std::move(name)) {}

  ~ModelHandle() {
    // Sessions join their threads: without the GIL, so a thread of theirs waiting for it
    // (a callback) cannot hold them up.
    without_gil_if_held([this] { reset_sessions(); });
  }

  const Model& model() const { return *model_; }
  const std::shared_ptr<const Model>& shared_model() const { return model_; }
  const TranslatorOptions& options() const { return options_; }
  size_t workers() const { return workers_; }
  const std::string& name() const { return name_; }
  long active_calls() const { return active_.load(); }

  // Runs `body` without the GIL, counted in active_calls().
  template <class Body>
  auto without_gil(Body&& body) {
    ActiveCall active(active_);
    py::gil_scoped_release release;
    return body();
  }
  // Runs `body` without the GIL with `mutex` (a session's) held.
  template <class Mutex, class Body>
  auto locked(Mutex& mutex, Body&& body) {
    return without_gil([&] {
      std::lock_guard<Mutex> lock(mutex);
      return body();
    });
  }

  // Each of these: call with its mutex held. A session made after set_draft_model gets the
  // draft model too (it was checked against this model then).
  BatchTranslator& batch_translator() {
    if (!batch_) {
      auto made = std::make_unique<BatchTranslator>(value_or_raise(BatchTranslator::create(model_, options_, workers_)));
      if (draft_) check(made->set_draft_model(draft_));
      batch_ = std::move(made);
    }
    return *batch_;
  }
  Translator& translator() {
    if (!translator_) {
      auto made = std::make_unique<Translator>(value_or_raise(Translator::create(model_, options_)));
      if (draft_) check(made->set_draft_model(draft_));
      translator_ = std::move(made);
    }
    return *translator_;
  }
  Generator& generator() {
    if (!generator_) {
      auto made = std::make_unique<Generator>(value_or_raise(Generator::create(model_, options_)));
      if (draft_) check(made->set_draft_model(draft_));
      generator_ = std::move(made);
    }
    return *generator_;
  }
  // Speculative decoding's draft model for every session of this model (null: none). The
  // engine checks it (on a Generator for a language model, a Translator otherwise) before
  // any session takes it, so a refused one changes nothing. Call with the GIL released.
  void set_draft_model(std::shared_ptr<const Model> draft) {
    std::lock_guard<std::recursive_mutex> g(generator_mutex);
    std::lock_guard<std::recursive_mutex> t(translator_mutex);
    std::lock_guard<std::mutex> b(batch_mutex);
    if (model_->info().decoder_only) {
      check(generator().set_draft_model(draft));
    } else {
      check(translator().set_draft_model(draft));
      if (batch_) check(batch_->set_draft_model(draft));
    }
    draft_ = std::move(draft);
  }
  bool has_translator() const { return translator_ != nullptr; }
  bool has_batch_translator() const { return batch_ != nullptr; }
  bool has_generator() const { return generator_ != nullptr; }

  std::mutex batch_mutex;
  // Recursive: a callback that calls back into its own session on the same thread gets
  // the engine's error for it (a call while another runs), not a deadlock.
  std::recursive_mutex translator_mutex;
  std::recursive_mutex generator_mutex;

 private:
  void reset_sessions() {
    std::lock_guard<std::recursive_mutex> g(generator_mutex);
    std::lock_guard<std::recursive_mutex> t(translator_mutex);
    std::lock_guard<std::mutex> b(batch_mutex);
    batch_.reset();
    translator_.reset();
    generator_.reset();
  }

  std::shared_ptr<const Model> model_;
  std::shared_ptr<const Model> draft_;  // set_draft_model's
  TranslatorOptions options_;
  size_t workers_ = 1;
  std::string name_;
  std::atomic<long> active_{0};
  std::unique_ptr<BatchTranslator> batch_;
  std::unique_ptr<Translator> translator_;
  std::unique_ptr<Generator> generator_;
};

using Handle = std::shared_ptr<ModelHandle>;

TranslatorOptions session_options(const std::string& isa, size_t threads, const std::string& activation_scales) {
  TranslatorOptions options;
  if (!isa.empty()) {
    const std::vector<std::string> runnable = runnable_isas();
    if (std::find(runnable.begin(), runnable.end(), isa) == runnable.end()) {
      std::string listed;
      for (const auto& name : runnable) listed += (listed.empty() ? "" : ", ") + name;
      raise_error(ErrorCode::kUnsupported, "isa '" + isa + "' is unknown or this CPU cannot run it (runnable here: " +
                                               listed + ")");
    }
  }
  options.isa = isa;
  options.threads = threads == 0 ? hardware_threads() : threads;
  if (!parse_activation_scales(activation_scales, &options.activation_scales))
    throw py::value_error("activation_scales must be 'dynamic' or 'file', not '" + activation_scales + "'");
  return options;
}

void check_workers(size_t workers) {
  if (workers < 1 || workers > 64) throw py::value_error("workers must be in 1..64, not " + std::to_string(workers));
}

Handle load(const std::string& path, const std::string& isa, size_t threads, const std::string& activation_scales,
            size_t workers) {
  TranslatorOptions options = session_options(isa, threads, activation_scales);
  check_workers(workers);
  std::shared_ptr<const Model> model;
  {
    py::gil_scoped_release release;
    model = value_or_raise(Model::load(path));
  }
  return std::make_shared<ModelHandle>(std::move(model), std::move(options), workers, path);
}

Handle load_bytes(const py::object& data, const std::string& name, const std::string& isa, size_t threads,
                  const std::string& activation_scales, size_t workers) {
  TranslatorOptions options = session_options(isa, threads, activation_scales);
  check_workers(workers);
  // The bytes as one contiguous run (PyBUF_SIMPLE refuses anything else), pinned (a
  // bytearray cannot be resized) while the engine copies them without the GIL.
  Py_buffer view;
  if (PyObject_GetBuffer(data.ptr(), &view, PyBUF_SIMPLE) != 0) throw py::error_already_set();
  std::unique_ptr<Py_buffer, void (*)(Py_buffer*)> pinned(&view, PyBuffer_Release);
  const void* bytes = view.buf;
  const size_t size = static_cast<size_t>(view.len);
  std::shared_ptr<const Model> model;
  {
    py::gil_scoped_release release;
    model = value_or_raise(Model::load_from_memory(bytes, size, name));
  }
  return std::make_shared<ModelHandle>(std::move(model), std::move(options), workers, name);
}

// --- Translation ---------------------------------------------------------------------------

// The results a BatchTranslator delivers: `call(deliver)` runs it and returns its status,
// `deliver` keeping each of the `inputs` results. The first failed input's error is raised.
template <class T, class Call>
std::vector<T> delivered(size_t inputs, Call&& call) {
  std::vector<std::optional<Result<T>>> results(inputs);
  check(call([&results](size_t i, Result<T>&& r) { results[i].emplace(std::move(r)); }));
  std::vector<T> out;
  out.reserve(results.size());
  for (auto& r : results) {
    if (!r) raise_error(ErrorCode::kInternal, "an input was not delivered");
    if (!*r) raise_error(r->error());
    out.push_back(std::move(*r).value());
  }
  return out;
}

// Runs `call` on a session (without the GIL, `mutex` held) with `*engine_on_token` calling
// the Python callable `on_token` unless that is None. What the callable raised is raised
// before the engine's error.
template <class Mutex, class Call>
auto with_token_callback(ModelHandle& h, Mutex& mutex, TokenCallback* engine_on_token, const py::object& on_token,
                         Call&& call) {
  std::optional<PythonTokenCallback> callback;
  if (!on_token.is_none()) {
    callback.emplace(on_token);
    *engine_on_token = callback->as_engine_callback();
  }
  auto result = h.locked(mutex, call);
  if (callback) callback->raise_if_failed();
  return value_or_raise(std::move(result));
}

void refuse_batching_with_stream(const TranslateRequest& request, const std::string& where) {
  if (request.batching_given)
    throw py::value_error(where + "(): " + request.batching_field +
                          " does not apply when streaming (a streamed translation runs on one session, "
                          "without BatchOptions)");
}

// One translate call of `inputs` inputs: streamed on the model's Translator when `on_token`
// is given (without BatchOptions), else on its BatchTranslator. `stream(translator)` and
// `batch(batch_translator, deliver)` make the engine's call.
template <class T, class Stream, class Batch>
std::vector<T> translations(ModelHandle& h, TranslateRequest& request, const std::string& where,
                            const py::object& on_token, size_t inputs, Stream&& stream, Batch&& batch) {
  if (!on_token.is_none()) {
    refuse_batching_with_stream(request, where);
    return with_token_callback(h, h.translator_mutex, &request.options.on_token, on_token,
                               [&] { return stream(h.translator()); });
  }
  return delivered<T>(inputs, [&](const auto& deliver) {
    return h.locked(h.batch_mutex, [&] { return batch(h.batch_translator(), deliver); });
  });
}

py::list text_translation_records(const std::vector<TextTranslation>& translations,
                                  const std::vector<std::string>& texts) {
  py::list out(translations.size());
  for (size_t i = 0; i < translations.size(); ++i) out[i] = text_translation_record(translations[i], texts[i]);
  return out;
}

py::list translate_text(ModelHandle& h, const py::object& texts_object, const py::dict& options,
                        const py::object& on_token) {
  const std::string where = "Model.translate";
  const std::vector<std::string> texts = text_list(texts_object, "texts");
  TranslateRequest request = read_translate_options(options, where);
  if (!on_token.is_none()) request.options.stream_text = true;
  const TranslateOptions& o = request.options;
  const std::vector<TextTranslation> results = translations<TextTranslation>(
      h, request, where, on_token, texts.size(),
      [&](Translator& translator) { return translator.translate_text(texts, o); },
      [&](BatchTranslator& batch, const auto& deliver) {
        return batch.translate_text(texts, o, request.batching, deliver);
      });
  return text_translation_records(results, texts);
}

py::list translate_ids(ModelHandle& h, const py::object& batch_object, const py::dict& options,
                       const py::object& on_token) {
  const std::string where = "Model.translate_ids";
  const std::vector<std::vector<int32_t>> inputs = id_batch(batch_object, "inputs");
  TranslateRequest request = read_translate_options(options, where);
  const TranslateOptions& o = request.options;
  const std::vector<Translation> results = translations<Translation>(
      h, request, where, on_token, inputs.size(),
      [&](Translator& translator) { return translator.translate(inputs, o); },
      [&](BatchTranslator& batch, const auto& deliver) {
        return batch.translate(inputs, o, request.batching, deliver);
      });
  return list_of(results, translation_record);
}

py::list translate_via_pivot_py(ModelHandle& first, ModelHandle& second, const py::object& texts_object,
                                const py::dict& options) {
  const std::vector<std::string> texts = text_list(texts_object, "texts");
  TranslateRequest request = read_translate_options(options, "translate_via_pivot");
  const std::vector<TextTranslation> results = delivered<TextTranslation>(texts.size(), [&](const auto& deliver) {
    return first.without_gil([&]() -> Status {
      if (&first == &second) {
        // One model both ways: its session for the first hop, one of its own for the second
        // (a BatchTranslator's calls must not overlap).
        std::lock_guard<std::mutex> lock(first.batch_mutex);
        auto other = BatchTranslator::create(first.shared_model(), first.options(), first.workers());
        if (!other) return other.error();
        return translate_via_pivot(first.batch_translator(), other.value(), texts, request.options, request.batching,
                                   deliver);
      }
      std::scoped_lock lock(first.batch_mutex, second.batch_mutex);
      return translate_via_pivot(first.batch_translator(), second.batch_translator(), texts, request.options,
                                 request.batching, deliver);
    });
  });
  return text_translation_records(results, texts);
}

py::dict resolved_translate_options(ModelHandle& h, const py::dict& options) {
  TranslateRequest request = read_translate_options(options, "Model.resolve_translate_options");
  const TranslateOptions o = value_or_raise(resolve_options(h.model(), request.options));
  py::dict r = make_record();
  r["beam_size"] = o.beam_size;
  r["n_best"] = o.n_best;
  r["max_new_tokens"] = o.max_new_tokens;
  r["max_length_factor"] = o.max_length_factor;
  r["min_new_tokens"] = o.min_new_tokens;
  r["length_penalty"] = value_or_none(o.length_penalty);
  r["beam_stop"] = to_string(o.beam_stop);
  r["use_shortlist"] = value_or_none(o.use_shortlist);
  r["kv_cache_f16"] = o.kv_cache_f16;
  r["target_prefix"] = list_of(o.target_prefix, [](int32_t id) { return py::int_(id); });
  r["target_language"] = o.target_language;
  r["source_language"] = o.source_language;
  r["alignment"] = o.alignment;
  r["alignment_layer"] = value_or_none(o.alignment_layer);
  r["alignment_head"] = o.alignment_head;
  r["token_scores"] = o.token_scores;
  r["quality_scores"] = o.quality_scores;
  r["html"] = o.html;
  r["lookup_ngram"] = o.lookup_ngram;
  r["max_draft_tokens"] = o.max_draft_tokens;
  return r;
}

// --- Generation ------------------------------------------------------------------------------

py::list generate_ids(ModelHandle& h, const py::object& prompts_object, const py::dict& options,
                      const py::object& on_token) {
  const std::vector<std::vector<int32_t>> prompts = id_batch(prompts_object, "prompts");
  GenerateOptions o = read_generate_options(options, "Model.generate");
  const std::vector<Generation> generations = with_token_callback(h, h.generator_mutex, &o.on_token, on_token,
                                                                  [&] { return h.generator().generate(prompts, o); });
  return list_of(generations, generation_record);
}

py::dict generate_text(ModelHandle& h, const py::object& prompt_object, const py::dict& options,
                       const py::object& on_token) {
  const std::string prompt = utf8(prompt_object, "prompt");
  GenerateOptions o = read_generate_options(options, "Model.generate");
  return text_generation_record(with_token_callback(h, h.generator_mutex, &o.on_token, on_token,
                                                    [&] { return h.generator().generate_text(prompt, o); }));
}

py::dict resolved_generate_options(ModelHandle& h, const py::dict& options) {
  const GenerateOptions o =
      value_or_raise(resolve_generate_options(h.model(), read_generate_options(options, "Model.resolve_generate_options")));
  py::dict r = make_record();
  r["max_new_tokens"] = o.max_new_tokens;
  r["do_sample"] = value_or_none(o.do_sample);
  r["temperature"] = value_or_none(o.temperature);
  r["top_k"] = value_or_none(o.top_k);
  r["top_p"] = value_or_none(o.top_p);
  r["min_p"] = value_or_none(o.min_p);
  r["repetition_penalty"] = value_or_none(o.repetition_penalty);
  r["seed"] = o.seed;
  r["ignore_eos"] = o.ignore_eos;
  r["kv_cache_f16"] = o.kv_cache_f16;
  r["kv_cache_int8"] = o.kv_cache_int8;
  r["stop"] = list_of(o.stop, to_str);
  r["grammar"] = to_str(o.grammar);
  r["json_schema"] = to_str(o.json_schema);
  r["lookup_ngram"] = o.lookup_ngram;
  r["max_draft_tokens"] = o.max_draft_tokens;
  return r;
}

// A conversation keeps its model's handle (and so the Generator it runs on) alive.
class ConversationHandle {
 public:
  ConversationHandle(Handle model, const std::string& system, const py::object& flags) : model_(std::move(model)) {
    auto template_options = template_flags(flags);
    conversation_ = model_->locked(model_->generator_mutex, [&] {
      return std::make_unique<Conversation>(
          value_or_raise(Conversation::create(model_->generator(), system, std::move(template_options))));
    });
  }
  ~ConversationHandle() {
    // The conversation's caches belong to its generator's session: released under its mutex.
    without_gil_if_held([this] {
      std::lock_guard<std::recursive_mutex> lock(model_->generator_mutex);
      conversation_.reset();
    });
  }

  py::dict reply(const py::object& message_object, const py::dict& options, const py::object& on_token) {
    const std::string message = utf8(message_object, "message");
    GenerateOptions o = read_generate_options(options, "Conversation.reply");
    return text_generation_record(with_token_callback(*model_, model_->generator_mutex, &o.on_token, on_token,
                                                      [&] { return conversation_->reply(message, o); }));
  }

  size_t make_room(const py::object& message_object, size_t new_tokens) {
    const std::string message = utf8(message_object, "message");
    return value_or_raise(
        model_->locked(model_->generator_mutex, [&] { return conversation_->make_room(message, new_tokens); }));
  }

  py::list messages() {
    std::vector<ChatMessage> copy = model_->locked(model_->generator_mutex, [&] { return conversation_->messages(); });
    return list_of(copy, [](const ChatMessage& m) {
      py::dict d;
      d["role"] = to_str(m.role);
      d["content"] = to_str(m.content);
      return d;
    });
  }

 private:
  Handle model_;
  std::unique_ptr<Conversation> conversation_;
};

// --- The model's other calls ------------------------------------------------------------

py::list output_token_list(ModelHandle& h, const std::vector<int32_t>& ids) {
  return list_of(value_or_raise(h.without_gil([&] { return output_tokens(h.model(), ids); })), to_str);
}

// `value` as its record; None when there is none (a session's figures before its first call).
template <class T, class ToRecord>
py::object record_or_none(const std::optional<T>& value, ToRecord&& to_record) {
  return value ? py::object(to_record(*value)) : py::object(py::none());
}

}  // namespace
}  // namespace petrel::python

using namespace petrel;
using namespace petrel::python;

PYBIND11_MODULE(_petrel, m) {
  m.doc() = "Petrel's engine for the petrel package (use the package, not this module).";

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const EngineError& e) {
      try {
        py::object error = py::module_::import("petrel._errors")
                               .attr("engine_error")(code_name(e.error.code), to_str(e.error.message));
        PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
      } catch (py::error_already_set& failure) {
        failure.restore();
      }
    }
  });

  m.def("library_version", [] { return std::string(library_version()); });
  m.def("runnable_isas", [] { return runnable_isas(); });
  m.attr("MAX_BATCH_SIZE") = kMaxBatchSize;
  m.attr("MAX_BEAM_SIZE") = kMaxBeamSize;
  m.attr("MAX_STOP_STRINGS") = kMaxStopStrings;
  m.attr("MAX_STOP_BYTES") = kMaxStopBytes;

  m.def("hard_alignment", [](const std::vector<std::vector<float>>& soft, float threshold) {
    return list_of(hard_alignment(soft, threshold),
                   [](const std::pair<size_t, size_t>& pair) { return py::make_tuple(pair.first, pair.second); });
  }, py::arg("soft"), py::arg("threshold") = 1.0f);

  py::class_<CancelFlag, std::shared_ptr<CancelFlag>>(m, "CancelFlag",
      "Cancels a translation from any thread (BatchOptions::cancel): once set, no batch starts, running ones stop "
      "after their current step, and inputs not yet delivered fail with petrel.CancelledError.")
      .def(py::init<>())
      .def("set", [](CancelFlag& c) { c.flag = true; })
      .def("clear", [](CancelFlag& c) { c.flag = false; })
      .def("is_set", [](const CancelFlag& c) { return c.flag.load(); });

  py::class_<CacheHolder, std::shared_ptr<CacheHolder>>(m, "TranslationCache",
      "Sentence translations kept across calls (any number of models and threads), least recently used out first.")
      .def(py::init([](size_t capacity_bytes) {
             return std::make_shared<CacheHolder>(CacheHolder{TranslationCache::create(capacity_bytes)});
           }),
           py::arg("capacity_bytes") = size_t{16} << 20)
      .def("stats", [](const CacheHolder& c) {
        const auto s = c.cache->stats();
        py::dict r = make_record();
        r["hits"] = s.hits;
        r["misses"] = s.misses;
        r["entries"] = s.entries;
        r["bytes"] = s.bytes;
        return r;
      })
      .def("clear", [](CacheHolder& c) { c.cache->clear(); });

  py::class_<QualityHolder, std::shared_ptr<QualityHolder>>(m, "QualityModel",
      "bergamot's logistic-regression quality estimator (a .quality.lr file).");
  m.def("load_quality_model", [](const std::string& path) {
    return std::make_shared<QualityHolder>(QualityHolder{value_or_raise(load_quality_model(path))});
  }, py::arg("path"));
  m.def("parse_quality_model", [](const py::bytes& data, const std::string& name) {
    const std::string bytes = data;
    return std::make_shared<QualityHolder>(QualityHolder{value_or_raise(parse_quality_model(bytes.data(), bytes.size(), name))});
  }, py::arg("data"), py::arg("name") = "<memory>");

  py::class_<ModelHandle, Handle>(m, "_Model")
      .def_static("load", &load, py::arg("path"), py::arg("isa") = "", py::arg("threads") = 1,
                  py::arg("activation_scales") = "dynamic", py::arg("workers") = 1)
      .def_static("load_bytes", &load_bytes, py::arg("data"), py::arg("name") = "<memory>", py::arg("isa") = "",
                  py::arg("threads") = 1, py::arg("activation_scales") = "dynamic", py::arg("workers") = 1)
      .def("share", [](const ModelHandle& h) {
        return std::make_shared<ModelHandle>(h.shared_model(), h.options(), h.workers(), h.name());
      }, "A handle on the same loaded model with sessions of its own")
      .def_property_readonly("name", &ModelHandle::name)
      .def_property_readonly("threads", [](const ModelHandle& h) { return h.options().threads; })
      .def_property_readonly("workers", &ModelHandle::workers)
      .def_property_readonly("activation_scales", [](const ModelHandle& h) { return std::string(to_string(h.options().activation_scales)); })
      .def_property_readonly("active_calls", &ModelHandle::active_calls,
                             "Calls running in the engine now (without the GIL)")
      .def("isa", [](ModelHandle& h) {
        // The kernel path a session of this model uses (the one asked for, else the best).
        if (!h.options().isa.empty()) return h.options().isa;
        const auto runnable = runnable_isas();
        return runnable.empty() ? std::string() : runnable.back();
      })
      .def("info", [](const ModelHandle& h) { return info_record(h.model().info()); })
      .def("vocab", [](const ModelHandle& h) { return list_of(h.model().info().vocab, to_str); })
      .def("output_tokens", [](ModelHandle& h, const py::object& ids_object) {
        return output_token_list(h, id_list(ids_object, "ids"));
      })
      .def("target_vocab", [](ModelHandle& h) {
        std::vector<int32_t> ids(h.model().info().target_vocab_size);
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
        return output_token_list(h, ids);
      })
      .def("tokenize", [](ModelHandle& h, const py::object& text_object, const std::string& source_language) {
        const std::string text = utf8(text_object, "text");
        const TokenizedText tokens = value_or_raise(h.without_gil([&] { return tokenize(h.model(), text, source_language); }));
        const CharOffsets offsets(text);
        return tokenized_record(tokens, &offsets);
      }, py::arg("text"), py::arg("source_language") = "")
      .def("encode_text", [](ModelHandle& h, const py::object& text_object) {
        const std::string text = utf8(text_object, "text");
        return value_or_raise(h.without_gil([&] { return encode_text(h.model(), text); }));
      })
      .def("decode_text", [](ModelHandle& h, const py::object& ids_object) {
        const std::vector<int32_t> ids = id_list(ids_object, "ids");
        return to_str(value_or_raise(h.without_gil([&] { return decode_text(h.model(), ids); })));
      })
      .def("set_draft_model", [](ModelHandle& h, const py::object& draft) {
        std::shared_ptr<const Model> model;
        if (!draft.is_none()) {
          if (!py::isinstance<ModelHandle>(draft)) throw py::type_error("draft_model must be a petrel.Model or None");
          model = draft.cast<ModelHandle&>().shared_model();
        }
        h.without_gil([&] { h.set_draft_model(std::move(model)); });
      }, py::arg("draft"))
      .def("verify_data", [](ModelHandle& h) { check(h.without_gil([&] { return h.model().verify_data(); })); })
      .def("translate_text", &translate_text, py::arg("texts"), py::arg("options"), py::arg("on_token") = py::none())
      .def("translate_ids", &translate_ids, py::arg("inputs"), py::arg("options"), py::arg("on_token") = py::none())
      .def("resolve_translate_options", &resolved_translate_options)
      .def("last_translate_timings", [](ModelHandle& h) {
        return record_or_none(h.locked(h.translator_mutex, [&]() -> std::optional<TranslateTimings> {
          if (!h.has_translator()) return std::nullopt;
          return h.translator().last_timings();
        }), translate_timings_record);
      })
      .def("last_batch_totals", [](ModelHandle& h) {
        return record_or_none(h.locked(h.batch_mutex, [&]() -> std::optional<BatchTotals> {
          if (!h.has_batch_translator()) return std::nullopt;
          return h.batch_translator().last_totals();
        }), batch_totals_record);
      })
      .def("generate_ids", &generate_ids, py::arg("prompts"), py::arg("options"), py::arg("on_token") = py::none())
      .def("generate_text", &generate_text, py::arg("prompt"), py::arg("options"), py::arg("on_token") = py::none())
      .def("resolve_generate_options", &resolved_generate_options)
      .def("last_generate_timings", [](ModelHandle& h) {
        return record_or_none(h.locked(h.generator_mutex, [&]() -> std::optional<GenerateTimings> {
          if (!h.has_generator()) return std::nullopt;
          return h.generator().last_timings();
        }), generate_timings_record);
      })
      .def("apply_chat_template", [](ModelHandle& h, const py::object& messages_object, bool add_generation_prompt,
                                     const py::object& flags) {
        const std::vector<ChatMessage> messages = chat_messages(messages_object);
        const auto template_options = template_flags(flags);
        return to_str(value_or_raise(h.locked(h.generator_mutex, [&] {
          return h.generator().apply_chat_template(messages, add_generation_prompt, template_options);
        })));
      }, py::arg("messages"), py::arg("add_generation_prompt") = true, py::arg("template_flags") = py::none())
      .def("max_prompt_bytes", [](ModelHandle& h) {
        return h.locked(h.generator_mutex, [&] { return h.generator().max_prompt_bytes(); });
      })
      .def("set_prompt_cache_bytes", [](ModelHandle& h, size_t bytes) {
        h.locked(h.generator_mutex, [&] { h.generator().set_prompt_cache_bytes(bytes); });
      })
      .def("prompt_cache_stats", [](ModelHandle& h) {
        const PromptCacheStats s = h.locked(h.generator_mutex, [&] { return h.generator().prompt_cache_stats(); });
        py::dict r = make_record();
        r["budget"] = s.budget;
        r["bytes"] = s.bytes;
        r["entries"] = s.entries;
        return r;
      })
      .def("save_prompt_cache", [](ModelHandle& h, const std::string& path) {
        check(h.locked(h.generator_mutex, [&] { return h.generator().save_prompt_cache(path); }));
      })
      .def("load_prompt_cache", [](ModelHandle& h, const std::string& path) {
        check(h.locked(h.generator_mutex, [&] { return h.generator().load_prompt_cache(path); }));
      });

  m.def("translate_via_pivot", &translate_via_pivot_py, py::arg("first"), py::arg("second"), py::arg("texts"),
        py::arg("options"));

  py::class_<ConversationHandle>(m, "_Conversation")
      .def(py::init<Handle, const std::string&, const py::object&>(), py::arg("model"), py::arg("system") = "",
           py::arg("template_flags") = py::none())
      .def("reply", &ConversationHandle::reply, py::arg("message"), py::arg("options"), py::arg("on_token") = py::none())
      .def("make_room", &ConversationHandle::make_room, py::arg("message"), py::arg("new_tokens"))
      .def("messages", &ConversationHandle::messages);
}
