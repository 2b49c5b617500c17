// Prompt caches: the KV state a prompt's prefill left, kept so that a later prompt
// sharing its beginning runs only the tokens after it. In a process: KvSnapshot entries
// in a PromptCache (least recently used out first, within a byte budget). Across
// processes: one snapshot in a file (write_prompt_cache / read_prompt_cache), an input
// as untrusted as a model file, bound to the model it was made with.
//
// The file (little-endian; version 1):
//   header, 80 bytes:
//     0  magic "PETRELPC"                       8 bytes
//     8  u32 version (1)
//    12  u32 cache_type (0 f32, 1 f16, 2 int8)
//    16  u64 model.file_size
//    24  u64 model.metadata_hash (prompt_cache_metadata_hash of the model file)
//    32  u32 model.data_crc32 (0 when the model file records none)
//    36  u32 model.has_data_crc32 (0 or 1)
//    40  u32 layers, 44 u32 kv_heads, 48 u32 head_dim
//    52  u32 row_bytes (models::cache_row_bytes(cache_type, kv_heads, head_dim))
//    56  u64 max_positions (the model's)
//    64  u64 tokens (positions held, >= 1, < max_positions)
//    72  u64 payload_bytes (the K/V rows' bytes)
//   per layer, 24 bytes: u64 ring (slots of its ring, 0: a full cache), u64 rows held,
//     u64 from (the first position its slots still hold: see KvSnapshot::from)
//   tokens x i32 ids
//   payload: per layer its K rows, then its V rows (rows x row_bytes each), slot order
//   u32 CRC-32 of every byte before it
// Every size is checked against the file's size before anything is allocated for it;
// the CRC is checked before the state is used, and every value read (ids in the
// vocabulary, K/V values finite, int8 scales finite and >= 0).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <vector>

#include "models/decoder_only.h"
#include "petrel/status.h"
#include "petrel/types.h"

namespace petrel::detail {

// One sequence's KV state: its tokens and, per layer, the cache slots that hold them.
struct KvSnapshot {
  DType cache_type = DType::kF32;
  size_t row_bytes = 0;             // one slot's keys (or values)
  std::vector<int32_t> tokens;      // the positions held, in order
  std::vector<size_t> ring;         // per layer: ring slots (0: a full cache)
  std::vector<size_t> rows;         // per layer: slots held, min(tokens, ring)
  // Per layer: the first position whose keys and values its slots still hold. A ring's
  // slots are overwritten by later positions, and after a rewind the slots of the
  // positions given up still hold them (not the earlier positions a fresh run would have
  // left there): such a state may be rewound only where the window behind the new length
  // lies at or after `from`. 0 for a full cache.
  std::vector<size_t> from;
  std::vector<uint8_t> kv;          // per layer: its K rows, then its V rows
  uint64_t serial = 0;              // PromptCache's name for the entry
  // What it is charged against a budget: its buffers and bookkeeping.
  size_t bytes() const { return charge(tokens.size(), ring.size(), kv.size()); }
  static size_t charge(size_t tokens, size_t layers, size_t kv_bytes) {
    return kv_bytes + tokens * sizeof(int32_t) + layers * 3 * sizeof(size_t) + sizeof(KvSnapshot);
  }
};

// The KV slots of layer l that hold a sequence of `length` positions.
inline size_t held_rows(size_t length, size_t ring) { return ring != 0 && ring < length ? ring : length; }

// The bytes a snapshot of `state` (its first state.length positions) takes, or nullopt
// when that overflows a size_t.
std::optional<size_t> snapshot_bytes(const models::LmState& state, size_t row_bytes);
// `state`'s caches and `tokens` (state.length of them) as a snapshot; `from` as
// KvSnapshot::from. Throws std::bad_alloc when memory runs out (the caller skips caching then).
KvSnapshot capture(const models::LmState& state, const std::vector<int32_t>& tokens, size_t row_bytes,
                   const std::vector<size_t>& from);
// Puts `snapshot` into `state`, which DecoderOnly::start made with the snapshot's cache
// type and rings: state.length becomes its tokens' count. False (state unusable: start
// it afresh) when the rings differ. Throws std::bad_alloc when memory runs out.
bool restore(const KvSnapshot& snapshot, models::LmState& state);

// What a prompt cache file must match: the model (its file and shape) and how its
// sessions lay out their caches.
struct KvLayout {
  std::string model_name;           // ModelInfo::source, for messages
  uint64_t file_size = 0;
  uint64_t metadata_hash = 0;
  std::optional<uint32_t> data_crc32;
  uint32_t layers = 0, kv_heads = 0, head_dim = 0, vocab_size = 0;
  uint64_t max_positions = 0;
  std::vector<size_t> ring;         // per layer, as DecoderOnly::start(max_positions) makes them
};

// A 64-bit hash of a model file's FlatBuffer metadata (its size-prefixed first part: the
// shapes, names, tokenizer and settings; the data section has its own CRC-32): the bytes
// [0, 4 + the prefix) of `file`, or all of them when the prefix says more than there is.
uint64_t prompt_cache_metadata_hash(const uint8_t* file, size_t size);

// Writes `snapshot` to `path` atomically (a temporary file beside it, then renamed).
Status write_prompt_cache(const std::string& path, const KvSnapshot& snapshot, const KvLayout& layout);
// Reads and verifies the file at `path` completely. Errors name the file and the field
// ("prompt.cache: header.kv_heads: 4, the model has 1"): kIo when it cannot be read,
// kFormat for anything wrong in it, kOutOfMemory when its (checked) sizes cannot be had.
Result<KvSnapshot> read_prompt_cache(const std::string& path, const KvLayout& layout);

// Snapshots of recent prompts, least recently used out first, within a byte budget.
class PromptCache {
 public:
  // Drops entries, least recently used first, until the rest fit `bytes`.
  void set_budget(size_t bytes);
  size_t budget() const { return budget_; }
  size_t bytes() const { return bytes_; }
  size_t entries() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

  // The entry of `type` sharing the longest beginning with `prompt`, at most `limit`
  // tokens of it, among those `usable(entry, length)` accepts; marked most recently used.
  // nullptr (length 0) when none shares a token.
  template <class Usable>
  const KvSnapshot* best(const std::vector<int32_t>& prompt, DType type, size_t limit, Usable usable, size_t& length);
  // The entry holding exactly `tokens` in a cache of `type`, marked most recently used.
  const KvSnapshot* find_exact(const std::vector<int32_t>& tokens, DType type);
  const KvSnapshot* find_serial(uint64_t serial) const;
  // Whether a snapshot charged `bytes` fits the budget at all.
  bool admits(size_t bytes) const { return bytes <= budget_; }
  // Drops entries, least recently used first, until `bytes` more fit the budget (call
  // before allocating a snapshot of that charge; admits() must hold).
  void make_room(size_t bytes);
  // Adds `snapshot` as the most recently used entry; returns its serial. An entry past
  // the budget (a loaded file's, see Generator::load_prompt_cache) stays until the next
  // make_room.
  uint64_t insert(KvSnapshot&& snapshot);

 private:
  void drop_oldest();
  std::list<KvSnapshot> entries_;  // most recently used first
  size_t budget_ = 0, bytes_ = 0;
  uint64_t next_serial_ = 1;
};

template <class Usable>
const KvSnapshot* PromptCache::best(const std::vector<int32_t>& prompt, DType type, size_t limit, Usable usable,
                                    size_t& length) {
  length = 0;
  auto chosen = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->cache_type != type) continue;
    const size_t n = std::min(limit, it->tokens.size());
    size_t common = 0;
    while (common < n && it->tokens[common] == prompt[common]) ++common;
    if (common > length && usable(*it, common)) {
      length = common;
      chosen = it;
    }
  }
  if (chosen == entries_.end()) return nullptr;
  entries_.splice(entries_.begin(), entries_, chosen);
  return &entries_.front();
}

}  // namespace petrel::detail
