#include "petrel/model.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <optional>

#include "format/crc32.h"
#include "format/model_file.h"
#include "format/string_table_access.h"
#include "kernels/positions.h"
#include "model_access.h"
#include "text/chat_template.h"
#include "text/fairseq_tokenizer.h"
#include "text/hf_tokenizer.h"
#include "text/marian_tokenizer.h"
#include "text/spm_ids_tokenizer.h"
#include "text/marian_words_tokenizer.h"
#include "text/word_tokenizer.h"

namespace petrel {

const char* library_version() { return "0.1.0"; }

// The bytes a model reads: a read-only file mapping or an aligned heap copy. (Not in
// the anonymous namespace: Model::Impl, a class with linkage, holds one.)
class ModelStorage {
 public:
  virtual ~ModelStorage() = default;
  virtual const uint8_t* data() const = 0;
  virtual size_t size() const = 0;
};

namespace {

class MappedFile final : public ModelStorage {
 public:
  MappedFile(void* addr, size_t size) : addr_(addr), size_(size) {}
  ~MappedFile() override { munmap(addr_, size_); }
  const uint8_t* data() const override { return static_cast<const uint8_t*>(addr_); }
  size_t size() const override { return size_; }

 private:
  void* addr_;
  size_t size_;
};

// Bytes in a buffer from Model::allocate_buffer, owned.
class AlignedCopy final : public ModelStorage {
 public:
  AlignedCopy(uint8_t* data, size_t size) : data_(data), size_(size) {}
  ~AlignedCopy() override { Model::free_buffer(data_); }
  const uint8_t* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  uint8_t* data_;
  size_t size_;
};

// Sinusoidal tables above this many floats are refused: they are generated (on first
// use) from two header fields, so a 10 KB hostile file could otherwise cost 256 MB
// and a second of sin/cos per table. 2^22 (16 MB) is 4096 positions at d_model 1024,
// four times the longest of the model families Petrel reads (NLLB, tc-big: 1024).
constexpr uint64_t kMaxGeneratedTable = 1ull << 22;

}  // namespace

struct Model::Impl {
  std::shared_ptr<const ModelStorage> storage;  // ModelInfo::vocab's copies share it
  // This process's number for the model (ModelAccess::serial), never reused.
  uint64_t serial = 0;
  std::string name;  // the path or the caller's name, for messages
  ModelInfo info;
  detail::ModelWeights weights;
  // Generated sinusoid tables (4 MiB for NLLB: a third of a load's page faults) are
  // made on first use of the weights, not at load; call_once orders that write before
  // every reader, so the Model stays shareable across threads.
  std::once_flag positions_once;
  std::vector<float> encoder_positions, decoder_positions;
  std::unique_ptr<text::Tokenizer> tokenizer;
  std::optional<text::ChatTemplate> chat_template;  // parsed at load: a file's template is checked whole

  void make_position_tables();
};

namespace {

bool generated(const detail::Stack& stack) {
  return stack.positions.kind == PositionKind::kSinusoidalInterleaved ||
         stack.positions.kind == PositionKind::kSinusoidalConcatenated;
}

}  // namespace

void Model::Impl::make_position_tables() {
  auto make_table = [&](detail::Stack& stack, std::vector<float>& table) {
    if (!generated(stack)) return;
    table.resize(size_t{info.max_positions} * info.d_model);  // the size was checked at load
    kernels::sinusoidal_table(stack.positions, info.max_positions, info.d_model, table.data());
    stack.position_table = table.data();
  };
  make_table(weights.encoder, encoder_positions);
  const auto& ep = weights.encoder.positions;
  const auto& dp = weights.decoder.positions;
  if (ep.kind == dp.kind && ep.frequency == dp.frequency && ep.first_index == dp.first_index &&
      !encoder_positions.empty())
    weights.decoder.position_table = encoder_positions.data();  // same table
  else
    make_table(weights.decoder, decoder_positions);
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;
const ModelInfo& Model::info() const { return impl_->info; }

Status Model::verify_data() const {
  const ModelInfo& info = impl_->info;
  if (!info.data_crc32)
    return Error{ErrorCode::kUnsupported,
                 impl_->name + ": the file records no data checksum (converted before petrel-convert wrote one)"};
  const uint8_t* bytes = impl_->storage->data();
  uint32_t flatbuffer_size = 0;
  std::memcpy(&flatbuffer_size, bytes, 4);  // verified at load: the data section follows
  const uint64_t start = detail::data_section_start(flatbuffer_size);
  const uint32_t crc = detail::crc32(bytes + start, impl_->storage->size() - start);
  if (crc != *info.data_crc32) {
    char text[96];
    std::snprintf(text, sizeof text, "CRC-32 0x%08x, the file records 0x%08x", crc, *info.data_crc32);
    return Error{ErrorCode::kFormat, impl_->name + ": the data section's checksum does not match (" + text +
                                         "): the weights are corrupt"};
  }
  return Status::ok();
}

namespace detail {
const ModelWeights& ModelAccess::weights(const Model& model) {
  Model::Impl& impl = *model.impl_;
  std::call_once(impl.positions_once, [&impl] { impl.make_position_tables(); });
  return impl.weights;
}
const text::Tokenizer* ModelAccess::tokenizer(const Model& model) { return model.impl_->tokenizer.get(); }
const text::ChatTemplate* ModelAccess::chat_template(const Model& model) {
  return model.impl_->chat_template ? &*model.impl_->chat_template : nullptr;
}
ModelAccess::Bytes ModelAccess::file_bytes(const Model& model) {
  return {model.impl_->storage->data(), model.impl_->storage->size()};
}
uint64_t ModelAccess::serial(const Model& model) { return model.impl_->serial; }
std::shared_ptr<const Model> ModelAccess::make(std::unique_ptr<Impl> impl) {
  static std::atomic<uint64_t> next_serial{1};
  impl->serial = next_serial++;
  return std::shared_ptr<const Model>(new Model(std::move(impl)));
}
}  // namespace detail

static Result<std::shared_ptr<const Model>> bind_and_build(std::unique_ptr<ModelStorage> storage,
                                                           const std::string& name) {
  auto bound = detail::bind_model_file(storage->data(), storage->size(), name);
  if (!bound) return bound.error();
  auto impl = std::make_unique<detail::ModelAccess::Impl>();
  impl->storage = std::move(storage);
  impl->name = name;
  impl->info = std::move(bound.value().info);
  impl->info.vocab = detail::StringTableAccess::owning(std::move(impl->info.vocab), impl->storage);
  impl->weights = std::move(bound.value().weights);
  impl->weights.info = &impl->info;

  // Generated tables are made on first use (Impl::make_position_tables); their size is
  // checked here, so a file that would need too large a one fails to load.
  const ModelInfo& info = impl->info;
  for (const detail::Stack* stack : {&impl->weights.encoder, &impl->weights.decoder}) {
    const uint64_t n = uint64_t{info.max_positions} * info.d_model;
    if (generated(*stack) && n > kMaxGeneratedTable)
      return Error{ErrorCode::kFormat, name + ": max_positions x d_model = " + std::to_string(n) +
                                           " is too large for a generated position table"};
  }
  if (bound.value().marian_tokenizer) {
    auto tokenizer = text::MarianTokenizer::create(std::move(*bound.value().marian_tokenizer), name);
    if (!tokenizer) return tokenizer.error();
    impl->tokenizer = std::move(tokenizer.value());
  } else if (bound.value().marian_words_tokenizer) {
    impl->tokenizer = std::make_unique<text::MarianWordsTokenizer>(std::move(*bound.value().marian_words_tokenizer));
  } else if (bound.value().spm_ids_tokenizer) {
    auto tokenizer = text::SentencePieceIdsTokenizer::create(std::move(*bound.value().spm_ids_tokenizer), name);
    if (!tokenizer) return tokenizer.error();
    impl->tokenizer = std::move(tokenizer.value());
  } else if (bound.value().hf_tokenizer) {
    auto tokenizer = text::HfTokenizer::create(std::move(*bound.value().hf_tokenizer), name);
    if (!tokenizer) return tokenizer.error();
    impl->tokenizer = std::move(tokenizer.value());
  } else if (bound.value().fairseq_tokenizer) {
    auto tokenizer = text::FairseqTokenizer::create(std::move(*bound.value().fairseq_tokenizer), name);
    if (!tokenizer) return tokenizer.error();
    impl->tokenizer = std::move(tokenizer.value());
  } else if (info.has_text_tokenizer) {
    impl->tokenizer = std::make_unique<text::WordTokenizer>(impl->info);
  }
  // The converter parsed the template; a file whose template does not parse was not
  // written by it, and is refused here rather than when a chat starts.
  if (!info.lm.chat_template.empty()) {
    auto parsed = text::ChatTemplate::parse(info.lm.chat_template);
    if (!parsed) {
      const ErrorCode code = parsed.error().code == ErrorCode::kOutOfMemory ? ErrorCode::kOutOfMemory : ErrorCode::kFormat;
      return Error{code, name + ": lm.chat_template: " + parsed.error().message};
    }
    impl->chat_template = std::move(parsed.value());
  }
  return detail::ModelAccess::make(std::move(impl));
}

// Loading allocates from the file's sizes (checked against the file first): memory that
// still runs out is an error, and `storage` is released with everything else.
static Result<std::shared_ptr<const Model>> finish_load(std::unique_ptr<ModelStorage> storage,
                                                        const std::string& name) {
  return detail::without_exceptions([&] { return bind_and_build(std::move(storage), name); }, name);
}

Result<std::shared_ptr<const Model>> Model::load(const std::string& path) {
  // O_NONBLOCK: a FIFO's open would wait for a writer before fstat could refuse it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Error{ErrorCode::kIo, path + ": cannot open: " + std::strerror(errno)};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error{ErrorCode::kIo, path + ": not a regular file"};
  }
  if (static_cast<uint64_t>(st.st_size) > SIZE_MAX) {  // a 32-bit build (armv7, wasm32) cannot map it
    ::close(fd);
    return Error{ErrorCode::kFormat, path + ": " + std::to_string(st.st_size) +
                                         " bytes, more than a 32-bit build can map"};
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return Error{ErrorCode::kFormat, path + ": file is empty"};
  }
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_errno = errno;
  ::close(fd);
  if (addr == MAP_FAILED)
    return Error{ErrorCode::kIo, path + ": cannot map: " + std::strerror(map_errno)};
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // A hint: parts of the file not yet in the page cache are then read in 2 MiB folios and
  // mapped with 2 MiB pages (in the kernel's "madvise" THP mode too), which one core
  // streams 1.2-1.4x faster than 4 KiB ones (bench/EXPERIMENTS.md, "Huge pages"). Every step reads
  // nearly all of a model's bytes, so reading 2 MiB ahead wastes little (an untied
  // embedding table's unused rows at most). Nothing fails without it.
  ::madvise(addr, size, MADV_HUGEPAGE);
#endif
  return finish_load(std::make_unique<MappedFile>(addr, size), path);
}

namespace {

// What free_buffer needs to release a buffer from allocate_buffer, in the 64 bytes before
// it (which keep the buffer 64-byte aligned).
struct BufferHeader {
  void* base;     // what was allocated
  size_t length;  // bytes mapped from base; 0: base is from aligned_alloc
};
constexpr size_t kBufferHeader = 64;
static_assert(sizeof(BufferHeader) <= kBufferHeader, "the header fits before the buffer");

}  // namespace

void* Model::allocate_buffer(size_t size) {
  constexpr size_t kHuge = size_t{2} << 20;
  if (size == 0 || size > SIZE_MAX - 2 * kHuge) return nullptr;
  uint8_t* buffer = nullptr;
  BufferHeader header{};
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (size >= kHuge) {
    // In 2 MiB pages where the kernel gives them, as Model::load's mapping. Mapped here,
    // not taken from malloc: memory malloc hands back after an earlier free may already be
    // in 4 KiB pages, and would stay so. The buffer starts on a 2 MiB boundary, its header
    // in the page before; the slack around them is unmapped.
    const long page_size = ::sysconf(_SC_PAGESIZE);
    const size_t page = page_size > 0 ? static_cast<size_t>(page_size) : 4096;
    const size_t bytes = (size + kHuge - 1) / kHuge * kHuge;
    void* mapped = ::mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) return nullptr;
    const uintptr_t at = reinterpret_cast<uintptr_t>(mapped);
    const uintptr_t start = (at + kBufferHeader + kHuge - 1) / kHuge * kHuge;
    const uintptr_t keep = (start - kBufferHeader) / page * page;
    const size_t tail = kHuge - (start - at);  // (no end address: it may wrap to 0 on 32-bit)
    if (keep > at) ::munmap(mapped, keep - at);
    if (tail > 0) ::munmap(reinterpret_cast<void*>(start + bytes), tail);
    buffer = reinterpret_cast<uint8_t*>(start);
    header = {reinterpret_cast<void*>(keep), start + bytes - keep};
    ::madvise(buffer, bytes, MADV_HUGEPAGE);
  }
#endif
  if (buffer == nullptr) {
    void* base = std::aligned_alloc(64, kBufferHeader + (size + 63) / 64 * 64);
    if (base == nullptr) return nullptr;
    buffer = static_cast<uint8_t*>(base) + kBufferHeader;
    header = {base, 0};
  }
  std::memcpy(buffer - kBufferHeader, &header, sizeof header);
  return buffer;
}

void Model::free_buffer(void* buffer) {
  if (buffer == nullptr) return;
  BufferHeader header;
  std::memcpy(&header, static_cast<uint8_t*>(buffer) - kBufferHeader, sizeof header);
  if (header.length == 0) {
    std::free(header.base);
  } else {
    ::munmap(header.base, header.length);
  }
}

Result<std::shared_ptr<const Model>> Model::load_from_buffer(void* buffer, size_t size, const std::string& name) {
  if (buffer == nullptr || size == 0) {
    free_buffer(buffer);
    return Error{ErrorCode::kInvalidArgument, name + ": empty model buffer"};
  }
  std::unique_ptr<ModelStorage> storage(new (std::nothrow) AlignedCopy(static_cast<uint8_t*>(buffer), size));
  if (!storage) {
    free_buffer(buffer);
    return Error{ErrorCode::kOutOfMemory, name + ": out of memory"};
  }
  return finish_load(std::move(storage), name);
}

Result<std::shared_ptr<const Model>> Model::load_from_memory(const void* data, size_t size,
                                                             const std::string& name) {
  if (data == nullptr || size == 0)
    return Error{ErrorCode::kInvalidArgument, name + ": empty model buffer"};
  void* copy = allocate_buffer(size);
  if (copy == nullptr) return Error{ErrorCode::kOutOfMemory, name + ": out of memory copying the model"};
  std::memcpy(copy, data, size);
  return load_from_buffer(copy, size, name);
}

}  // namespace petrel
