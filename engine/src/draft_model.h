// A session's draft model for speculative decoding (Generator's and Translator's
// set_draft_model): the model, its weights as the session runs them, and the drafter
// that reads them; and the check that its tokens are the verifier's.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/quoted.h"
#include "model_access.h"
#include "petrel/model.h"
#include "text/tokenizer.h"

namespace petrel::detail {

// Why `draft`'s first `count` output tokens are not `model`'s, id for id (the message
// starts with `both`), or nullopt. Models without tokenizers (which take and give ids)
// agree; one with and one without cannot be compared.
inline std::optional<Error> output_token_difference(const Model& model, const Model& draft, size_t count,
                                                    const std::string& both) {
  const text::Tokenizer* mine = ModelAccess::tokenizer(model);
  const text::Tokenizer* theirs = ModelAccess::tokenizer(draft);
  if ((mine == nullptr) != (theirs == nullptr))
    return Error{ErrorCode::kInvalidArgument, both + "only one of them has a tokenizer, so their tokens cannot be compared"};
  if (mine == nullptr) return std::nullopt;
  for (size_t id = 0; id < count; ++id) {
    const auto a = mine->output_token(static_cast<int32_t>(id)), b = theirs->output_token(static_cast<int32_t>(id));
    if (a != b)
      return Error{ErrorCode::kInvalidArgument,
                   both + "token " + std::to_string(id) + " is " + quoted(b.value_or("")) + ", not " + quoted(a.value_or(""))};
  }
  return std::nullopt;
}

template <typename Drafter>
struct DraftModel {
  std::shared_ptr<const Model> model;
  std::unique_ptr<ModelWeights> weights;
  std::unique_ptr<Drafter> drafter;

  // Makes `draft` the draft model (null: none), unless `problem` says why it cannot be.
  Status set(std::shared_ptr<const Model> draft, const std::optional<Error>& problem,
             const kernels::KernelTable& kernels, threads::ThreadPool& pool, ActivationScales scales) {
    if (draft == nullptr) {
      drafter.reset();  // before the weights it reads
      weights.reset();
      model.reset();
      return Status::ok();
    }
    if (problem) return *problem;
    auto w = std::make_unique<ModelWeights>(weights_for(*draft, scales));
    auto d = std::make_unique<Drafter>(*w, kernels, pool);
    drafter.reset();
    weights = std::move(w);
    drafter = std::move(d);
    model = std::move(draft);
    return Status::ok();
  }
};

}  // namespace petrel::detail
