// The engine's side of TranslationCache (petrel/batch_translator.h): keys and lookups.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "petrel/batch_translator.h"

namespace petrel::detail {

struct TranslationCacheAccess {
  // What a translation of `ids` depends on besides the ids: the model, the session's
  // kernel path and activation scales, every TranslateOptions field that changes an output,
  // and the length basis (BatchOptions::limit_by_longest_sentence; 0 when not used).
  static std::string options_key(const Model& model, const std::string& isa, ActivationScales scales,
                                 const TranslateOptions& options);
  // shortlist_sources: when the unit decodes over its input's shortlist (BatchOptions::
  // shortlist_of_input), the distinct source ids that shortlist is made of; else null.
  static std::string key(const std::string& options_key, size_t length_basis, const std::vector<int32_t>& ids,
                         const std::vector<int32_t>* shortlist_sources);
  static std::optional<Translation> find(TranslationCache& cache, const std::string& key);
  static void store(TranslationCache& cache, const std::string& key, const Translation& translation);
};

}  // namespace petrel::detail
