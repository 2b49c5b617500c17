// Evicting a byte range from every cache level, for petrel-bench --cold-cache: a decoder
// step timed right after its weights were evicted reads them from main memory, as on a
// device whose caches (1-4 MB) cannot hold a model between steps.
#pragma once

#include <cstddef>
#include <string>

namespace petrel::bench {

// Empty when evict_from_caches works on this CPU; otherwise why it does not.
std::string cache_eviction_unavailable();

// Writes back and invalidates every cache line of [data, data + size) in every cache
// level of the coherence domain, and returns once that is done. Only when
// cache_eviction_unavailable() is empty.
void evict_from_caches(const void* data, size_t size);

}  // namespace petrel::bench
