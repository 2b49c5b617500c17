// What the Python module's files share: engine errors carried to Python, the objects
// options may hold, reading options from a dict, and results as Python records.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "petrel/batch_translator.h"
#include "petrel/generator.h"
#include "petrel/model.h"
#include "petrel/status.h"
#include "petrel/translator.h"
#include "petrel/types.h"

namespace petrel::python {

namespace py = pybind11;

// An engine error on its way to Python: module.cpp's exception translator raises it as
// the petrel.Error subclass of its code (petrel/_errors.py), message unchanged.
struct EngineError : std::exception {
  Error error;
  explicit EngineError(Error e) : error(std::move(e)) {}
  const char* what() const noexcept override { return error.message.c_str(); }
};

[[noreturn]] inline void raise_error(const Error& error) { throw EngineError(error); }
[[noreturn]] inline void raise_error(ErrorCode code, std::string message) {
  throw EngineError(Error{code, std::move(message)});
}
template <class T>
T value_or_raise(Result<T>&& result) {
  if (!result) raise_error(result.error());
  return std::move(result).value();
}
inline void check(const Status& status) {
  if (!status) raise_error(status.error());
}

// The ErrorCode's name as petrel.Error.status spells it ("InvalidArgument").
const char* code_name(ErrorCode code);

// Text from the engine as a Python str (bytes that are not UTF-8 become U+FFFD, so a
// piece that is part of a character never raises).
py::str to_str(std::string_view text);
// A Python str as UTF-8 (a TypeError naming `what` for anything else).
std::string utf8(const py::handle& object, const std::string& what);

// The Python list of convert(v) for each v of `values` (anything with size() and []).
template <class Values, class Convert>
py::list list_of(const Values& values, Convert&& convert) {
  py::list out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = convert(values[i]);
  return out;
}
// An unset option or field as None.
template <class T>
py::object value_or_none(const std::optional<T>& value) {
  return value ? py::cast(*value) : py::object(py::none());
}

// --- Objects an option may hold (shared, so a call keeps them alive without the GIL) --

// BatchOptions::cancel: set from any thread.
struct CancelFlag {
  std::atomic<bool> flag{false};
};
struct CacheHolder {
  std::shared_ptr<TranslationCache> cache;
};
struct QualityHolder {
  std::shared_ptr<const QualityModel> model;
};

// --- Options (options.cpp) -------------------------------------------------------------

// One translate call's options, read from a dict of TranslateOptions and BatchOptions
// fields by their C++ names. `batching_given`: a BatchOptions field was named.
struct TranslateRequest {
  TranslateOptions options;
  BatchOptions batching;
  bool batching_given = false;
  std::string batching_field;  // the first BatchOptions field named (for messages)
  std::shared_ptr<CancelFlag> cancel;
  std::shared_ptr<CacheHolder> cache;
  std::shared_ptr<QualityHolder> quality;
};
// `where` names the caller in messages ("Model.translate"); an unknown key is a TypeError
// naming it, a value of the wrong type a TypeError, one out of range a ValueError.
TranslateRequest read_translate_options(const py::dict& options, const std::string& where);
GenerateOptions read_generate_options(const py::dict& options, const std::string& where);

// --- Results (results.cpp) -------------------------------------------------------------

// A petrel.Record: a dict whose keys are also attributes.
py::dict make_record();
py::dict info_record(const ModelInfo& info);
// Byte offsets of `text` to str (code point) offsets.
class CharOffsets {
 public:
  explicit CharOffsets(std::string_view text);
  size_t operator()(size_t byte) const;

 private:
  std::vector<size_t> index_;
};
py::dict tokenized_record(const TokenizedText& tokens, const CharOffsets* offsets);
py::dict text_translation_record(const TextTranslation& translation, const std::string& source);
py::dict translation_record(const Translation& translation);
py::dict generation_record(const Generation& generation);
py::dict text_generation_record(const TextGeneration& generation);
py::dict token_event_record(const TokenEvent& event);
py::dict translate_timings_record(const TranslateTimings& timings);
py::dict batch_totals_record(const BatchTotals& totals);
py::dict generate_timings_record(const GenerateTimings& timings);

}  // namespace petrel::python
