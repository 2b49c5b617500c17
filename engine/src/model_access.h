// The engine's view of a loaded Model beyond its public info: the bound tensors
// and the text tokenizer. Not installed; tools and tests reach it through the
// petrel_engine_internal target.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "core/checked.h"
#include "format/weights.h"
#include "kernels/kernels.h"
#include "petrel/model.h"
#include "petrel/translator.h"
#include "text/tokenizer.h"

namespace petrel::text {
class ChatTemplate;
}

namespace petrel::detail {

struct ModelAccess {
  using Impl = Model::Impl;  // defined in model.cpp
  // The first call (from any thread; the others wait) generates the sinusoid position
  // tables, which loading leaves out.
  static const ModelWeights& weights(const Model& model);
  // Built when the model loaded; null when the file carries no text tokenizer.
  static const text::Tokenizer* tokenizer(const Model& model);
  // Parsed when the model loaded; null when the file carries no chat template.
  static const text::ChatTemplate* chat_template(const Model& model);
  // The model file's bytes as loaded (the mapping, or the copy of a caller's buffer), for
  // tools that act on the whole range: petrel-bench --cold-cache evicts it from the caches.
  struct Bytes {
    const uint8_t* data;
    size_t size;
  };
  static Bytes file_bytes(const Model& model);
  // A number no other Model of this process has had (a cache's key for the model: an
  // address may be reused once a model is freed).
  static uint64_t serial(const Model& model);
  // The loader's way to make a Model (its constructor is private).
  static std::shared_ptr<const Model> make(std::unique_ptr<Impl> impl);
};

// The kernel path a session runs (options.isa, else PETREL_ISA, else the best this CPU
// runs), with the options' thread count and activation scales checked. Errors name the option.
Result<const kernels::KernelTable*> session_kernels(const Model& model, const TranslatorOptions& options);
// The model's weights as a session runs them: dynamic activation scales clear every
// matrix's static one (the views are small; the tensors are not copied).
ModelWeights weights_for(const Model& model, ActivationScales scales);

// Why input `input` (0-based) of a call cannot be translated, or nullopt: it is empty, has
// an id outside the vocabulary, takes more positions than the model has, or holds
// nothing but the pads the encoder masks (models::SourceReader).
std::optional<Error> source_problem(const ModelInfo& info, const std::vector<int32_t>& ids, size_t input);

// `e` as the error of input `input` (0-based) of a call: "input N: " before its message.
inline Error input_error(size_t input, const Error& e) {
  return Error{e.code, "input " + std::to_string(input + 1) + ": " + e.message};
}

// Generated tokens at most when neither the call nor the model sets a number (the
// public headers' "else 256").
constexpr size_t kDefaultMaxNewTokens = 256;

// Milliseconds since `start`, for a call's Timings.
inline double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// What one request may need: kMaxRequestBytes, or this device's memory or the process's
// cgroup memory limit where that is less.
uint64_t working_memory_limit();
// The least memory limit of the cgroups (v1 or v2) this process is in and their
// ancestors, read under `root` ("" in the product; a directory of made-up files in tests):
// UINT64_MAX when there is none.
uint64_t cgroup_memory_limit(const std::string& root);
// This process's: cgroup_memory_limit("") on Linux; UINT64_MAX elsewhere (under
// emscripten a page's module has no files to read).
uint64_t process_memory_limit();

// The error for a request whose working memory (`bytes`, computed from its shape before
// anything is allocated) is over working_memory_limit(), or nullopt: "`request` need(s) N
// MiB of working memory; the limit is M MiB: `remedy`".
std::optional<Error> working_memory_problem(const CheckedSize& bytes, const std::string& request, const char* remedy);

// Runs `job` (returning a Status or a Result), with what it can throw as an Error:
// memory (allocations sized from input that was checked, which a device without
// overcommit may still refuse), or a thread the system would not start (a process
// limit, a small phone's memory). `context` (a file's name, a call's) begins the message.
template <typename Job>
auto without_exceptions(Job&& job, const std::string& context = {}) -> decltype(job()) {
  const std::string prefix = context.empty() ? std::string() : context + ": ";
  try {
    return job();
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kOutOfMemory, prefix + "out of memory"};
  } catch (const std::length_error&) {  // a container asked for more than its max_size()
    return Error{ErrorCode::kOutOfMemory, prefix + "out of memory"};
  } catch (const std::system_error& e) {
    return Error{ErrorCode::kOutOfMemory, prefix + "cannot start a thread: " + e.what()};
  }
}

// Marks a session (a Translator's or Generator's caches and buffers) in use for one
// call. A second call while it is, from a token callback on the same thread or from
// another thread against the one-thread-at-a-time rule, would overwrite the state the
// first is still reading: it gets an error instead of corrupting the heap.
class SessionCall {
 public:
  explicit SessionCall(std::atomic<bool>& busy) : busy_(busy), entered_(!busy.exchange(true)) {}
  ~SessionCall() {
    if (entered_) busy_ = false;
  }
  SessionCall(const SessionCall&) = delete;
  SessionCall& operator=(const SessionCall&) = delete;
  // The error for a call that did not enter (`what`: "Translator", "Generator").
  std::optional<Error> refused(const char* what) const {
    if (entered_) return std::nullopt;
    return Error{ErrorCode::kInvalidArgument,
                 std::string("this ") + what + " is already running a call: a token callback must not call back " +
                     "into its own session, and one session serves one thread at a time"};
  }

 private:
  std::atomic<bool>& busy_;
  bool entered_;
};

// Translator::translate with each input's max_length_factor limit counted from
// length_basis[i] tokens instead of its own (bergamot limits every sentence of a batch by
// the batch's longest); an empty length_basis: each input's own. With a shortlist, input i
// decodes over *shortlists[i] (models::OutputVocabulary::shortlist_tokens' ids) instead of
// its own (BatchOptions::shortlist_of_input); empty: its own.
struct TranslatorAccess {
  static Result<std::vector<Translation>> translate(Translator& t, const std::vector<std::vector<int32_t>>& batch,
                                                    const TranslateOptions& options,
                                                    const std::vector<size_t>& length_basis,
                                                    const std::vector<const std::vector<int32_t>*>& shortlists = {});
};

// A hypothesis as text, with the tokens of its ids (the model's tokenizer).
Result<TextHypothesis> text_hypothesis(const Model& model, Hypothesis&& hypothesis);

}  // namespace petrel::detail
