// petrel-convert's library entry points: a checkpoint directory to a model file,
// dispatched by what the directory holds (a Marian C++ model, a decoder-only language
// model: convert_lm.h, else a Hugging Face translation checkpoint:
// convert_encoder_decoder.h), and the checks and option parsing the tools share.
#include "convert/convert.h"

#include <dirent.h>
#include <sys/stat.h>

#include <memory>
#include <optional>

#include "convert/checkpoint_file.h"
#include "convert/config_reader.h"
#include "convert/convert_encoder_decoder.h"
#include "convert/convert_lm.h"
#include "convert/family_tokenizer.h"

namespace petrel::convert {

bool valid_embed_scale(double scale) { return scale >= 1e-6 && scale <= 1e6; }  // NaN fails: its fold and unscale stay finite f32

DType parse_dtype(const std::string& text, const std::string& flag) {
  if (text == "f32") return DType::kF32;
  if (text == "f16") return DType::kF16;
  if (text == "int8") return DType::kInt8;
  if (text == "int4") return DType::kInt4;
  throw ConvertError(flag + ": unknown dtype '" + text + "' (f32, f16, int8, int4)");
}

NormPlacement parse_norm(const std::string& text) {
  if (text == "pre") return NormPlacement::kPre;
  if (text == "post") return NormPlacement::kPost;
  throw ConvertError("--norm: unknown value '" + text + "' (pre, post)");
}

PositionChoice parse_position_choice(const std::string& text) {
  if (text == "auto") return PositionChoice::kAuto;
  if (text == "sinusoidal-concatenated") return PositionChoice::kSinusoidalConcatenated;
  if (text == "sinusoidal-interleaved") return PositionChoice::kSinusoidalInterleaved;
  if (text == "learned") return PositionChoice::kLearned;
  if (text == "none") return PositionChoice::kNone;
  throw ConvertError("--positions: unknown value '" + text +
                     "' (auto, sinusoidal-concatenated, sinusoidal-interleaved, learned, none)");
}

namespace {
// The output is written beside itself and renamed into place, which replaces whatever the
// path names: refuse what must not be replaced (a device, FIFO, symlink or directory, or
// one of the checkpoint's own files: its weights were overwritten).
void check_output_path(const std::string& output, const std::string& dir) {
  if (output.empty()) throw ConvertError("no output path given");
  struct stat out {};
  if (::lstat(output.c_str(), &out) != 0) return;  // a new file
  if (!S_ISREG(out.st_mode))
    throw ConvertError(output + ": exists and is not a regular file (a device, FIFO, symlink or directory): not replaced");
  if (DIR* d = ::opendir(dir.c_str())) {
    bool input = false;
    for (const dirent* e; !input && (e = ::readdir(d)) != nullptr;) {
      struct stat in {};
      input = ::stat((dir + "/" + e->d_name).c_str(), &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino;
    }
    ::closedir(d);
    if (input) throw ConvertError(output + ": is a file of the checkpoint being converted: not replaced");
  }
}
}  // namespace

ConvertReport convert_checkpoint(const ConvertOptions& options) {
  const std::string& dir = options.checkpoint_dir;
  struct stat dir_stat {};
  if (::stat(dir.c_str(), &dir_stat) != 0 || !S_ISDIR(dir_stat.st_mode))
    throw ConvertError(dir + ": not a checkpoint directory");
  check_output_path(options.output_path, dir);
  if (options.embed_scale && !valid_embed_scale(*options.embed_scale))
    throw ConvertError("--embed-scale must be in [1e-6, 1e6]");
  if (!file_exists(dir + "/config.json"))
    if (auto native = find_marian_native_files(dir)) return convert_marian_native(options, *native);
  const std::string config_path = dir + "/config.json", generation_path = dir + "/generation_config.json";
  const ConfigReader config_json(config_path, read_text(config_path, " (a checkpoint directory needs config.json)"));
  if (is_decoder_only_type(config_json.text("model_type", ""))) {
    std::optional<ConfigReader> generation;
    if (file_exists(generation_path)) generation.emplace(generation_path, read_text(generation_path, ""));
    std::unique_ptr<CheckpointFile> weights = open_checkpoint_weights(dir);
    ConvertReport report = convert_decoder_only(options, config_json, generation ? &*generation : nullptr, *weights);
    const std::string& path = weights->path();
    report.notes.insert(report.notes.begin(),
                        "weights: read " + path.substr(path.find_last_of('/') + 1) + " (" + weights->format() + ")");
    return report;
  }
  CheckpointConfig config = read_config(config_json, options);
  if (file_exists(generation_path))
    read_generation(ConfigReader(generation_path, read_text(generation_path, "")), config,
                    /*from_generation_config=*/true);
  std::unique_ptr<CheckpointFile> weights = open_checkpoint_weights(dir);
  Source src(*weights, options);
  ConvertReport report = Converter(options, config, src).run();
  const std::string& path = weights->path();
  report.notes.insert(report.notes.begin(),
                      "weights: read " + path.substr(path.find_last_of('/') + 1) + " (" + weights->format() + ")");
  return report;
}

CheckedVocabulary check_checkpoint_json(const CheckpointJson& files, const ConvertOptions& options) {
  const std::string& dir = options.checkpoint_dir;
  const ConfigReader config_json(dir + "/config.json", files.config);
  if (is_decoder_only_type(config_json.text("model_type", ""))) {  // a language model: no vocabulary files yet
    std::optional<ConfigReader> generation;
    if (files.generation_config) generation.emplace(dir + "/generation_config.json", *files.generation_config);
    check_decoder_only_json(config_json, generation ? &*generation : nullptr, dir, files.tokenizer_config);
    return {{}, {}, false, config_json.text("model_type", "")};
  }
  CheckpointConfig c = read_config(config_json, options);
  if (files.generation_config)
    read_generation(ConfigReader(dir + "/generation_config.json", *files.generation_config), c,
                    /*from_generation_config=*/true);
  if (c.family != Family::kMarian) {
    const FamilyTokenizerFiles family{dir, files.tokenizer_config, files.vocab, files.family_sentencepiece};
    const auto t = family_tokenizer_from(family, c.model_type, c.tokenizer_class, c.vocab, nullptr);
    return {t ? t->vocab : std::vector<std::string>{}, {}, false, c.model_type, t.has_value()};
  }
  if (!files.vocab) return {{}, {}, false, c.model_type};
  const VocabularyFiles v = read_vocabulary_files(dir, c, *files.vocab, files.target_vocab, files.tokenizer_config,
                                                  files.sentencepiece);
  return {v.vocab, v.target_vocab, v.marian, c.model_type};
}

}  // namespace petrel::convert
