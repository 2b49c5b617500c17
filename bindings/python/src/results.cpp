// The engine's results as Python records (petrel.Record: dicts whose keys are also
// attributes). Byte ranges of a text become str offsets of that text.
#include <cmath>
#include <string>

#include "common.h"

namespace petrel::python {
namespace {

py::list floats(const std::vector<float>& values) {
  return list_of(values, [](float v) { return py::float_(v); });
}

py::list matrix(const std::vector<std::vector<float>>& rows) { return list_of(rows, floats); }

py::list ids_list(const std::vector<int32_t>& ids) {
  return list_of(ids, [](int32_t id) { return py::int_(id); });
}

py::list strings(const std::vector<std::string>& values) { return list_of(values, to_str); }

py::list token_scores(const std::vector<TokenScore>& scores) {
  return list_of(scores, [](const TokenScore& score) {
    py::dict s = make_record();
    s["log_probability"] = score.log_probability;
    s["logit"] = score.logit;
    return s;
  });
}

py::tuple range(const TextRange& r, const CharOffsets* offsets) {
  if (offsets == nullptr) return py::make_tuple(r.begin, r.end);
  return py::make_tuple((*offsets)(r.begin), (*offsets)(r.end));
}

py::list ranges(const std::vector<TextRange>& values, const CharOffsets* offsets) {
  return list_of(values, [offsets](const TextRange& r) { return range(r, offsets); });
}

py::dict hypothesis_record(const Hypothesis& h) {
  py::dict r = make_record();
  r["ids"] = ids_list(h.ids);
  r["score"] = h.score;
  r["ended_on_eos"] = h.ended_on_eos;
  r["alignment"] = matrix(h.alignment);
  r["token_scores"] = token_scores(h.token_scores);
  return r;
}

py::dict positions_record(const PositionInfo& p) {
  py::dict r = make_record();
  r["kind"] = to_string(p.kind);
  r["frequency"] = to_string(p.frequency);
  r["first_index"] = p.first_index;
  return r;
}

py::dict spm_record(const SentencePieceInfo& s) {
  py::dict r = make_record();
  r["algorithm"] = s.algorithm;
  r["pieces"] = s.pieces;
  r["normalizer"] = s.normalizer;
  r["byte_fallback"] = s.byte_fallback;
  r["stored_trie_nodes"] = s.stored_trie_nodes;
  return r;
}

py::object optional_double(double value) { return std::isnan(value) ? py::object(py::none()) : py::float_(value); }

}  // namespace

py::dict make_record() {
  // The class is looked up once and kept for the life of the process (never released:
  // releasing it at exit would need the interpreter that is going away).
  static py::object* record_class = new py::object(py::module_::import("petrel._record").attr("Record"));
  return py::dict((*record_class)());
}

CharOffsets::CharOffsets(std::string_view text) : index_(text.size() + 1) {
  size_t chars = 0;  // characters starting before byte i
  for (size_t i = 0; i < text.size(); ++i) {
    const bool starts_character = (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
    index_[i] = starts_character || chars == 0 ? chars : chars - 1;  // inside one: that character
    if (starts_character) ++chars;
  }
  index_[text.size()] = chars;
}

size_t CharOffsets::operator()(size_t byte) const { return index_[std::min(byte, index_.size() - 1)]; }

py::dict info_record(const ModelInfo& m) {
  py::dict r = make_record();
  r["format"] = std::to_string(m.format_major) + "." + std::to_string(m.format_minor);
  r["format_major"] = m.format_major;
  r["format_minor"] = m.format_minor;
  r["producer"] = m.producer;
  r["source"] = m.source;
  r["architecture"] = m.architecture;
  r["model_type"] = m.model_type;
  r["decoder_only"] = m.decoder_only;
  r["d_model"] = m.d_model;
  r["num_heads"] = m.num_heads;
  r["num_kv_heads"] = m.num_kv_heads;
  r["head_dim"] = m.head_dim;
  r["ffn_dim"] = m.ffn_dim;
  r["max_positions"] = m.max_positions;
  r["norm_kind"] = to_string(m.norm_kind);
  r["sliding_window_layers"] = m.sliding_window_layers;
  r["final_logit_softcap"] = m.final_logit_softcap;
  r["vocab_size"] = m.vocab_size;
  r["target_vocab_size"] = m.target_vocab_size;
  r["encoder_layers"] = m.encoder_layers;
  r["decoder_layers"] = m.decoder_layers;
  r["norm"] = to_string(m.norm);
  r["activation"] = to_string(m.activation);
  r["layer_norm_eps"] = m.layer_norm_eps;
  r["pad_id"] = m.pad_id;
  r["eos_id"] = m.eos_id;
  r["decoder_start_id"] = m.decoder_start_id;
  r["bad_word_ids"] = ids_list(m.bad_word_ids);
  r["encoder_positions"] = positions_record(m.encoder_positions);
  r["decoder_positions"] = positions_record(m.decoder_positions);
  r["shared_embeddings"] = m.shared_embeddings;
  r["tied_output"] = m.tied_output;
  r["final_logits_bias"] = m.final_logits_bias;
  r["embedding_norm"] = m.embedding_norm;
  r["ssru_layers"] = m.ssru_layers;
  r["decoder_start_zeros"] = m.decoder_start_zeros;
  r["static_activation_scales"] = m.static_activation_scales;
  r["alignment_layer"] = m.alignment_layer;
  r["has_text_tokenizer"] = m.has_text_tokenizer;

  py::dict lm = make_record();
  lm["bos_id"] = m.lm.bos_id;
  lm["eos_ids"] = ids_list(m.lm.eos_ids);
  lm["do_sample"] = m.lm.do_sample;
  lm["temperature"] = m.lm.temperature;
  lm["top_k"] = m.lm.top_k;
  lm["top_p"] = m.lm.top_p;
  lm["min_p"] = m.lm.min_p;
  lm["repetition_penalty"] = m.lm.repetition_penalty;
  lm["max_new_tokens"] = m.lm.max_new_tokens;
  lm["chat_template"] = to_str(m.lm.chat_template);
  lm["bos_token"] = to_str(m.lm.bos_token);
  lm["eos_token"] = to_str(m.lm.eos_token);
  r["lm"] = lm;

  py::dict t = make_record();
  t["kind"] = m.tokenizer.kind;
  t["source"] = spm_record(m.tokenizer.source);
  t["target"] = spm_record(m.tokenizer.target);
  t["separate_target_vocab"] = m.tokenizer.separate_target_vocab;
  t["language_codes"] = strings(m.tokenizer.language_codes);
  t["family"] = m.tokenizer.family;
  t["default_source_language"] = m.tokenizer.default_source_language;
  t["merges"] = m.tokenizer.merges;
  t["added_tokens"] = m.tokenizer.added_tokens;
  t["special_tokens"] = strings(m.tokenizer.special_tokens);
  t["pipeline"] = to_str(m.tokenizer.pipeline);
  r["tokenizer"] = t;

  r["tensors"] = list_of(m.tensors, [](const TensorInfo& x) {
    py::dict d = make_record();
    d["name"] = to_str(x.name);
    d["dtype"] = to_string(x.dtype);
    d["shape"] = list_of(x.shape, [](uint64_t size) { return py::int_(size); });
    d["packed"] = x.packed;
    d["offset"] = x.offset;
    d["bytes"] = x.bytes;
    d["max_abs_error"] = optional_double(x.max_abs_error);
    d["snr_db"] = optional_double(x.snr_db);
    d["activation_scale"] = x.activation_scale;
    return d;
  });

  r["folds"] = list_of(m.folds, [](const FoldInfo& fold) {
    py::dict d = make_record();
    d["what"] = fold.what;
    d["value"] = fold.value;
    d["targets"] = strings(fold.targets);
    d["note"] = fold.note;
    return d;
  });

  py::dict s = make_record();
  s["present"] = m.shortlist.present;
  s["first"] = m.shortlist.first;
  s["best"] = m.shortlist.best;
  s["always"] = m.shortlist.always;
  s["candidates"] = m.shortlist.candidates;
  s["source"] = m.shortlist.source;
  s["by_default"] = m.shortlist.by_default;
  r["shortlist"] = s;

  py::dict g = make_record();
  g["from_checkpoint"] = m.generation.from_checkpoint;
  g["num_beams"] = m.generation.num_beams;
  g["max_length"] = m.generation.max_length;
  g["length_penalty"] = m.generation.length_penalty;
  g["beam_stop"] = to_string(m.generation.beam_stop);
  g["forced_eos_id"] = m.generation.forced_eos_id;
  g["forced_bos_id"] = m.generation.forced_bos_id;
  g["max_length_factor"] = m.generation.max_length_factor;
  r["generation"] = g;

  r["file_size"] = m.file_size;
  r["parameter_count"] = m.parameter_count;
  r["data_crc32"] = value_or_none(m.data_crc32);
  return r;
}

py::dict tokenized_record(const TokenizedText& tokens, const CharOffsets* offsets) {
  py::dict r = make_record();
  r["pieces"] = strings(tokens.pieces);
  r["ids"] = ids_list(tokens.ids);
  r["ranges"] = ranges(tokens.ranges, offsets);
  return r;
}

py::dict text_translation_record(const TextTranslation& t, const std::string& source) {
  // Ranges of the input point into the text the sentences were read from: the source
  // markup as written back with html, else the input.
  const std::string& read = t.source_html.empty() ? source : t.source_html;
  const CharOffsets source_offsets(read);
  py::dict r = make_record();
  r["input"] = tokenized_record(t.input, &source_offsets);
  r["hypotheses"] = list_of(t.hypotheses, [](const TextHypothesis& h) {
    py::dict d = make_record();
    d["text"] = to_str(h.text);
    d["score"] = h.score;
    d["ids"] = ids_list(h.ids);
    d["pieces"] = strings(h.pieces);
    d["ended_on_eos"] = h.ended_on_eos;
    d["alignment"] = matrix(h.alignment);
    d["token_scores"] = token_scores(h.token_scores);
    return d;
  });
  r["text"] = t.hypotheses.empty() ? py::str("") : to_str(t.hypotheses[0].text);
  const CharOffsets target_offsets(t.hypotheses.empty() ? std::string_view() : std::string_view(t.hypotheses[0].text));
  r["sentences"] = list_of(t.sentences, [&](const SentenceTranslation& s) {
    py::dict d = make_record();
    d["source"] = range(s.source, &source_offsets);
    d["target"] = range(s.target, &target_offsets);
    d["source_tokens"] = ranges(s.source_tokens, &source_offsets);
    d["target_tokens"] = ranges(s.target_tokens, &target_offsets);
    d["alignment"] = matrix(s.alignment);
    d["token_scores"] = token_scores(s.token_scores);
    if (s.quality) {
      py::dict q = make_record();
      q["score"] = s.quality->score;
      q["words"] = ranges(s.quality->words, &target_offsets);
      q["word_tokens"] = list_of(s.quality->word_tokens,
                                 [](const TextRange& tokens) { return py::make_tuple(tokens.begin, tokens.end); });
      q["word_scores"] = floats(s.quality->word_scores);
      d["quality"] = q;
    } else {
      d["quality"] = py::none();
    }
    return d;
  });
  r["source_html"] = to_str(t.source_html);
  return r;
}

py::dict translation_record(const Translation& t) {
  py::dict r = make_record();
  r["hypotheses"] = list_of(t.hypotheses, hypothesis_record);
  return r;
}

py::dict generation_record(const Generation& g) {
  py::dict r = make_record();
  r["ids"] = ids_list(g.ids);
  r["ended_on_eos"] = g.ended_on_eos;
  r["reused_tokens"] = g.reused_tokens;
  return r;
}

py::dict text_generation_record(const TextGeneration& g) {
  py::dict r = make_record();
  r["text"] = to_str(g.text);
  r["ids"] = ids_list(g.ids);
  r["ended_on_eos"] = g.ended_on_eos;
  r["ended_on_stop"] = g.ended_on_stop;
  r["prompt_tokens"] = g.prompt_tokens;
  r["reused_tokens"] = g.reused_tokens;
  return r;
}

py::dict token_event_record(const TokenEvent& e) {
  py::dict r = make_record();
  r["input"] = e.input;
  py::list ids(e.length);
  for (size_t i = 0; i < e.length; ++i) ids[i] = py::int_(e.ids[i]);
  r["ids"] = ids;
  r["piece"] = to_str(e.piece);
  r["provisional"] = e.provisional;
  r["final"] = e.final;
  if (e.text.data() != nullptr) {
    r["text"] = to_str(e.text);
    r["text_delta"] = to_str(e.text_delta);
    r["text_restarted"] = e.text_restarted;
  } else {
    r["text"] = py::none();
    r["text_delta"] = py::none();
    r["text_restarted"] = false;
  }
  return r;
}

py::dict translate_timings_record(const TranslateTimings& t) {
  py::dict r = make_record();
  r["encode_ms"] = t.encode_ms;
  r["decode_ms"] = t.decode_ms;
  r["decode_steps"] = t.decode_steps;
  r["generated_tokens"] = t.generated_tokens;
  r["verifications"] = t.verifications;
  r["drafted_tokens"] = t.drafted_tokens;
  r["accepted_tokens"] = t.accepted_tokens;
  r["draft_model_tokens"] = t.draft_model_tokens;
  return r;
}

py::dict batch_totals_record(const BatchTotals& t) {
  py::dict r = make_record();
  r["inputs"] = t.inputs;
  r["sentences"] = t.sentences;
  r["source_tokens"] = t.source_tokens;
  r["generated_tokens"] = t.generated_tokens;
  r["seconds"] = t.seconds;
  r["verifications"] = t.verifications;
  r["drafted_tokens"] = t.drafted_tokens;
  r["accepted_tokens"] = t.accepted_tokens;
  return r;
}

py::dict generate_timings_record(const GenerateTimings& t) {
  py::dict r = make_record();
  r["prefill_ms"] = t.prefill_ms;
  r["generate_ms"] = t.generate_ms;
  r["prompt_tokens"] = t.prompt_tokens;
  r["generated_tokens"] = t.generated_tokens;
  r["reused_tokens"] = t.reused_tokens;
  r["verifications"] = t.verifications;
  r["drafted_tokens"] = t.drafted_tokens;
  r["accepted_tokens"] = t.accepted_tokens;
  r["draft_model_tokens"] = t.draft_model_tokens;
  return r;
}

}  // namespace petrel::python
