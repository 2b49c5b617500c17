// The text tokenizer of models converted with a word/character vocabulary.
#include <sstream>
#include <unordered_map>

#include "petrel/translator.h"

namespace petrel {

Result<std::vector<int32_t>> encode_text(const Model& model, const std::string& text) {
  const ModelInfo& info = model.info();
  if (!info.has_text_tokenizer)
    return Error{ErrorCode::kUnsupported, "this model file carries no text tokenizer; pass token ids"};
  std::unordered_map<std::string, int32_t> ids;
  for (size_t i = 0; i < info.vocab.size(); ++i) ids.emplace(info.vocab[i], static_cast<int32_t>(i));
  std::vector<int32_t> out;
  std::istringstream words(text);
  std::string word;
  while (words >> word) {
    if (auto it = ids.find(word); it != ids.end()) {
      out.push_back(it->second);
      continue;
    }
    for (size_t i = 0; i < word.size();) {  // UTF-8 characters
      size_t len = 1;
      auto lead = static_cast<unsigned char>(word[i]);
      if (lead >= 0xf0) len = 4;
      else if (lead >= 0xe0) len = 3;
      else if (lead >= 0xc0) len = 2;
      std::string ch = word.substr(i, len);
      auto it = ids.find(ch);
      if (it == ids.end())
        return Error{ErrorCode::kInvalidArgument,
                     "cannot encode '" + ch + "' in word '" + word + "': not in the model's vocabulary"};
      out.push_back(it->second);
      i += len;
    }
  }
  out.push_back(info.eos_id);
  return out;
}

Result<std::string> decode_text(const Model& model, const std::vector<int32_t>& ids) {
  const ModelInfo& info = model.info();
  if (info.vocab.empty()) return Error{ErrorCode::kUnsupported, "this model file carries no vocabulary"};
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= info.vocab.size())
      return Error{ErrorCode::kInvalidArgument, "token id " + std::to_string(id) + " is out of range"};
    if (id == info.eos_id || id == info.pad_id || id == info.decoder_start_id) continue;
    if (!out.empty()) out += ' ';
    out += info.vocab[static_cast<size_t>(id)];
  }
  return out;
}

}  // namespace petrel
