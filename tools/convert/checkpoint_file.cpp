#include "convert/checkpoint_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <set>

#include "convert/config_reader.h"
#include "convert/pytorch_checkpoint.h"
#include "convert/safetensors.h"

namespace petrel::convert {

// The elements per row of `info` along its first dimension, checking that rows
// [first_row, first_row + rows) exist.
uint64_t row_elements(const CheckpointFile& file, const std::string& name, uint64_t first_row, uint64_t rows) {
  const TensorInfo& t = file.info(name);
  if (t.shape.empty() || first_row > t.shape[0] || rows > t.shape[0] - first_row)
    throw ConvertError(file.path() + ": tensor '" + name + "': rows " + std::to_string(first_row) + ".." +
                       std::to_string(first_row + rows) + " are not in the tensor");
  uint64_t n = 1;
  for (size_t d = 1; d < t.shape.size(); ++d) n *= t.shape[d];  // the readers checked the product
  return n;
}

void CheckpointFile::read_f32_rows(const std::string& name, uint64_t first_row, uint64_t rows, float* out) const {
  const uint64_t n = row_elements(*this, name, first_row, rows);
  if (name != rows_name_) {
    rows_name_.clear();  // (consistent if read_f32 throws)
    rows_values_ = read_f32(name);
    rows_name_ = name;
  }
  std::copy(rows_values_.begin() + first_row * n, rows_values_.begin() + (first_row + rows) * n, out);
}

std::map<std::string, std::string> parse_shard_index(const std::string& path, const std::string& text) {
  const nlohmann::json j = parse_json(path, text);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw ConvertError(path + ": not a sharded checkpoint index (a JSON object with a \"weight_map\" object)");
  std::map<std::string, std::string> map;
  std::set<std::string> shards;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    const std::string& tensor = it.key();
    if (!it.value().is_string())
      throw ConvertError(path + ": weight_map: tensor '" + tensor + "' names no shard file (" +
                         json_excerpt(it.value()) + ")");
    const std::string shard = it.value().get<std::string>();
    // A file of the checkpoint's directory: never a path that leads elsewhere.
    if (shard.empty() || shard == "." || shard == ".." || shard.size() > 255 ||
        shard.find_first_of(std::string("/\\\0", 3)) != std::string::npos)
      throw ConvertError(path + ": weight_map: tensor '" + tensor + "': shard '" + shard +
                         "' is not a file name in the checkpoint's directory");
    if (shards.insert(shard).second && shards.size() > kMaxShards)
      throw ConvertError(path + ": weight_map names more than " + std::to_string(kMaxShards) + " shard files");
    map.emplace(tensor, shard);  // JSON object keys: nlohmann keeps the last of a repeated key
  }
  if (map.empty()) throw ConvertError(path + ": weight_map is empty");
  return map;
}

ShardedCheckpoint::ShardedCheckpoint(const std::string& index_path, const std::string& index_text,
                                     const std::function<std::unique_ptr<CheckpointFile>(const std::string&)>& open)
    : path_(index_path) {
  const std::map<std::string, std::string> map = parse_shard_index(index_path, index_text);
  const std::string dir = index_path.substr(0, index_path.find_last_of('/') + 1);
  std::map<std::string, std::vector<std::string>> tensors_of;  // shard -> its tensors in the index
  for (const auto& [tensor, shard] : map) tensors_of[shard].push_back(tensor);
  for (const auto& [shard, tensors] : tensors_of) {
    const std::string shard_path = dir + shard;
    if (!file_exists(shard_path))
      throw ConvertError(index_path + ": shard '" + shard + "' (of tensor '" + tensors.front() + "') is missing");
    shards_.push_back(open(shard_path));
    const CheckpointFile& file = *shards_.back();
    for (const std::string& tensor : tensors)
      if (!file.has(tensor))
        throw ConvertError(shard_path + ": no tensor '" + tensor + "', which " + index_path + " places there");
    for (const std::string& tensor : file.names()) {
      auto [it, added] = shard_of_.emplace(tensor, &file);
      if (!added)
        throw ConvertError(index_path + ": tensor '" + tensor + "' is in two shards (" + it->second->path() + " and " +
                           shard_path + ")");
      auto listed = map.find(tensor);
      if (listed == map.end() || listed->second != shard)
        throw ConvertError(shard_path + ": holds tensor '" + tensor + "', which " + index_path +
                           (listed == map.end() ? " does not list" : " places in '" + listed->second + "'"));
    }
  }
}

std::string ShardedCheckpoint::format() const {
  return std::to_string(shards_.size()) + (shards_.size() == 1 ? " shard, " : " shards, ") +
         (shards_.empty() ? "" : shards_.front()->format());
}

std::vector<std::string> ShardedCheckpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [name, file] : shard_of_) out.push_back(name);
  return out;
}

const TensorInfo* ShardedCheckpoint::find(const std::string& name) const {
  auto it = shard_of_.find(name);
  return it == shard_of_.end() ? nullptr : it->second->find(name);
}

const CheckpointFile& ShardedCheckpoint::shard(const std::string& name) const {
  auto it = shard_of_.find(name);
  if (it == shard_of_.end()) throw ConvertError(path_ + ": missing tensor '" + name + "'");
  return *it->second;
}

std::unique_ptr<CheckpointFile> open_checkpoint_weights(const std::string& dir) {
  const std::string safetensors = dir + "/model.safetensors", pytorch = dir + "/pytorch_model.bin";
  if (file_exists(safetensors)) return std::make_unique<SafetensorsFile>(safetensors);
  if (file_exists(pytorch)) return std::make_unique<PytorchCheckpoint>(pytorch);
  const std::string safetensors_index = safetensors + ".index.json", pytorch_index = pytorch + ".index.json";
  if (file_exists(safetensors_index))
    return std::make_unique<ShardedCheckpoint>(safetensors_index, read_text(safetensors_index, ""),
                                               [](const std::string& p) { return std::make_unique<SafetensorsFile>(p); });
  if (file_exists(pytorch_index))
    return std::make_unique<ShardedCheckpoint>(pytorch_index, read_text(pytorch_index, ""),
                                               [](const std::string& p) { return std::make_unique<PytorchCheckpoint>(p); });
  throw ConvertError(dir + ": no model.safetensors or pytorch_model.bin, nor a sharded checkpoint's index "
                     "(model.safetensors.index.json, pytorch_model.bin.index.json): a checkpoint directory needs one");
}

}  // namespace petrel::convert
