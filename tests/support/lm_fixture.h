// Language-model files made for a test: the decoder-only fixture gemma3_f32 (128 ids,
// 512 positions) converted with a small tokenizer.json made here and a chat template
// the test gives, so that a hostile template or tokenizer part can be tried on the whole
// path a chat takes (load, render, tokenize, generate).
#pragma once

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "convert/convert.h"
#include "support/test_support.h"

namespace petrel::test {

// A Gemma-style tokenizer.json of `tokens` (the first six: <pad> <eos> <bos> <unk>
// <start_of_turn> <end_of_turn>, special) and BPE `merges` (each result appended to the
// tokens if missing): a space becomes '▁' and splits words, <bos> goes first.
inline nlohmann::json gemma_style_tokenizer_json(std::vector<std::string> tokens,
                                                 const std::vector<std::pair<std::string, std::string>>& merges) {
  using json = nlohmann::json;
  json merge_list = json::array();
  for (const auto& [l, r] : merges) {
    if (std::find(tokens.begin(), tokens.end(), l + r) == tokens.end()) tokens.push_back(l + r);
    merge_list.push_back(json::array({l, r}));
  }
  json vocab = json::object();
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = i;
  json added = json::array();
  for (int id = 0; id < 6; ++id)
    added.push_back({{"id", id}, {"content", tokens[static_cast<size_t>(id)]}, {"single_word", false},
                     {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", true}});
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xe2\x96\x81"}}},
          {"pre_tokenizer",
           {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithPrevious"}, {"invert", false}}},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single", json::array({{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
                                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}}},
          {"decoder",
           {{"type", "Sequence"},
            {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", "\xe2\x96\x81"}}}, {"content", " "}},
                                      {{"type", "ByteFallback"}},
                                      {{"type", "Fuse"}}})}}},
          {"model",
           {{"type", "BPE"}, {"unk_token", "<unk>"}, {"fuse_unk", true}, {"byte_fallback", false}, {"vocab", vocab},
            {"merges", merge_list}}}};
}

// The specials, '▁', letters, digits and a few marks, with merges into a few words: 88 of
// the fixture's 128 ids.
inline nlohmann::json tiny_lm_tokenizer_json() {
  std::vector<std::string> tokens = {"<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>",
                                     "\xe2\x96\x81", "\n"};
  for (char c = 'a'; c <= 'z'; ++c) tokens.emplace_back(1, c);
  for (char c = 'A'; c <= 'Z'; ++c) tokens.emplace_back(1, c);
  for (char c = '0'; c <= '9'; ++c) tokens.emplace_back(1, c);
  for (const char* p : {".", ",", "!", "?", "'", ":", "[", "]", "(", ")", "-"}) tokens.emplace_back(p);
  return gemma_style_tokenizer_json(
      tokens, {{"u", "s"}, {"e", "r"}, {"us", "er"}, {"t", "h"}, {"th", "e"}, {"\xe2\x96\x81", "the"}, {"i", "n"}});
}

// A chat template in Gemma's turn format: what a well-behaved model file carries.
inline std::string tiny_lm_chat_template() {
  return "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] | trim }}"
         "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}";
}

// gemma3_f32 converted with `tokenizer_json` and `chat_template` (f32 weights), once per
// run under `name` (shared_file): the model file's path.
inline std::string tiny_lm(const std::string& name, const std::string& chat_template,
                           const nlohmann::json& tokenizer_json = tiny_lm_tokenizer_json()) {
  return shared_file("tiny-lm-" + name + ".petrel", [&](const std::string& out) {
    TempDir dir;
    copy_dir(fixture_dir() + "/decoder_only/gemma3_f32", dir.path());
    const nlohmann::json config = {{"chat_template", chat_template},
                                   {"bos_token", "<bos>"},
                                   {"eos_token", "<end_of_turn>"},
                                   {"clean_up_tokenization_spaces", false}};
    write_bytes(dir.file("tokenizer.json"), [&] {
      const std::string text = tokenizer_json.dump();
      return std::vector<uint8_t>(text.begin(), text.end());
    }());
    write_bytes(dir.file("tokenizer_config.json"), [&] {
      const std::string text = config.dump();
      return std::vector<uint8_t>(text.begin(), text.end());
    }());
    convert::ConvertOptions o;
    o.checkpoint_dir = dir.path();
    o.output_path = out;
    o.linear_dtype = o.embedding_dtype = DType::kF32;
    convert::convert_checkpoint(o);
  });
}

}  // namespace petrel::test
