#include "prompt_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>

#include "core/bytes.h"
#include "core/checked.h"
#include "core/file_io.h"
#include "format/crc32.h"

namespace petrel::detail {

namespace {

constexpr char kMagic[8] = {'P', 'E', 'T', 'R', 'E', 'L', 'P', 'C'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 80, kLayerBytes = 24, kCrcBytes = 4;

uint32_t type_code(DType type) { return type == DType::kF16 ? 1 : type == DType::kInt8 ? 2 : 0; }
const char* type_name(uint32_t code) { return code == 1 ? "f16" : code == 2 ? "int8" : "f32"; }

void put32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

bool finite_f16(uint16_t h) { return (h & 0x7c00) != 0x7c00; }

}  // namespace

std::optional<size_t> snapshot_bytes(const models::LmState& state, size_t row_bytes) {
  CheckedSize kv;
  for (size_t l = 0; l < state.k.size(); ++l) kv += CheckedSize(held_rows(state.length, state.ring[l])) * row_bytes * 2;
  CheckedSize total = kv;
  total += CheckedSize(state.length) * sizeof(int32_t);
  total += CheckedSize(state.k.size()) * (3 * sizeof(size_t));
  total += CheckedSize(sizeof(KvSnapshot));
  if (!kv.ok() || !total.ok() || total.value() > SIZE_MAX) return std::nullopt;
  return static_cast<size_t>(total.value());
}

KvSnapshot capture(const models::LmState& state, const std::vector<int32_t>& tokens, size_t row_bytes,
                   const std::vector<size_t>& from) {
  KvSnapshot s;
  s.from = from;
  s.cache_type = state.cache_type;
  s.row_bytes = row_bytes;
  s.tokens.assign(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(state.length));
  s.ring = state.ring;
  s.rows.resize(state.k.size());
  size_t total = 0;
  for (size_t l = 0; l < state.k.size(); ++l) {
    s.rows[l] = held_rows(state.length, state.ring[l]);
    total += s.rows[l] * row_bytes * 2;  // within snapshot_bytes, checked by the caller
  }
  s.kv.resize(total);
  uint8_t* out = s.kv.data();
  for (size_t l = 0; l < state.k.size(); ++l) {
    const size_t n = s.rows[l] * row_bytes;
    std::memcpy(out, state.k[l].data(), n);
    std::memcpy(out + n, state.v[l].data(), n);
    out += 2 * n;
  }
  return s;
}

bool restore(const KvSnapshot& s, models::LmState& state) {
  if (state.cache_type != s.cache_type || state.ring != s.ring || state.k.size() != s.rows.size() ||
      s.from.size() != s.rows.size() ||
      s.tokens.size() > state.max_positions)
    return false;
  const uint8_t* in = s.kv.data();
  for (size_t l = 0; l < s.rows.size(); ++l) {
    const size_t n = s.rows[l] * s.row_bytes;
    // reserve, then resize: as DecoderOnly's own growth, no more than the bytes asked for.
    state.k[l].reserve(n);
    state.v[l].reserve(n);
    state.k[l].resize(n);
    state.v[l].resize(n);
    std::memcpy(state.k[l].data(), in, n);
    std::memcpy(state.v[l].data(), in + n, n);
    state.slots[l] = s.rows[l];
    in += 2 * n;
  }
  state.ring_from = s.from;  // what the rings hold, as when it was captured
  state.length = s.tokens.size();
  return true;
}

uint64_t prompt_cache_metadata_hash(const uint8_t* file, size_t size) {
  size_t n = size;
  if (size >= 4) n = static_cast<size_t>(std::min<uint64_t>(size, uint64_t{4} + load_le32(file)));
  // Eight bytes a step, each word multiplied in (a dependency chain of one multiply per
  // word: gigabytes a second); the length goes in last.
  constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull, kPrime2 = 0xC2B2AE3D27D4EB4Full;
  uint64_t h = 0x27D4EB2F165667C5ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    h ^= load_le64(file + i) * kPrime2;
    h = ((h << 31) | (h >> 33)) * kPrime1;
  }
  uint64_t tail = 0;
  for (size_t j = 0; i + j < n; ++j) tail |= uint64_t{file[i + j]} << (8 * j);
  h ^= tail * kPrime2;
  h = ((h << 31) | (h >> 33)) * kPrime1;
  h ^= n;
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  return h;
}

Status write_prompt_cache(const std::string& path, const KvSnapshot& s, const KvLayout& layout) {
  std::vector<uint8_t> head;
  head.reserve(kHeaderBytes + kLayerBytes * s.rows.size());
  head.insert(head.end(), kMagic, kMagic + 8);
  put32(head, kVersion);
  put32(head, type_code(s.cache_type));
  put64(head, layout.file_size);
  put64(head, layout.metadata_hash);
  put32(head, layout.data_crc32.value_or(0));
  put32(head, layout.data_crc32 ? 1 : 0);
  put32(head, layout.layers);
  put32(head, layout.kv_heads);
  put32(head, layout.head_dim);
  put32(head, static_cast<uint32_t>(s.row_bytes));
  put64(head, layout.max_positions);
  put64(head, s.tokens.size());
  put64(head, s.kv.size());
  for (size_t l = 0; l < s.rows.size(); ++l) {
    put64(head, s.ring[l]);
    put64(head, s.rows[l]);
    put64(head, s.from[l]);
  }
  std::vector<uint8_t> ids(s.tokens.size() * 4);
  for (size_t i = 0; i < s.tokens.size(); ++i)
    for (int b = 0; b < 4; ++b) ids[4 * i + b] = static_cast<uint8_t>(static_cast<uint32_t>(s.tokens[i]) >> (8 * b));
  uint32_t crc = crc32(head.data(), head.size());
  crc = crc32(ids.data(), ids.size(), crc);
  crc = crc32(s.kv.data(), s.kv.size(), crc);
  std::vector<uint8_t> tail;
  put32(tail, crc);

  // A temporary file beside the target, renamed over it once whole: a reader sees the old
  // file or the new one, never a part. Its name is unique (mkstemp): two writers of one
  // path never share it, and the last rename wins.
  std::string temporary = path + ".XXXXXX";
  auto io_error = [&](const std::string& what) {
    return Error{ErrorCode::kIo, path + ": " + what + ": " + std::strerror(errno)};
  };
  Fd out;
  out.fd = ::mkostemp(temporary.data(), O_CLOEXEC);
  if (out.fd < 0) return io_error("cannot create " + temporary);
  if (::fchmod(out.fd, 0644) != 0) {  // mkostemp's 0600: as a file open() would make
    Error e = io_error("cannot set the mode of " + temporary);
    ::unlink(temporary.c_str());
    return e;
  }
  if (!write_all(out.fd, head.data(), head.size()) || !write_all(out.fd, ids.data(), ids.size()) ||
      !write_all(out.fd, s.kv.data(), s.kv.size()) || !write_all(out.fd, tail.data(), tail.size())) {
    Error e = io_error("cannot write " + temporary);
    ::unlink(temporary.c_str());
    return e;
  }
  const int closed = ::close(out.fd);
  out.fd = -1;
  if (closed != 0) {
    Error e = io_error("cannot write " + temporary);
    ::unlink(temporary.c_str());
    return e;
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    Error e = io_error("cannot rename " + temporary + " to it");
    ::unlink(temporary.c_str());
    return e;
  }
  return Status::ok();
}

Result<KvSnapshot> read_prompt_cache(const std::string& path, const KvLayout& layout) {
  auto format = [&](const std::string& what) { return Error{ErrorCode::kFormat, path + ": " + what}; };
  // A field that must equal the model's: "header.kv_heads: 4, the model has 1".
  auto differs = [&](const char* field, uint64_t got, uint64_t want) {
    return format(std::string(field) + ": " + std::to_string(got) + ", the model has " + std::to_string(want));
  };
  Fd in;
  // O_NONBLOCK: a FIFO's open would wait for a writer before fstat could refuse it.
  in.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (in.fd < 0) return Error{ErrorCode::kIo, path + ": cannot open: " + std::strerror(errno)};
  struct stat st {};
  if (::fstat(in.fd, &st) != 0 || !S_ISREG(st.st_mode))
    return Error{ErrorCode::kIo, path + ": not a regular file"};
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  auto truncated = [&](const char* part) {
    return format(std::string(part) + ": the file ends early (" + std::to_string(file_size) + " bytes; truncated?)");
  };

  uint8_t h[kHeaderBytes];
  if (file_size < kHeaderBytes || !read_all(in.fd, h, kHeaderBytes)) return truncated("header");
  if (std::memcmp(h, kMagic, 8) != 0) return format("header.magic: not a Petrel prompt cache");
  const uint32_t version = load_le32(h + 8);
  if (version != kVersion)
    return Error{ErrorCode::kUnsupported, path + ": header.version: " + std::to_string(version) +
                                              ", this build reads version " + std::to_string(kVersion)};
  const uint32_t type = load_le32(h + 12);
  if (type > 2) return format("header.cache_type: " + std::to_string(type) + " (0 f32, 1 f16, 2 int8)");
  const DType cache_type = type == 1 ? DType::kF16 : type == 2 ? DType::kInt8 : DType::kF32;
  // Bound to the model: its file's size, metadata and data checksum.
  const std::string other = " (the file was made with another model than " + layout.model_name + ")";
  if (load_le64(h + 16) != layout.file_size)
    return format("header.model.file_size: " + std::to_string(load_le64(h + 16)) + ", the model's is " +
                  std::to_string(layout.file_size) + other);
  if (load_le64(h + 24) != layout.metadata_hash) return format("header.model.metadata_hash: differs from the model's" + other);
  const uint32_t has_crc = load_le32(h + 36);
  if (has_crc > 1) return format("header.model.has_data_crc32: " + std::to_string(has_crc) + " (0 or 1)");
  if ((has_crc == 1) != layout.data_crc32.has_value() || (has_crc == 1 && load_le32(h + 32) != *layout.data_crc32) ||
      (has_crc == 0 && load_le32(h + 32) != 0))
    return format("header.model.data_crc32: differs from the model's" + other);
  if (load_le32(h + 40) != layout.layers) return differs("header.layers", load_le32(h + 40), layout.layers);
  if (load_le32(h + 44) != layout.kv_heads) return differs("header.kv_heads", load_le32(h + 44), layout.kv_heads);
  if (load_le32(h + 48) != layout.head_dim) return differs("header.head_dim", load_le32(h + 48), layout.head_dim);
  const size_t row_bytes = models::cache_row_bytes(cache_type, layout.kv_heads, layout.head_dim);
  if (load_le32(h + 52) != row_bytes)
    return format("header.row_bytes: " + std::to_string(load_le32(h + 52)) + ", a " + type_name(type) +
                  " cache of this model's has " + std::to_string(row_bytes));
  if (load_le64(h + 56) != layout.max_positions)
    return differs("header.max_positions", load_le64(h + 56), layout.max_positions);
  const uint64_t tokens = load_le64(h + 64);
  if (tokens == 0 || tokens >= layout.max_positions)
    return format("header.tokens: " + std::to_string(tokens) + ", must be 1.." +
                  std::to_string(layout.max_positions - 1) + " (the model's positions, one left to generate)");
  const uint64_t payload = load_le64(h + 72);

  // The layer table (layers is the model's: bounded by its file).
  const size_t layers = layout.layers;
  if (file_size - kHeaderBytes < uint64_t{kLayerBytes} * layers) return truncated("layers");
  std::vector<uint8_t> table(kLayerBytes * layers);
  if (!read_all(in.fd, table.data(), table.size())) return truncated("layers");
  KvSnapshot s;
  s.cache_type = cache_type;
  s.row_bytes = row_bytes;
  s.ring.resize(layers);
  s.rows.resize(layers);
  s.from.resize(layers);
  CheckedSize kv_bytes;
  for (size_t l = 0; l < layers; ++l) {
    const std::string field = "layers[" + std::to_string(l) + "]";
    const uint64_t ring = load_le64(&table[kLayerBytes * l]), rows = load_le64(&table[kLayerBytes * l + 8]);
    if (ring != layout.ring[l]) return differs((field + ".ring").c_str(), ring, layout.ring[l]);
    const uint64_t want = held_rows(static_cast<size_t>(tokens), layout.ring[l]);
    if (rows != want)
      return format(field + ".rows: " + std::to_string(rows) + ", " + std::to_string(tokens) + " positions hold " +
                    std::to_string(want));
    // A ring holds no position its last `ring` ones overwrote; a full cache holds them all.
    const uint64_t from = load_le64(&table[kLayerBytes * l + 16]);
    const uint64_t lowest = ring != 0 && tokens > ring ? tokens - ring : 0;
    if (ring == 0 ? from != 0 : (from < lowest || from > tokens))
      return format(field + ".from: " + std::to_string(from) + ", must be " +
                    (ring == 0 ? std::string("0 (a full cache)")
                               : std::to_string(lowest) + ".." + std::to_string(tokens) + " (a ring of " +
                                     std::to_string(ring) + " slots after " + std::to_string(tokens) + " positions)"));
    s.ring[l] = layout.ring[l];
    s.rows[l] = static_cast<size_t>(rows);
    s.from[l] = static_cast<size_t>(from);
    kv_bytes += CheckedSize(rows) * row_bytes * 2;
  }
  if (!kv_bytes.ok() || kv_bytes.value() != payload)
    return format("header.payload_bytes: " + std::to_string(payload) + ", the layers' rows take " +
                  (kv_bytes.ok() ? std::to_string(kv_bytes.value()) : std::string("more than 2^64")));
  // Every size against the file's before anything is allocated for it.
  CheckedSize expected(kHeaderBytes);
  expected += CheckedSize(kLayerBytes) * layers;
  expected += CheckedSize(tokens) * 4;
  expected += CheckedSize(payload);
  expected += CheckedSize(kCrcBytes);
  if (!expected.ok() || expected.value() != file_size)
    return format("size: " + std::to_string(file_size) + " bytes, the header declares " +
                  (expected.ok() ? std::to_string(expected.value()) : std::string("more than 2^64")) +
                  (expected.ok() && expected.value() > file_size ? " (truncated?)" : ""));
  if (payload > SIZE_MAX || tokens * 4 > SIZE_MAX) return Error{ErrorCode::kOutOfMemory, path + ": larger than this device's address space"};

  try {
    std::vector<uint8_t> ids(static_cast<size_t>(tokens) * 4);
    if (!read_all(in.fd, ids.data(), ids.size())) return truncated("tokens");
    s.kv.resize(static_cast<size_t>(payload));
    if (!read_all(in.fd, s.kv.data(), s.kv.size())) return truncated("payload");
    uint8_t stored[kCrcBytes];
    if (!read_all(in.fd, stored, kCrcBytes)) return truncated("crc32");
    uint32_t crc = crc32(h, kHeaderBytes);
    crc = crc32(table.data(), table.size(), crc);
    crc = crc32(ids.data(), ids.size(), crc);
    crc = crc32(s.kv.data(), s.kv.size(), crc);
    if (crc != load_le32(stored)) {
      char text[96];
      std::snprintf(text, sizeof text, "crc32: the file's bytes give 0x%08x, it records 0x%08x (corrupt)", crc,
                    load_le32(stored));
      return format(text);
    }
    s.tokens.resize(static_cast<size_t>(tokens));
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      const uint32_t id = load_le32(&ids[4 * i]);
      if (id >= layout.vocab_size)
        return format("tokens[" + std::to_string(i) + "]: id " + std::to_string(id) + " is outside the vocabulary (" +
                      std::to_string(layout.vocab_size) + " tokens)");
      s.tokens[i] = static_cast<int32_t>(id);
    }
    // The values: finite (and an int8 row's scales >= 0), as the caches' writers leave them.
    const size_t width = size_t{layout.kv_heads} * layout.head_dim;
    const size_t total_rows = s.kv.size() / row_bytes;
    for (size_t r = 0; r < total_rows; ++r) {
      const uint8_t* row = s.kv.data() + r * row_bytes;
      bool ok = true;
      if (cache_type == DType::kF32) {
        for (size_t i = 0; i < width && ok; ++i) {
          float f;
          std::memcpy(&f, row + 4 * i, 4);
          ok = std::isfinite(f);
        }
      } else if (cache_type == DType::kF16) {
        for (size_t i = 0; i < width && ok; ++i) ok = finite_f16(load_le16(row + 2 * i));
      } else {
        const size_t scales = row_bytes - layout.kv_heads * sizeof(float);
        for (size_t i = 0; i < layout.kv_heads && ok; ++i) {
          float f;
          std::memcpy(&f, row + scales + 4 * i, 4);
          ok = std::isfinite(f) && f >= 0;
        }
      }
      if (!ok)
        return format("payload: row " + std::to_string(r) + " holds a value that is not finite" +
                      (cache_type == DType::kInt8 ? std::string(" or a negative scale") : std::string()));
    }
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kOutOfMemory, path + ": out of memory (" + std::to_string(payload) + " bytes of K/V rows)"};
  }
  return s;
}

void PromptCache::set_budget(size_t bytes) {
  budget_ = bytes;
  while (bytes_ > budget_) drop_oldest();
}

const KvSnapshot* PromptCache::find_exact(const std::vector<int32_t>& tokens, DType type) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->cache_type == type && it->tokens == tokens) {
      entries_.splice(entries_.begin(), entries_, it);
      return &entries_.front();
    }
  return nullptr;
}

const KvSnapshot* PromptCache::find_serial(uint64_t serial) const {
  for (const KvSnapshot& s : entries_)
    if (s.serial == serial) return &s;
  return nullptr;
}

void PromptCache::make_room(size_t bytes) {
  while (!entries_.empty() && (bytes_ > budget_ || budget_ - bytes_ < bytes)) drop_oldest();
}

uint64_t PromptCache::insert(KvSnapshot&& snapshot) {
  snapshot.serial = next_serial_++;
  const size_t charged = snapshot.bytes();
  entries_.push_front(std::move(snapshot));  // a list node: std::bad_alloc leaves the cache as it was
  bytes_ += charged;
  return entries_.front().serial;
}

void PromptCache::drop_oldest() {
  bytes_ -= entries_.back().bytes();
  entries_.pop_back();
}

}  // namespace petrel::detail
