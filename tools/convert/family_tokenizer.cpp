#include "convert/family_tokenizer.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include "convert/config_reader.h"
#include "core/string_hash.h"
#include "core/utf8.h"
#include "text/spm_trie.h"

namespace petrel::convert {
namespace {

using json = nlohmann::json;

constexpr const char* kBos = "<s>";
constexpr const char* kPad = "<pad>";
constexpr const char* kEos = "</s>";
constexpr const char* kUnk = "<unk>";
constexpr const char* kMask = "<mask>";
constexpr int32_t kFairseqOffset = 1;  // fairseq's dictionary puts 4 specials before SentencePiece's ids 3..

// The language lists transformers builds in, in order (the order gives the ids); the
// same lists as tools/reference/family_tokenizers.py.
constexpr const char* kNllbLanguages =
    "ace_Arab ace_Latn acm_Arab acq_Arab aeb_Arab afr_Latn ajp_Arab aka_Latn amh_Ethi apc_Arab arb_Arab ars_Arab "
    "ary_Arab arz_Arab asm_Beng ast_Latn awa_Deva ayr_Latn azb_Arab azj_Latn bak_Cyrl bam_Latn ban_Latn bel_Cyrl "
    "bem_Latn ben_Beng bho_Deva bjn_Arab bjn_Latn bod_Tibt bos_Latn bug_Latn bul_Cyrl cat_Latn ceb_Latn ces_Latn "
    "cjk_Latn ckb_Arab crh_Latn cym_Latn dan_Latn deu_Latn dik_Latn dyu_Latn dzo_Tibt ell_Grek eng_Latn epo_Latn "
    "est_Latn eus_Latn ewe_Latn fao_Latn pes_Arab fij_Latn fin_Latn fon_Latn fra_Latn fur_Latn fuv_Latn gla_Latn "
    "gle_Latn glg_Latn grn_Latn guj_Gujr hat_Latn hau_Latn heb_Hebr hin_Deva hne_Deva hrv_Latn hun_Latn hye_Armn "
    "ibo_Latn ilo_Latn ind_Latn isl_Latn ita_Latn jav_Latn jpn_Jpan kab_Latn kac_Latn kam_Latn kan_Knda kas_Arab "
    "kas_Deva kat_Geor knc_Arab knc_Latn kaz_Cyrl kbp_Latn kea_Latn khm_Khmr kik_Latn kin_Latn kir_Cyrl kmb_Latn "
    "kon_Latn kor_Hang kmr_Latn lao_Laoo lvs_Latn lij_Latn lim_Latn lin_Latn lit_Latn lmo_Latn ltg_Latn ltz_Latn "
    "lua_Latn lug_Latn luo_Latn lus_Latn mag_Deva mai_Deva mal_Mlym mar_Deva min_Latn mkd_Cyrl plt_Latn mlt_Latn "
    "mni_Beng khk_Cyrl mos_Latn mri_Latn zsm_Latn mya_Mymr nld_Latn nno_Latn nob_Latn npi_Deva nso_Latn nus_Latn "
    "nya_Latn oci_Latn gaz_Latn ory_Orya pag_Latn pan_Guru pap_Latn pol_Latn por_Latn prs_Arab pbt_Arab quy_Latn "
    "ron_Latn run_Latn rus_Cyrl sag_Latn san_Deva sat_Beng scn_Latn shn_Mymr sin_Sinh slk_Latn slv_Latn smo_Latn "
    "sna_Latn snd_Arab som_Latn sot_Latn spa_Latn als_Latn srd_Latn srp_Cyrl ssw_Latn sun_Latn swe_Latn swh_Latn "
    "szl_Latn tam_Taml tat_Cyrl tel_Telu tgk_Cyrl tgl_Latn tha_Thai tir_Ethi taq_Latn taq_Tfng tpi_Latn tsn_Latn "
    "tso_Latn tuk_Latn tum_Latn tur_Latn twi_Latn tzm_Tfng uig_Arab ukr_Cyrl umb_Latn urd_Arab uzn_Latn vec_Latn "
    "vie_Latn war_Latn wol_Latn xho_Latn ydd_Hebr yor_Latn yue_Hant zho_Hans zho_Hant zul_Latn";
constexpr const char* kMbart50Languages =
    "ar_AR cs_CZ de_DE en_XX es_XX et_EE fi_FI fr_XX gu_IN hi_IN it_IT ja_XX kk_KZ ko_KR lt_LT lv_LV my_MM ne_NP "
    "nl_XX ro_RO ru_RU si_LK tr_TR vi_VN zh_CN af_ZA az_AZ bn_IN fa_IR he_IL hr_HR id_ID ka_GE km_KH mk_MK ml_IN "
    "mn_MN mr_IN pl_PL ps_AF pt_XX sv_SE sw_KE ta_IN te_IN th_TH tl_XX uk_UA ur_PK xh_ZA gl_ES sl_SI";
constexpr const char* kM2m100Languages =
    "af am ar ast az ba be bg bn br bs ca ceb cs cy da de el en es et fa ff fi fr fy ga gd gl gu ha he hi hr ht "
    "hu hy id ig ilo is it ja jv ka kk km kn ko lb lg ln lo lt lv mg mk ml mn mr ms my ne nl no ns oc or pa pl ps "
    "pt ro ru sd si sk sl so sq sr ss su sv sw ta th tl tn tr uk ur uz vi wo xh yi yo zh zu";
constexpr const char* kWmt21Languages = "en ha is ja cs ru zh de";

std::vector<std::string> words(const char* list) {
  std::istringstream in(list);
  return {std::istream_iterator<std::string>(in), std::istream_iterator<std::string>()};
}

std::string family_of(const std::string& tokenizer_class) {
  if (tokenizer_class == "NllbTokenizer" || tokenizer_class == "NllbTokenizerFast") return "nllb";
  if (tokenizer_class == "M2M100Tokenizer") return "m2m100";
  if (tokenizer_class == "MBart50Tokenizer" || tokenizer_class == "MBart50TokenizerFast") return "mbart50";
  return "";
}

}  // namespace

std::optional<FamilyTokenizer> read_family_tokenizer(const std::string& dir, const std::string& model_type,
                                                     const std::string& tokenizer_class, uint32_t vocab_size,
                                                     std::vector<std::string>* notes) {
  FamilyTokenizerFiles files;
  files.dir = dir;
  auto text_if_exists = [&](const std::string& name) -> std::optional<std::string> {
    const std::string path = dir + "/" + name;
    return file_exists(path) ? std::optional<std::string>(read_text(path, "")) : std::nullopt;
  };
  files.tokenizer_config = text_if_exists("tokenizer_config.json");
  files.vocab = text_if_exists("vocab.json");
  files.sentencepiece = text_if_exists("sentencepiece.bpe.model");
  return family_tokenizer_from(files, model_type, tokenizer_class, vocab_size, notes);
}

std::optional<FamilyTokenizer> family_tokenizer_from(const FamilyTokenizerFiles& files, const std::string& model_type,
                                                     const std::string& tokenizer_class, uint32_t vocab_size,
                                                     std::vector<std::string>* notes) {
  auto note = [&](const std::string& s) {
    if (notes != nullptr) notes->push_back(s);
  };
  const std::string config_path = files.dir + "/tokenizer_config.json";
  const std::string spm_path = files.dir + "/sentencepiece.bpe.model";
  const std::string vocab_path = files.dir + "/vocab.json";
  const ConfigReader tc(config_path, files.tokenizer_config.value_or("{}"));

  std::string class_name = tokenizer_class.empty() ? tc.text("tokenizer_class", "") : tokenizer_class;
  if (class_name.empty() && model_type == "m2m_100" && files.vocab) class_name = "M2M100Tokenizer";
  FamilyTokenizer t;
  t.family = family_of(class_name);
  if (t.family.empty()) {
    note("text tokenizer: none (tokenizer_class '" + class_name +
         "' is not NllbTokenizer, M2M100Tokenizer or MBart50Tokenizer); use token ids");
    return std::nullopt;
  }
  const std::string wanted_type = t.family == "mbart50" ? "mbart" : "m2m_100";
  if (model_type != wanted_type)
    throw ConvertError(config_path + ": tokenizer_class " + class_name + " belongs to model_type " + wanted_type +
                       ", not '" + model_type + "'");
  const bool m2m100 = t.family == "m2m100";
  if (!files.sentencepiece || (m2m100 && !files.vocab)) {
    note("text tokenizer: none (no sentencepiece.bpe.model" + std::string(m2m100 ? " or vocab.json" : "") +
         "); use token ids");
    return std::nullopt;
  }
  t.spm = parse_spm_model(*files.sentencepiece, spm_path);
  const auto sp_size = static_cast<uint32_t>(t.spm.pieces.size());
  const std::string size_key = "config.json's vocab_size " + std::to_string(vocab_size);

  // The language tokens in order, and where the first one goes.
  std::vector<std::string> codes;
  uint32_t first_language = 0;
  std::vector<std::string> vocab_json;  // M2M100: id -> piece
  if (m2m100) {
    const std::string& text = *files.vocab;
    const json j = parse_json(vocab_path, text);
    vocab_json = parse_vocab(vocab_path, text, static_cast<uint32_t>(j.size()), "its size");
    const std::string set = tc.text("language_codes", "m2m100");
    if (set != "m2m100" && set != "wmt21")
      throw ConvertError(config_path + ": language_codes '" + set + "' is not m2m100 or wmt21");
    for (const std::string& c : words(set == "m2m100" ? kM2m100Languages : kWmt21Languages))
      codes.push_back("__" + c + "__");
    first_language = static_cast<uint32_t>(vocab_json.size());
  } else {
    if (t.family == "nllb" && tc.raw().contains("additional_special_tokens") &&
        !tc.raw()["additional_special_tokens"].is_null()) {
      for (std::string& c : tc.token_list("additional_special_tokens"))
        if (c != kBos && c != kPad && c != kEos && c != kUnk && c != kMask) codes.push_back(std::move(c));
    } else {
      codes = words(t.family == "nllb" ? kNllbLanguages : kMbart50Languages);
    }
    first_language = sp_size + kFairseqOffset;
  }

  // Every special token's id by the formulas, then as tokenizer_config.json states them.
  std::map<std::string, int64_t> ids;
  if (m2m100) {
    for (const char* s : {kBos, kPad, kEos, kUnk}) {
      auto it = std::find(vocab_json.begin(), vocab_json.end(), s);
      if (it == vocab_json.end()) throw ConvertError(vocab_path + ": no '" + s + "'");
      ids[s] = it - vocab_json.begin();
    }
  } else {
    ids = {{kBos, 0}, {kPad, 1}, {kEos, 2}, {kUnk, 3}, {kMask, int64_t{first_language} + int64_t(codes.size())}};
  }
  for (size_t k = 0; k < codes.size(); ++k)
    if (!ids.emplace(codes[k], int64_t{first_language} + int64_t(k)).second)
      throw ConvertError(config_path + ": language '" + codes[k] + "' is listed twice");
  const std::map<std::string, int64_t> formula = ids;
  bool from_map = false;
  if (tc.raw().contains("added_tokens_decoder") && !tc.raw()["added_tokens_decoder"].is_null()) {
    const json& map = tc.raw()["added_tokens_decoder"];
    std::set<std::string> mapped;
    if (!map.is_object()) throw ConvertError(config_path + ": added_tokens_decoder must map ids to tokens");
    for (auto it = map.begin(); it != map.end(); ++it) {
      const std::string where = config_path + ": added_tokens_decoder[\"" + it.key() + "\"]";
      // A pointer, not `cond ? value : json()`: that would copy the value (recursively).
      const json* content = it.value().is_object() && it.value().contains("content") ? &it.value()["content"] : nullptr;
      if (content == nullptr || !content->is_string()) throw ConvertError(where + ": no \"content\" string");
      const std::string& key = it.key();
      const bool digits = std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (key.empty() || key.size() > 9 || !digits)
        throw ConvertError(where + ": the id is not a decimal number");
      const int64_t id = std::stoll(key);
      if (id >= vocab_size) throw ConvertError(where + ": id " + key + " is outside " + size_key);
      auto entry = ids.find(content->get<std::string>());
      if (entry == ids.end()) continue;  // a token these rules do not treat as special
      if (!mapped.insert(entry->first).second)
        throw ConvertError(where + ": '" + entry->first + "' is named by two ids");
      entry->second = id;
      from_map = true;
    }
  }

  // The ids must fit the model and leave the pieces' ids alone.
  const int64_t first_piece_id = m2m100 ? 0 : 4, last_piece_id = m2m100 ? int64_t(vocab_json.size()) - 1 : sp_size;
  std::map<int64_t, std::string> token_of;
  for (const auto& [token, id] : ids) {
    const bool fixed = token == kBos || token == kPad || token == kEos || token == kUnk;
    const std::string source = from_map ? config_path + " (added_tokens_decoder)" : config_path;
    if (id < 0 || id >= vocab_size)
      throw ConvertError(source + ": '" + token + "' gets id " + std::to_string(id) + ", outside " + size_key);
    if (fixed && id != formula.at(token))
      throw ConvertError(source + ": '" + token + "' has id " + std::to_string(id) + ", not " +
                         std::to_string(formula.at(token)) +
                         (m2m100 ? " as in vocab.json" : " as in fairseq's dictionary"));
    if (!fixed && id >= first_piece_id && id <= last_piece_id)
      throw ConvertError(source + ": '" + token + "' has id " + std::to_string(id) +
                         ", which is a piece's id (" + std::to_string(first_piece_id) + ".." +
                         std::to_string(last_piece_id) + ")");
    auto [it, added] = token_of.emplace(id, token);
    if (!added)
      throw ConvertError(source + ": '" + it->second + "' and '" + token + "' share id " + std::to_string(id));
  }

  // id -> token text, and SentencePiece id -> model id.
  t.vocab.assign(vocab_size, "");
  if (m2m100) {
    if (vocab_json.size() > vocab_size)
      throw ConvertError(vocab_path + ": " + std::to_string(vocab_json.size()) + " tokens, more than " + size_key);
    std::copy(vocab_json.begin(), vocab_json.end(), t.vocab.begin());
    std::map<std::string_view, int32_t> id_of;
    for (size_t i = 0; i < vocab_json.size(); ++i) id_of.emplace(vocab_json[i], static_cast<int32_t>(i));
    for (std::string_view p : t.spm.pieces) {
      auto it = id_of.find(p);
      t.spm_vocab_ids.push_back(it == id_of.end() ? -1 : it->second);
    }
  } else {
    if (sp_size + kFairseqOffset > vocab_size)
      throw ConvertError(spm_path + ": " + std::to_string(sp_size) + " pieces do not fit " + size_key);
    for (uint32_t i = 0; i < sp_size; ++i) {
      const bool unknown = t.spm.types[i] == text::PieceType::kUnknown;  // fairseq's <unk> 3 instead
      t.spm_vocab_ids.push_back(unknown ? -1 : static_cast<int32_t>(i) + kFairseqOffset);
      if (i + kFairseqOffset >= 4) t.vocab[i + kFairseqOffset] = std::string(t.spm.pieces[i]);
    }
  }
  for (const auto& [id, token] : token_of) {
    t.vocab[static_cast<size_t>(id)] = token;
    t.special_ids.push_back(static_cast<int32_t>(id));
  }
  for (const std::string& c : codes) t.languages.emplace_back(c, static_cast<int32_t>(ids.at(c)));
  t.eos_id = static_cast<int32_t>(ids.at(kEos));
  t.unk_id = static_cast<int32_t>(ids.at(kUnk));
  t.pad_id = static_cast<int32_t>(ids.at(kPad));
  t.mask_id = ids.count(kMask) ? static_cast<int32_t>(ids.at(kMask)) : -1;
  for (size_t i = 0; i < t.vocab.size(); ++i)
    if (!detail::is_valid_utf8(t.vocab[i]))
      throw ConvertError((m2m100 && i < vocab_json.size() ? vocab_path : spm_path) + ": token " + std::to_string(i) +
                         " is not valid UTF-8");
  for (const auto& [code, id] : t.languages)
    if (!detail::is_valid_utf8(code)) throw ConvertError(config_path + ": a language code is not valid UTF-8");

  t.language_last = t.family == "nllb" && tc.flag("legacy_behaviour", false);
  t.join_pieces = t.family == "nllb";
  t.clean_up_spaces = tc.flag("clean_up_tokenization_spaces", false);  // transformers 4.45+'s default
  // The tokenizer classes' own defaults when tokenizer_config.json names none.
  const std::string fallback = t.family == "nllb" ? "eng_Latn" : m2m100 ? "en" : "en_XX";
  t.default_source_language = tc.text("src_lang", "");
  const bool stated = !t.default_source_language.empty();
  if (!stated) t.default_source_language = fallback;
  const std::string source_token = m2m100 ? "__" + t.default_source_language + "__" : t.default_source_language;
  if (std::none_of(t.languages.begin(), t.languages.end(), [&](const auto& l) { return l.first == source_token; })) {
    if (stated) throw ConvertError(config_path + ": src_lang '" + t.default_source_language + "' is no language code");
    t.default_source_language.clear();
  }

  const std::string name = t.family == "nllb" ? "NLLB" : m2m100 ? "M2M100" : "mBART-50";
  note("text tokenizer: " + name + " (transformers " + class_name + " rules): " +
       (t.spm.algorithm == text::SpmAlgorithm::kBpe ? "BPE" : "unigram") + " sentencepiece.bpe.model of " +
       std::to_string(sp_size) + " pieces" + (m2m100 ? ", vocab.json of " + std::to_string(vocab_json.size()) : "") +
       ", " + std::to_string(codes.size()) + " languages" + (from_map ? " (ids from added_tokens_decoder)" : "") +
       (t.mask_id >= 0 ? ", <mask> " + std::to_string(t.mask_id) : "") +
       (t.language_last ? ", source language last (legacy_behaviour)" : "") +
       (t.default_source_language.empty() ? ", no default source language"
                                          : ", source language " + t.default_source_language +
                                                (stated ? "" : " (the class's default)")) +
       (t.clean_up_spaces ? ", tokenization spaces cleaned up" : ""));
  return t;
}

namespace {

template <class String>
TokenizerStrings::Table add_strings(flatbuffers::FlatBufferBuilder& fbb, StringLayout layout, std::string& bytes,
                                    detail::StringMap<std::string, uint32_t>& offset_of,
                                    const std::vector<String>& strings) {
  TokenizerStrings::Table table;
  if (layout == StringLayout::kStringVectors) {
    std::vector<flatbuffers::Offset<flatbuffers::String>> offsets;
    // Shared: NLLB's tokens are its pieces, stored once.
    for (std::string_view s : strings) offsets.push_back(fbb.CreateSharedString(s.data(), s.size()));
    table.strings = fbb.CreateVector(offsets);
    return table;
  }
  std::vector<fb::StringSpan> spans;
  spans.reserve(strings.size());
  for (std::string_view s : strings) {
    auto [it, added] = offset_of.try_emplace(std::string(s), static_cast<uint32_t>(bytes.size()));
    if (added) {
      if (bytes.size() + s.size() > UINT32_MAX) throw ConvertError("tokenizer: its strings exceed 4 GiB");
      bytes.append(s);
    }
    spans.emplace_back(it->second, static_cast<uint32_t>(s.size()));
  }
  table.spans = fbb.CreateVectorOfStructs(spans);
  return table;
}

}  // namespace

TokenizerStrings::Table TokenizerStrings::add(const std::vector<std::string_view>& strings) {
  return add_strings(fbb_, layout_, bytes_, offset_of_, strings);
}

TokenizerStrings::Table TokenizerStrings::add(const std::vector<std::string>& strings) {
  return add_strings(fbb_, layout_, bytes_, offset_of_, strings);
}

flatbuffers::Offset<flatbuffers::Vector<uint8_t>> TokenizerStrings::blob() {
  if (layout_ == StringLayout::kStringVectors) return 0;
  return fbb_.CreateVector(reinterpret_cast<const uint8_t*>(bytes_.data()), bytes_.size());
}

void TokenizerStrings::add_vocab(fb::TokenizerBuilder& b, const Table& t) {
  if (!t.spans.IsNull()) b.add_vocab_spans(t.spans);
  if (!t.strings.IsNull()) b.add_vocab(t.strings);
}

void TokenizerStrings::add_target_vocab(fb::TokenizerBuilder& b, const Table& t) {
  if (!t.spans.IsNull()) b.add_target_vocab_spans(t.spans);
  if (!t.strings.IsNull()) b.add_target_vocab(t.strings);
}

void TokenizerStrings::add_blob(fb::TokenizerBuilder& b, flatbuffers::Offset<flatbuffers::Vector<uint8_t>> blob) {
  if (!blob.IsNull()) b.add_strings(blob);
}

flatbuffers::Offset<fb::SentencePieceModel> write_sentencepiece_model(flatbuffers::FlatBufferBuilder& fbb,
                                                                      const SpmModel& m,
                                                                      const std::vector<int32_t>* vocab_ids,
                                                                      TokenizerStrings& strings) {
  const TokenizerStrings::Table pieces = strings.add(m.pieces);
  auto scores = fbb.CreateVector(m.scores);
  std::vector<uint8_t> types;
  for (text::PieceType t : m.types) types.push_back(static_cast<uint8_t>(t));
  auto types_vec = fbb.CreateVector(types);
  auto charsmap = fbb.CreateVector(reinterpret_cast<const uint8_t*>(m.precompiled_charsmap.data()),
                                   m.precompiled_charsmap.size());
  auto unk_surface = fbb.CreateString(m.unk_surface.data(), m.unk_surface.size());
  auto normalizer = fbb.CreateString(m.normalizer_name.data(), m.normalizer_name.size());
  flatbuffers::Offset<flatbuffers::Vector<int32_t>> ids;
  if (vocab_ids != nullptr) ids = fbb.CreateVector(*vocab_ids);
  // The piece trie, so loading does not sort the pieces (format 1.5). Duplicate pieces
  // leave it out: the engine then refuses the model by name when it builds its own.
  text::PieceTrie trie;
  flatbuffers::Offset<flatbuffers::Vector<const fb::PieceTrieNode*>> trie_nodes;
  flatbuffers::Offset<flatbuffers::Vector<uint8_t>> trie_labels;
  const bool stored_trie = trie.build(m.pieces).first < 0;
  if (stored_trie) {
    static_assert(sizeof(fb::PieceTrieNode) == sizeof(text::PieceTrie::Node), "one layout in memory and in the file");
    trie_nodes = fbb.CreateVectorOfStructs(reinterpret_cast<const fb::PieceTrieNode*>(trie.nodes()), trie.node_count());
    trie_labels = fbb.CreateVector(trie.labels(), trie.node_count());
  }
  fb::SentencePieceModelBuilder b(fbb);
  b.add_algorithm(static_cast<fb::SentencePieceAlgorithm>(m.algorithm));
  if (!pieces.spans.IsNull()) b.add_piece_spans(pieces.spans);
  if (!pieces.strings.IsNull()) b.add_pieces(pieces.strings);
  b.add_scores(scores);
  b.add_types(types_vec);
  b.add_precompiled_charsmap(charsmap);
  b.add_add_dummy_prefix(m.add_dummy_prefix);
  b.add_remove_extra_whitespaces(m.remove_extra_whitespaces);
  b.add_escape_whitespaces(m.escape_whitespaces);
  b.add_treat_whitespace_as_suffix(m.treat_whitespace_as_suffix);
  b.add_byte_fallback(m.byte_fallback);
  b.add_unk_surface(unk_surface);
  b.add_normalizer(normalizer);
  if (vocab_ids != nullptr) b.add_vocab_ids(ids);
  if (stored_trie) {
    b.add_trie_nodes(trie_nodes);
    b.add_trie_labels(trie_labels);
  }
  return b.Finish();
}

flatbuffers::Offset<fb::Tokenizer> write_family_tokenizer(flatbuffers::FlatBufferBuilder& fbb, const FamilyTokenizer& t,
                                                          StringLayout layout) {
  // Separate statements: the bytes must not depend on argument evaluation order.
  TokenizerStrings strings(fbb, layout);
  const TokenizerStrings::Table vocab = strings.add(t.vocab);
  auto source = write_sentencepiece_model(fbb, t.spm, &t.spm_vocab_ids, strings);  // its pieces share the tokens' bytes
  auto blob = strings.blob();
  auto family = fbb.CreateString(t.family);
  std::vector<flatbuffers::Offset<fb::Language>> languages;
  for (const auto& [code, id] : t.languages) {
    auto c = fbb.CreateString(code);
    languages.push_back(fb::CreateLanguage(fbb, c, id));
  }
  auto languages_vec = fbb.CreateVector(languages);
  auto special_ids = fbb.CreateVector(t.special_ids);
  flatbuffers::Offset<flatbuffers::String> default_source;
  if (!t.default_source_language.empty()) default_source = fbb.CreateString(t.default_source_language);
  fb::TokenizerBuilder b(fbb);
  b.add_kind(fb::TokenizerKind::Fairseq);
  TokenizerStrings::add_vocab(b, vocab);
  TokenizerStrings::add_blob(b, blob);
  b.add_source(source);
  b.add_eos_id(t.eos_id);
  b.add_unk_id(t.unk_id);
  b.add_pad_id(t.pad_id);
  b.add_clean_up_spaces(t.clean_up_spaces);
  b.add_family(family);
  b.add_languages(languages_vec);
  b.add_special_ids(special_ids);
  b.add_mask_id(t.mask_id);
  b.add_language_placement(t.language_last ? fb::LanguagePlacement::Last : fb::LanguagePlacement::First);
  b.add_piece_decoding(t.join_pieces ? fb::PieceDecoding::JoinPieces : fb::PieceDecoding::SentencePiece);
  if (!t.default_source_language.empty()) b.add_default_source_language(default_source);
  return b.Finish();
}

}  // namespace petrel::convert
