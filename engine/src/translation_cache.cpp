#include "translation_cache.h"

#include <cstring>
#include <list>
#include <mutex>
#include <unordered_map>

#include "model_access.h"

namespace petrel {

struct TranslationCache::Impl {
  struct Entry {
    std::string key;
    Translation translation;
    size_t bytes;
  };
  size_t capacity;
  mutable std::mutex mutex;
  std::list<Entry> entries;  // most recently used first
  std::unordered_map<std::string_view, std::list<Entry>::iterator> index;  // views of the entries' keys
  Stats stats;
};

TranslationCache::TranslationCache(size_t capacity_bytes) : impl_(std::make_unique<Impl>()) {
  impl_->capacity = capacity_bytes;
}
TranslationCache::~TranslationCache() = default;

std::shared_ptr<TranslationCache> TranslationCache::create(size_t capacity_bytes) {
  return std::shared_ptr<TranslationCache>(new TranslationCache(capacity_bytes));
}

TranslationCache::Stats TranslationCache::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->stats;
}

void TranslationCache::clear() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->index.clear();
  impl_->entries.clear();
  impl_->stats.entries = impl_->stats.bytes = 0;
}

namespace detail {
namespace {

void append(std::string& key, const void* data, size_t size) { key.append(static_cast<const char*>(data), size); }
template <class T>
void append_value(std::string& key, const T& value) {
  append(key, &value, sizeof value);
}
void append_string(std::string& key, const std::string& s) {
  append_value(key, s.size());
  key += s;
}

// What an entry holds, as its share of the capacity.
size_t entry_bytes(const std::string& key, const Translation& t) {
  // The entry, its list node and index slot, the key.
  size_t bytes = sizeof(std::string) + sizeof(Translation) + sizeof(size_t) + 8 * sizeof(void*) + key.size();
  for (const Hypothesis& h : t.hypotheses) {
    bytes += sizeof(Hypothesis) + h.ids.size() * sizeof(int32_t) + h.token_scores.size() * sizeof(TokenScore);
    for (const auto& row : h.alignment) bytes += sizeof(row) + row.size() * sizeof(float);
  }
  return bytes;
}

}  // namespace

std::string TranslationCacheAccess::options_key(const Model& model, const std::string& isa, ActivationScales scales,
                                                const TranslateOptions& o) {
  // Every field of TranslateOptions but the ones that do not reach a unit's translation:
  // on_token and stream_text (refused when batching), html (taken out before and put back
  // after the units are translated) and quality_model (applied to the token scores afterwards).
  std::string key;
  append_value(key, ModelAccess::serial(model));
  append_string(key, isa);
  append_value(key, scales);
  append_value(key, o.beam_size);
  append_value(key, o.n_best);
  append_value(key, o.max_new_tokens);
  append_value(key, o.max_length_factor);
  append_value(key, o.min_new_tokens);
  append_value(key, o.length_penalty.has_value());
  append_value(key, o.length_penalty.value_or(0.0));
  append_value(key, o.beam_stop);
  append_value(key, static_cast<int>(o.use_shortlist.has_value() ? *o.use_shortlist : 2));
  append_value(key, o.kv_cache_f16);
  append_value(key, o.target_prefix.size());
  append(key, o.target_prefix.data(), o.target_prefix.size() * sizeof(int32_t));
  append_string(key, o.target_language);
  append_string(key, o.source_language);
  append_value(key, o.alignment);
  append_value(key, o.alignment_layer.has_value());
  append_value(key, o.alignment_layer.value_or(0));
  append_value(key, o.alignment_head);
  append_value(key, o.token_scores);
  append_value(key, o.quality_scores);
  return key;
}

std::string TranslationCacheAccess::key(const std::string& options_key, size_t length_basis,
                                        const std::vector<int32_t>& ids, const std::vector<int32_t>* shortlist_sources) {
  std::string key = options_key;
  append_value(key, length_basis);
  append_value(key, ids.size());
  append(key, ids.data(), ids.size() * sizeof(int32_t));
  if (shortlist_sources) {
    append_value(key, shortlist_sources->size());
    append(key, shortlist_sources->data(), shortlist_sources->size() * sizeof(int32_t));
  }
  return key;
}

std::optional<Translation> TranslationCacheAccess::find(TranslationCache& cache, const std::string& key) {
  auto& c = *cache.impl_;
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.index.find(key);
  if (it == c.index.end()) {
    ++c.stats.misses;
    return std::nullopt;
  }
  ++c.stats.hits;
  c.entries.splice(c.entries.begin(), c.entries, it->second);  // now the most recent
  return it->second->translation;
}

void TranslationCacheAccess::store(TranslationCache& cache, const std::string& key, const Translation& translation) {
  auto& c = *cache.impl_;
  const size_t bytes = entry_bytes(key, translation);
  if (bytes > c.capacity) return;
  TranslationCache::Impl::Entry entry{key, translation, bytes};  // copied outside the lock
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.index.count(key)) return;  // another call stored it meanwhile
  while (c.stats.bytes + bytes > c.capacity && !c.entries.empty()) {
    const auto& last = c.entries.back();
    c.stats.bytes -= last.bytes;
    c.index.erase(std::string_view(last.key));
    c.entries.pop_back();
  }
  c.entries.push_front(std::move(entry));
  c.index.emplace(std::string_view(c.entries.front().key), c.entries.begin());
  c.stats.bytes += bytes;
  c.stats.entries = c.entries.size();
}

}  // namespace detail
}  // namespace petrel
