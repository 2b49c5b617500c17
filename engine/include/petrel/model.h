// A loaded Petrel model: immutable after load, shareable across threads, owns the
// mapped file. Loading verifies the whole file (ARCHITECTURE.md, "The model file"); nothing
// here throws.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "petrel/export.h"
#include "petrel/status.h"
#include "petrel/types.h"

namespace petrel {

namespace detail {
struct ModelAccess;  // the engine's way in (engine/src/model_access.h)
}

class Model {
 public:
  // Maps the file read-only and verifies it. Errors name the file and the field.
  PETREL_API static Result<std::shared_ptr<const Model>> load(const std::string& path);
  // Copies `size` bytes into aligned storage owned by the model (for models shipped
  // inside app assets). `name` is used in error messages.
  PETREL_API static Result<std::shared_ptr<const Model>> load_from_memory(const void* data, size_t size,
                                                                          const std::string& name = "<memory>");

  // Storage for a model's bytes that load_from_buffer adopts without a copy (64-byte
  // aligned; on Linux, from 2 MiB up, in 2 MiB pages where the kernel gives them, so up
  // to 2 MiB more is resident; for an app, or a web page, that receives a model in
  // pieces): fill `size` bytes, then hand it over. nullptr when out of memory.
  // free_buffer releases one that was never handed over.
  PETREL_API static void* allocate_buffer(size_t size);
  PETREL_API static void free_buffer(void* buffer);
  // Takes ownership of a buffer from allocate_buffer holding `size` bytes (freed with
  // the model, or at once when loading fails).
  PETREL_API static Result<std::shared_ptr<const Model>> load_from_buffer(void* buffer, size_t size,
                                                                          const std::string& name = "<memory>");

  PETREL_API const ModelInfo& info() const;

  // Reads the whole data section and compares its CRC-32 with the converter's
  // (ModelInfo::data_crc32): loading checks structure only, and cannot see a flipped
  // weight. O(file size): ~60 ms of CPU per 100 MB here. kFormat naming the file when they
  // differ; kUnsupported when the file records no checksum.
  PETREL_API Status verify_data() const;

  PETREL_API ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

 private:
  friend struct detail::ModelAccess;
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The library's version (the newest file format it reads: petrel_format_major() and
// petrel_format_minor(), petrel.h).
PETREL_API const char* library_version();

}  // namespace petrel
