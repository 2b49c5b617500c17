#include "convert/checkpoint_file.h"

#include <sys/stat.h>

#include "convert/pytorch_checkpoint.h"
#include "convert/safetensors.h"

namespace petrel::convert {
namespace {

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

std::unique_ptr<CheckpointFile> open_checkpoint_weights(const std::string& dir) {
  const std::string safetensors = dir + "/model.safetensors", pytorch = dir + "/pytorch_model.bin";
  if (file_exists(safetensors)) return std::make_unique<SafetensorsFile>(safetensors);
  if (file_exists(pytorch)) return std::make_unique<PytorchCheckpoint>(pytorch);
  for (const char* index : {"/model.safetensors.index.json", "/pytorch_model.bin.index.json"})
    if (file_exists(dir + index))
      throw ConvertError(dir + index + ": sharded checkpoints are not supported (one model.safetensors or "
                         "pytorch_model.bin is)");
  throw ConvertError(dir + ": no model.safetensors or pytorch_model.bin (a checkpoint directory needs one)");
}

}  // namespace petrel::convert
