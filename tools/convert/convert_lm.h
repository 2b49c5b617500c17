// petrel-convert for decoder-only language models: Hugging Face Gemma 3 (gemma3_text),
// Llama (Llama 3.x, SmolLM2) and Qwen2 / Qwen3 checkpoints -> one .petrel file.
#pragma once

#include <optional>
#include <string>

#include "convert/checkpoint_file.h"
#include "convert/config_reader.h"
#include "convert/convert.h"

namespace petrel::convert {

// The model_types convert_decoder_only reads.
bool is_decoder_only_type(const std::string& model_type);

// config.json, generation_config.json and tokenizer_config.json (its token texts and chat
// template; `tokenizer_config` its text, when there is one) of checkpoint directory
// `dir`, checked as convert_decoder_only checks them.
void check_decoder_only_json(const ConfigReader& config, const ConfigReader* generation_config,
                             const std::string& dir, const std::optional<std::string>& tokenizer_config);

// Throws ConvertError naming the file and tensor on any problem.
ConvertReport convert_decoder_only(const ConvertOptions& options, const ConfigReader& config,
                                   const ConfigReader* generation_config, const CheckpointFile& weights);

}  // namespace petrel::convert
