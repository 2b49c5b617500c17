// Options from Python keyword arguments: each TranslateOptions, BatchOptions and
// GenerateOptions field by its C++ name, checked for its type and range; None leaves a
// field unset (the model's default). Any other key is refused by name.
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>

#include "common.h"

namespace petrel::python {
namespace {

class OptionReader {
 public:
  OptionReader(const py::dict& options, std::string where) : options_(options), where_(std::move(where)) {}

  // The value of `key` when it is given and not None (and marks it as read).
  bool get(const char* key, py::object* out) {
    read_.insert(key);
    if (!options_.contains(key)) return false;
    py::object value = options_[key];
    if (value.is_none()) return false;
    *out = std::move(value);
    return true;
  }
  bool has(const char* key) {
    py::object unused;
    return get(key, &unused);
  }

  bool flag(const char* key, bool fallback) {
    py::object v;
    if (!get(key, &v)) return fallback;
    if (!PyBool_Check(v.ptr()) && !PyLong_Check(v.ptr())) type_error(key, "a bool", v);
    return PyObject_IsTrue(v.ptr()) == 1;
  }

  uint64_t integer(const char* key, uint64_t fallback, uint64_t lo, uint64_t hi) {
    py::object v;
    if (!get(key, &v)) return fallback;
    if (PyFloat_Check(v.ptr()) || PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr())) type_error(key, "an int", v);
    py::int_ i = py::reinterpret_steal<py::int_>(PyNumber_Index(v.ptr()));
    if (!i) throw py::error_already_set();
    int overflow = 0;
    const long long value = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
    if (overflow == 0 && value >= 0 && static_cast<uint64_t>(value) >= lo && static_cast<uint64_t>(value) <= hi)
      return static_cast<uint64_t>(value);
    if (overflow > 0) {  // beyond long long: read it unsigned
      const unsigned long long u = PyLong_AsUnsignedLongLong(i.ptr());
      if (!PyErr_Occurred() && u >= lo && u <= hi) return u;
      PyErr_Clear();
    }
    throw py::value_error(where_ + "(): " + key + " must be an int in " + std::to_string(lo) + ".." +
                          std::to_string(hi) + ", not " + std::string(py::repr(v)));
  }

  size_t size(const char* key, size_t fallback, size_t lo = 0, size_t hi = std::numeric_limits<size_t>::max()) {
    return static_cast<size_t>(integer(key, fallback, lo, hi));
  }

  double real(const char* key, double fallback) {
    py::object v;
    if (!get(key, &v)) return fallback;
    if (PyBool_Check(v.ptr()) || !(PyFloat_Check(v.ptr()) || PyLong_Check(v.ptr()) || PyNumber_Check(v.ptr())))
      type_error(key, "a number", v);
    const double d = PyFloat_AsDouble(v.ptr());
    if (d == -1.0 && PyErr_Occurred()) throw py::error_already_set();
    if (!std::isfinite(d)) throw py::value_error(where_ + "(): " + key + " must be a finite number, not " + std::string(py::repr(v)));
    return d;
  }

  std::string text(const char* key, const std::string& fallback) {
    py::object v;
    if (!get(key, &v)) return fallback;
    if (!PyUnicode_Check(v.ptr())) type_error(key, "a str", v);
    return utf8(v, key);
  }

  std::vector<std::string> texts(const char* key) {
    py::object v;
    if (!get(key, &v)) return {};
    if (PyUnicode_Check(v.ptr())) return {utf8(v, key)};  // one stop string
    if (!PySequence_Check(v.ptr())) type_error(key, "a str or a list of str", v);
    std::vector<std::string> out;
    for (py::handle item : v) {
      if (!PyUnicode_Check(item.ptr())) type_error(key, "a list of str", v);
      out.push_back(utf8(item, key));
    }
    return out;
  }

  std::vector<int32_t> ids(const char* key) {
    py::object v;
    if (!get(key, &v)) return {};
    if (PyUnicode_Check(v.ptr()) || !PySequence_Check(v.ptr())) type_error(key, "a list of int token ids", v);
    std::vector<int32_t> out;
    for (py::handle item : v) {
      if (PyBool_Check(item.ptr()) || !PyIndex_Check(item.ptr())) type_error(key, "a list of int token ids", v);
      const long long id = py::reinterpret_steal<py::int_>(PyNumber_Index(item.ptr())).cast<long long>();
      if (id < 0 || id > std::numeric_limits<int32_t>::max())
        raise_error(ErrorCode::kInvalidArgument, where_ + "(): " + key + ", position " +
                                                     std::to_string(out.size() + 1) + ": token id " +
                                                     std::to_string(id) + " is out of range");
      out.push_back(static_cast<int32_t>(id));
    }
    return out;
  }

  // One of `choices` (a str); its index.
  size_t choice(const char* key, size_t fallback, const std::vector<const char*>& choices) {
    py::object v;
    if (!get(key, &v)) return fallback;
    if (!PyUnicode_Check(v.ptr())) type_error(key, "a str", v);
    const std::string s = utf8(v, key);
    std::string listed;
    for (size_t i = 0; i < choices.size(); ++i) {
      if (s == choices[i]) return i;
      listed += (i ? ", '" : "'") + std::string(choices[i]) + "'";
    }
    throw py::value_error(where_ + "(): " + key + " must be one of " + listed + ", not '" + s + "'");
  }

  // Every key given must have been read.
  void finish() const {
    for (auto item : options_) {
      const std::string key = py::str(item.first);
      if (read_.count(key) == 0)
        throw py::type_error(where_ + "() got an unexpected keyword argument '" + key + "'");
    }
  }

  [[noreturn]] void type_error(const char* key, const char* expected, const py::handle& v) const {
    throw py::type_error(where_ + "(): " + key + " must be " + expected + ", not " +
                         std::string(py::str(v.get_type().attr("__name__"))));
  }
  const std::string& where() const { return where_; }

 private:
  const py::dict& options_;
  std::string where_;
  std::set<std::string> read_;
};

}  // namespace

TranslateRequest read_translate_options(const py::dict& options, const std::string& where) {
  OptionReader r(options, where);
  TranslateRequest request;
  TranslateOptions& o = request.options;
  o.beam_size = r.size("beam_size", 0, 0, kMaxBeamSize);
  o.n_best = r.size("n_best", 1, 1, kMaxBeamSize);
  o.max_new_tokens = r.size("max_new_tokens", 0);
  o.max_length_factor = r.real("max_length_factor", 0);
  o.min_new_tokens = r.size("min_new_tokens", 0);
  py::object v;
  if (r.get("length_penalty", &v)) o.length_penalty = r.real("length_penalty", 1.0);
  // The engine's names (to_string(BeamStop), petrel-run's --beam-stop); "first_k" too.
  if (r.get("beam_stop", &v) && PyUnicode_Check(v.ptr()) && utf8(v, "beam_stop") == "first_k") {
    o.beam_stop = BeamStop::kFirstK;
  } else {
    o.beam_stop = static_cast<BeamStop>(r.choice("beam_stop", 0, {"default", "heuristic", "first-k"}));
  }
  if (r.get("use_shortlist", &v)) o.use_shortlist = r.flag("use_shortlist", false);
  o.kv_cache_f16 = r.flag("kv_cache_f16", false);
  o.stream_text = r.flag("stream_text", false);
  o.target_prefix = r.ids("target_prefix");
  o.target_language = r.text("target_language", "");
  o.source_language = r.text("source_language", "");
  o.alignment = r.flag("alignment", false);
  if (r.get("alignment_layer", &v)) o.alignment_layer = r.size("alignment_layer", 0);
  o.alignment_head = r.size("alignment_head", 0);
  o.token_scores = r.flag("token_scores", false);
  o.quality_scores = r.flag("quality_scores", false);
  if (r.get("quality_model", &v)) {
    if (py::isinstance<QualityHolder>(v)) {
      request.quality = v.cast<std::shared_ptr<QualityHolder>>();
    } else if (PyUnicode_Check(v.ptr()) || py::isinstance(v, py::module_::import("os").attr("PathLike"))) {
      const std::string path = utf8(py::module_::import("os").attr("fspath")(v), "quality_model");
      auto model = load_quality_model(path);
      if (!model) raise_error(model.error());
      request.quality = std::make_shared<QualityHolder>(QualityHolder{std::move(model).value()});
    } else {
      r.type_error("quality_model", "a petrel.QualityModel or a path", v);
    }
    o.quality_model = request.quality->model;
  }
  o.html = r.flag("html", false);
  // Speculative decoding: the engine checks the ranges and names the field.
  o.lookup_ngram = r.size("lookup_ngram", 0);
  o.max_draft_tokens = r.size("max_draft_tokens", 0);

  // BatchOptions
  BatchOptions& b = request.batching;
  const auto note = [&](const char* key) {
    if (r.has(key) && !request.batching_given) {
      request.batching_given = true;
      request.batching_field = key;
    }
  };
  for (const char* key : {"max_batch_tokens", "max_batch_size", "window", "split_sentences", "split_mode",
                          "limit_by_longest_sentence", "shortlist_of_input", "priority_inputs", "cancel", "cache"})
    note(key);
  b.max_batch_tokens = r.size("max_batch_tokens", b.max_batch_tokens, 1);
  b.max_batch_size = r.size("max_batch_size", b.max_batch_size, 1);
  b.window = r.size("window", 0);
  b.split_sentences = r.flag("split_sentences", false);
  b.split_mode = static_cast<SentenceSplit>(
      r.choice("split_mode", 0, {"text", "sentence", "paragraph", "wrapped_text"}));
  b.limit_by_longest_sentence = r.flag("limit_by_longest_sentence", false);
  b.shortlist_of_input = r.flag("shortlist_of_input", false);
  b.priority_inputs = r.size("priority_inputs", 0);
  if (r.get("cancel", &v)) {
    if (!py::isinstance<CancelFlag>(v)) r.type_error("cancel", "a petrel.CancelFlag", v);
    request.cancel = v.cast<std::shared_ptr<CancelFlag>>();
    b.cancel = &request.cancel->flag;
  }
  if (r.get("cache", &v)) {
    if (!py::isinstance<CacheHolder>(v)) r.type_error("cache", "a petrel.TranslationCache", v);
    request.cache = v.cast<std::shared_ptr<CacheHolder>>();
    b.cache = request.cache->cache;
  }
  r.finish();
  return request;
}

GenerateOptions read_generate_options(const py::dict& options, const std::string& where) {
  OptionReader r(options, where);
  GenerateOptions o;
  py::object v;
  o.max_new_tokens = r.size("max_new_tokens", 0);
  if (r.get("do_sample", &v)) o.do_sample = r.flag("do_sample", false);
  if (r.get("temperature", &v)) o.temperature = static_cast<float>(r.real("temperature", 1));
  if (r.get("top_k", &v)) o.top_k = static_cast<uint32_t>(r.integer("top_k", 0, 0, std::numeric_limits<uint32_t>::max()));
  if (r.get("top_p", &v)) o.top_p = static_cast<float>(r.real("top_p", 1));
  if (r.get("min_p", &v)) o.min_p = static_cast<float>(r.real("min_p", 0));
  if (r.get("repetition_penalty", &v)) o.repetition_penalty = static_cast<float>(r.real("repetition_penalty", 1));
  o.seed = r.integer("seed", 0, 0, std::numeric_limits<uint64_t>::max());
  o.ignore_eos = r.flag("ignore_eos", false);
  o.kv_cache_f16 = r.flag("kv_cache_f16", false);
  o.kv_cache_int8 = r.flag("kv_cache_int8", false);
  o.stream_text = r.flag("stream_text", false);
  o.stop = r.texts("stop");
  o.grammar = r.text("grammar", "");
  o.json_schema = r.text("json_schema", "");
  o.lookup_ngram = r.size("lookup_ngram", 0);
  o.max_draft_tokens = r.size("max_draft_tokens", 0);
  r.finish();
  return o;
}

}  // namespace petrel::python
