// petrel-inspect: what a .petrel file holds — architecture, folds, tensors.
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/cli.h"
#include "petrel/model.h"
#include "petrel/generator.h"
#include "petrel/translator.h"

using namespace petrel;

// The text description is gathered here, then printed through without_controls: strings
// from the file (tensor names, notes, tokens, templates) may hold terminal control
// sequences (clear the screen, set the title), which --json escapes and text must too.
static std::string text;
__attribute__((format(printf, 1, 2))) static void say(const char* format, ...) {
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  if (n > 0) {
    const size_t at = text.size();
    text.resize(at + static_cast<size_t>(n) + 1);
    std::vsnprintf(&text[at], static_cast<size_t>(n) + 1, format, again);
    text.resize(at + static_cast<size_t>(n));
  }
  va_end(again);
}
// C0 controls but the newline, DEL, and C1 controls (UTF-8 C2 80..C2 9F) as \xNN / \u00NN.
static std::string without_controls(const std::string& s) {
  std::string out;
  char code[8];
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c < 0x20 && c != '\n') || c == 0x7f) {
      std::snprintf(code, sizeof code, "\\x%02x", c);
      out += code;
    } else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(s[i + 1]) <= 0x9f) {
      std::snprintf(code, sizeof code, "\\u%04x", static_cast<unsigned char>(s[++i]));
      out += code;
    } else {
      out += s[i];
    }
  }
  return out;
}

static std::string position_text(const PositionInfo& p) {
  std::string s = to_string(p.kind);
  if (p.kind == PositionKind::kSinusoidalConcatenated || p.kind == PositionKind::kSinusoidalInterleaved)
    s += std::string(", ") + to_string(p.frequency) + " frequencies, first index " + std::to_string(p.first_index);
  else if (p.kind == PositionKind::kLearned && p.first_index != 0)
    s += ", position p at row p + " + std::to_string(p.first_index);
  return s;
}

// A recorded quantization error as JSON: null when the file records none (NaN) or the
// tensor is exact (+inf dB).
static nlohmann::json error_json(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

static nlohmann::json position_json(const PositionInfo& p) {
  return {{"kind", to_string(p.kind)}, {"frequency", to_string(p.frequency)}, {"first_index", p.first_index}};
}

static nlohmann::json tokenizer_json(const TokenizerInfo& t) {
  auto spm = [](const SentencePieceInfo& s) {
    return nlohmann::json{{"algorithm", s.algorithm},
                          {"pieces", s.pieces},
                          {"normalizer", s.normalizer},
                          {"byte_fallback", s.byte_fallback},
                          {"stored_trie_nodes", s.stored_trie_nodes}};
  };
  nlohmann::json j = {{"kind", t.kind}};
  if (t.kind == "marian") {
    j["source"] = spm(t.source);
    j["target"] = spm(t.target);
    j["separate_target_vocab"] = t.separate_target_vocab;
    j["language_codes"] = t.language_codes;
  }
  if (t.kind == "huggingface") {
    j["merges"] = t.merges;
    j["added_tokens"] = t.added_tokens;
    j["special_tokens"] = t.special_tokens;
    j["pipeline"] = t.pipeline;
  }
  if (t.kind == "fairseq") {
    j["family"] = t.family;
    j["sentencepiece"] = spm(t.source);
    j["language_codes"] = t.language_codes;
    j["default_source_language"] = t.default_source_language;
  }
  return j;
}

static int tool_main(int argc, char** argv) {
  cli::Parser p("petrel-inspect", "MODEL.petrel [--json] [--no-tensors] [--verify]",
                "Verifies a Petrel model file and describes it: architecture, hyper-parameters,\n"
                "special tokens, scales folded at conversion, and the tensor table.");
  p.toggle("json", "print one JSON object on stdout");
  p.toggle("no-tensors", "leave the tensor table out");
  p.toggle("verify", "also compare the data section with its recorded checksum (reads the whole file)");
  try {
    if (!p.parse(argc, argv)) {
      std::cout << p.help();
      return 0;
    }
    if (p.positionals().size() != 1) throw cli::UsageError("expected one model file (see --help)");
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "petrel-inspect: %s\n", e.what());
    return 2;
  }
  auto loaded = Model::load(p.positionals()[0]);
  if (!loaded) {
    std::fprintf(stderr, "petrel-inspect: error: %s\n", loaded.error().message.c_str());
    return 1;
  }
  const ModelInfo& m = loaded.value()->info();
  const bool verify = p.has("verify");
  if (verify) {
    Status verified = loaded.value()->verify_data();
    if (!verified) {
      std::fprintf(stderr, "petrel-inspect: error: %s\n", verified.error().message.c_str());
      return 1;
    }
  }
  char checksum[16] = "";
  if (m.data_crc32) std::snprintf(checksum, sizeof checksum, "0x%08x", *m.data_crc32);
  // The path a Translator (a language model: a Generator) would use here (PETREL_ISA honoured).
  std::string isa;
  if (m.decoder_only) {
    auto generator = Generator::create(loaded.value());
    isa = generator ? generator.value().isa() : "error: " + generator.error().message;
  } else {
    auto translator = Translator::create(loaded.value());
    isa = translator ? translator.value().isa() : "error: " + translator.error().message;
  }
  const bool tensors = !p.has("no-tensors");
  uint64_t tensor_bytes = 0;
  for (const auto& t : m.tensors) tensor_bytes += t.bytes;

  if (p.has("json")) {
    nlohmann::json j = {
        {"file", p.positionals()[0]},
        {"file_bytes", m.file_size},
        {"format_version", std::to_string(m.format_major) + "." + std::to_string(m.format_minor)},
        {"producer", m.producer},
        {"source", m.source},
        {"architecture", m.architecture},
        {"model_type", m.model_type},
        {"num_kv_heads", m.num_kv_heads},
        {"head_dim", m.head_dim},
        {"norm_kind", to_string(m.norm_kind)},
        {"sliding_window_layers", m.sliding_window_layers},
        {"final_logit_softcap", m.final_logit_softcap},
        {"d_model", m.d_model},
        {"num_heads", m.num_heads},
        {"ffn_dim", m.ffn_dim},
        {"vocab_size", m.vocab_size},
        {"target_vocab_size", m.target_vocab_size},
        {"max_positions", m.max_positions},
        {"encoder_layers", m.encoder_layers},
        {"decoder_layers", m.decoder_layers},
        {"norm", to_string(m.norm)},
        {"activation", to_string(m.activation)},
        {"layer_norm_eps", m.layer_norm_eps},
        {"pad_id", m.pad_id},
        {"eos_id", m.eos_id},
        {"decoder_start_id", m.decoder_start_id},
        {"decoder_start", m.decoder_start_zeros ? "zeros" : "token row"},
        {"ssru_layers", m.ssru_layers},
        {"alignment_layer", m.alignment_layer},
        {"static_activation_scales", m.static_activation_scales},
        {"bad_word_ids", m.bad_word_ids},
        {"encoder_positions", position_json(m.encoder_positions)},
        {"decoder_positions", position_json(m.decoder_positions)},
        {"shared_embeddings", m.shared_embeddings},
        {"tied_output", m.tied_output},
        {"final_logits_bias", m.final_logits_bias},
        {"embedding_norm", m.embedding_norm},
        {"vocabulary", m.vocab.size()},
        {"text_tokenizer", m.has_text_tokenizer},
        {"tokenizer", tokenizer_json(m.tokenizer)},
        {"shortlist", m.shortlist.present ? nlohmann::json{{"always", m.shortlist.always},
                                                           {"candidates", m.shortlist.candidates},
                                                           {"first", m.shortlist.first},
                                                           {"best", m.shortlist.best},
                                                           {"source", m.shortlist.source},
                                                           {"by_default", m.shortlist.by_default}}
                                          : nlohmann::json(nullptr)},
        {"generation", {{"from_checkpoint", m.generation.from_checkpoint},
                        {"num_beams", m.generation.num_beams},
                        {"max_length", m.generation.max_length},
                        {"length_penalty", m.generation.length_penalty},
                        {"beam_stop", to_string(m.generation.beam_stop)},
                        {"forced_eos_id", m.generation.forced_eos_id},
                        {"forced_bos_id", m.generation.forced_bos_id},
                        {"max_length_factor", m.generation.max_length_factor}}},
        {"data_crc32", m.data_crc32 ? nlohmann::json(checksum) : nlohmann::json(nullptr)},
        {"data_verified", verify},
        {"parameters", m.parameter_count},
        {"tensor_bytes", tensor_bytes},
        {"folds", nlohmann::json::array()},
        {"isa_paths", runnable_isas()},
        {"isa", isa},
    };
    if (m.decoder_only)
      j["language_model"] = {{"bos_id", m.lm.bos_id},       {"eos_ids", m.lm.eos_ids},
                             {"do_sample", m.lm.do_sample}, {"temperature", m.lm.temperature},
                             {"top_k", m.lm.top_k},         {"top_p", m.lm.top_p},
                             {"min_p", m.lm.min_p},         {"repetition_penalty", m.lm.repetition_penalty},
                             {"max_new_tokens", m.lm.max_new_tokens},
                             {"chat_template", !m.lm.chat_template.empty()},
                             {"bos_token", m.lm.bos_token},
                             {"eos_token", m.lm.eos_token}};
    for (const auto& f : m.folds)
      j["folds"].push_back({{"what", f.what}, {"value", f.value}, {"targets", f.targets}, {"note", f.note}});
    if (tensors) {
      j["tensors"] = nlohmann::json::array();
      for (const auto& t : m.tensors)
        j["tensors"].push_back({{"name", t.name}, {"dtype", to_string(t.dtype)}, {"shape", t.shape},
                                {"offset", t.offset}, {"bytes", t.bytes}, {"max_abs_error", error_json(t.max_abs_error)},
                                {"snr_db", error_json(t.snr_db)}});
    }
    // Paths and text given on the command line may hold any bytes: invalid UTF-8 is
    // written as U+FFFD instead of aborting on nlohmann::json's type_error 316.
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }

  say("%s: Petrel model, format %u.%u, %llu bytes (from %s)\n", p.positionals()[0].c_str(), m.format_major,
              m.format_minor, static_cast<unsigned long long>(m.file_size), m.producer.c_str());
  if (m.decoder_only) {
    say("  architecture      decoder-only (%s), %u layers (%u with a sliding window), tied output: %s\n",
                m.model_type.c_str(), m.decoder_layers, m.sliding_window_layers, m.tied_output ? "yes" : "no");
    say("  attention         %u query heads, %u K/V heads, head_dim %u; rotary positions%s\n", m.num_heads,
                m.num_kv_heads, m.head_dim,
                m.final_logit_softcap > 0 ? (", logits soft-capped at " + std::to_string(m.final_logit_softcap)).c_str() : "");
    std::string eos;
    for (int32_t id : m.lm.eos_ids) eos += " " + std::to_string(id);
    say("  generation        bos %d, stops at:%s; %s (temperature %g, top-k %u, top-p %g, min-p %g, "
                "repetition penalty %g)\n",
                m.lm.bos_id, eos.c_str(), m.lm.do_sample ? "samples" : "greedy", m.lm.temperature, m.lm.top_k,
                m.lm.top_p, m.lm.min_p, m.lm.repetition_penalty);
  } else {
    say("  architecture      %s, %u encoder + %u decoder layers%s\n", m.architecture.c_str(), m.encoder_layers,
                m.decoder_layers,
                m.ssru_layers ? (" (" + std::to_string(m.ssru_layers) + " of them SSRU)").c_str() : "");
  }
  const std::string vocab = m.target_vocab_size == m.vocab_size
                                ? std::to_string(m.vocab_size)
                                : std::to_string(m.vocab_size) + " source / " + std::to_string(m.target_vocab_size) + " target";
  say("  d_model %u, heads %u, ffn %u, vocab %s, max positions %u\n", m.d_model, m.num_heads, m.ffn_dim,
              vocab.c_str(), m.max_positions);
  say("  norm              %s-norm %s (eps %g), activation %s\n", to_string(m.norm), to_string(m.norm_kind),
              m.layer_norm_eps, to_string(m.activation));
  say("  positions         encoder: %s\n                    decoder: %s\n",
              position_text(m.encoder_positions).c_str(), position_text(m.decoder_positions).c_str());
  say("  embeddings        %s%s, output projection %s%s\n",
              m.shared_embeddings ? "shared by encoder and decoder" : "separate",
              m.embedding_norm ? ", LayerNorm on embedding + position" : "",
              m.tied_output ? "tied to the decoder table" : "separate",
              m.final_logits_bias ? ", final logits bias" : "");
  std::string bad;
  for (int32_t id : m.bad_word_ids) bad += " " + std::to_string(id);
  say("  tokens            pad %d, eos %d, decoder start %s, never generated:%s\n", m.pad_id, m.eos_id,
              m.decoder_start_zeros ? "an all-zero embedding" : std::to_string(m.decoder_start_id).c_str(),
              bad.empty() ? " none" : bad.c_str());
  if (m.static_activation_scales)
    say("  int8 activations  static scales in the file (petrel-run --activation-scales file)\n");
  if (m.alignment_layer >= 0)
    say("  alignments        decoder layer %d (0-based), trained to align (petrel-run --alignment)\n", m.alignment_layer);
  auto spm_text = [](const SentencePieceInfo& s) {
    return s.algorithm + ", " + std::to_string(s.pieces) + " pieces, normalizer " +
           (s.normalizer.empty() ? std::string("?") : s.normalizer) + (s.byte_fallback ? ", byte fallback" : "") +
           (s.stored_trie_nodes != 0 ? ", piece trie stored (" + std::to_string(s.stored_trie_nodes) + " nodes)"
                                     : ", piece trie built at load");
  };
  if (m.tokenizer.kind == "marian") {
    say("  tokenizer         Marian (SentencePiece): source %s; target %s%s\n", spm_text(m.tokenizer.source).c_str(),
                spm_text(m.tokenizer.target).c_str(),
                m.tokenizer.separate_target_vocab ? "; separate target vocabulary" : "");
  }
  if (m.tokenizer.kind == "marian-words")
    say("  tokenizer         Marian C++ word vocabulary (words split at spaces)%s\n",
                m.tokenizer.separate_target_vocab ? "; separate target vocabulary" : "");
  if (m.tokenizer.kind == "huggingface") {
    std::string specials;
    for (size_t i = 0; i < m.tokenizer.special_tokens.size() && i < 12; ++i)
      specials += (i ? " " : "") + m.tokenizer.special_tokens[i];
    if (m.tokenizer.special_tokens.size() > 12)
      specials += " ... (" + std::to_string(m.tokenizer.special_tokens.size()) + ")";
    say("  tokenizer         tokenizer.json: %u tokens, %u merges, %u added tokens; %s\n", m.vocab_size,
                m.tokenizer.merges, m.tokenizer.added_tokens, m.tokenizer.pipeline.c_str());
    say("  special tokens    %s\n", specials.c_str());
    if (m.decoder_only)
      say("  chat template     %s\n", m.lm.chat_template.empty()
                                                  ? "none"
                                                  : (std::to_string(m.lm.chat_template.size()) + " bytes (bos_token " +
                                                     m.lm.bos_token + ", eos_token " + m.lm.eos_token + ")").c_str());
  }
  if (m.tokenizer.kind == "sentencepiece")
    say("  tokenizer         Marian C++ (SentencePiece ids are the model's): source %s; target %s\n",
                spm_text(m.tokenizer.source).c_str(), spm_text(m.tokenizer.target).c_str());
  if (m.tokenizer.kind == "fairseq")
    say("  tokenizer         %s (SentencePiece %s), source language by default: %s\n", m.tokenizer.family.c_str(),
                spm_text(m.tokenizer.source).c_str(),
                m.tokenizer.default_source_language.empty() ? "none (give one)"
                                                            : m.tokenizer.default_source_language.c_str());
  if (m.tokenizer.kind == "marian" || m.tokenizer.kind == "fairseq") {
    std::string codes;
    for (size_t i = 0; i < m.tokenizer.language_codes.size() && i < 12; ++i)
      codes += (i ? " " : "") + m.tokenizer.language_codes[i];
    if (m.tokenizer.language_codes.size() > 12)
      codes += " ... (" + std::to_string(m.tokenizer.language_codes.size()) + ")";
    say("  language codes    %s\n", codes.empty() ? "none" : codes.c_str());
  }
  say("  vocabulary        %s\n", m.tokenizer.kind == "sentencepiece"
                                            ? (std::to_string(m.vocab_size) + " SentencePiece pieces, text tokenizer").c_str()
                                        : m.vocab.empty() ? "none (token ids only)"
                                        : (std::to_string(m.vocab.size()) + " tokens" +
                                           (m.has_text_tokenizer ? ", text tokenizer" : ", ids only")).c_str());
  if (m.shortlist.present)
    say("  shortlist         %llu tokens always + up to %u per source token (%llu in all), from %s%s\n",
                static_cast<unsigned long long>(m.shortlist.always), m.shortlist.best,
                static_cast<unsigned long long>(m.shortlist.candidates), m.shortlist.source.c_str(),
                m.shortlist.by_default ? "; used by default" : "");
  else
    say("  shortlist         none\n");
  const GenerationDefaults& g = m.generation;
  const std::string max_length = g.max_length_factor > 0 ? std::to_string(g.max_length_factor).substr(0, 4) + " x source"
                                 : g.max_length      ? std::to_string(g.max_length)
                                                     : "none";
  say("  decoding          beam %u, %s stop, length penalty %g, max length %s, forced EOS %s, "
              "forced first token (target language) %s%s\n",
              g.num_beams, to_string(g.beam_stop), g.length_penalty, max_length.c_str(),
              g.forced_eos_id >= 0 ? std::to_string(g.forced_eos_id).c_str() : "none",
              g.forced_bos_id >= 0 ? std::to_string(g.forced_bos_id).c_str() : "none",
              g.from_checkpoint ? " (the checkpoint's generation config)" : " (defaults: the file records none)");
  say("  folded scales:\n");
  for (const auto& f : m.folds) {
    say("    %-16s %-12.6g %s\n", f.what.c_str(), f.value, f.note.c_str());
    std::string targets;
    for (size_t i = 0; i < f.targets.size() && i < 4; ++i) targets += (i ? ", " : "") + f.targets[i];
    if (f.targets.size() > 4) targets += ", ... (" + std::to_string(f.targets.size()) + " tensors)";
    say("    %-16s into: %s\n", "", targets.c_str());
  }
  if (tensors) {
    // Quantization error as the converter measured it (files before 1.2 record none).
    say("  tensors:\n    %-44s %-5s %-14s %12s %10s %8s\n", "name", "dtype", "shape", "bytes", "max|err|",
                "SNR dB");
    for (const auto& t : m.tensors) {
      std::string shape;
      for (size_t i = 0; i < t.shape.size(); ++i) shape += (i ? "x" : "") + std::to_string(t.shape[i]);
      char err[16] = "", snr[16] = "";
      if (std::isfinite(t.max_abs_error)) std::snprintf(err, sizeof err, "%.3g", t.max_abs_error);
      if (std::isinf(t.snr_db)) std::snprintf(snr, sizeof snr, "exact");
      else if (std::isfinite(t.snr_db)) std::snprintf(snr, sizeof snr, "%.1f", t.snr_db);
      say("    %-44s %-5s %-14s %12llu %10s %8s\n", t.name.c_str(), to_string(t.dtype), shape.c_str(),
                  static_cast<unsigned long long>(t.bytes), err, snr);
    }
  }
  if (m.data_crc32)
    say("  data checksum     CRC-32 %s%s\n", checksum, verify ? " (verified)" : " (--verify checks it)");
  else
    say("  data checksum     none recorded\n");
  std::string paths;
  for (const auto& isa : runnable_isas()) paths += (paths.empty() ? "" : ", ") + isa;
  say("  kernel paths      %s (in use: %s)\n", paths.c_str(), isa.c_str());
  say("  total             %zu tensors, %llu parameters, %llu tensor bytes\n", m.tensors.size(),
              static_cast<unsigned long long>(m.parameter_count), static_cast<unsigned long long>(tensor_bytes));
  std::fputs(without_controls(text).c_str(), stdout);
  return 0;
}

int main(int argc, char** argv) { return petrel::cli::run_tool("petrel-inspect", tool_main, argc, argv); }
