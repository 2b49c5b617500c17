// tokenizer.json's pipeline for write_hf_tokenizer (hf_tokenizer_parts.h): its
// normalizers, pre-tokenizers, post-processor and decoders, each step checked and, but
// for the post-processor (its special ids), written as the model file's table of it.
#include <map>
#include <optional>

#include "convert/hf_tokenizer_parts.h"
#include "core/bytes.h"
#include "text/spm_normalizer.h"

namespace petrel::convert::hf_tokenizer_detail {
namespace {

// Base64 (RFC 4648's standard alphabet) decoded strictly, as Rust's base64 STANDARD
// engine does for precompiled_charsmap: padding to a multiple of 4 characters, no
// whitespace, the last character's unused bits zero. nullopt: not such base64.
std::optional<std::string> decode_base64(const std::string& text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const size_t pad = last ? (text[i + 3] == '=' ? (text[i + 2] == '=' ? 2 : 1) : 0) : 0;
    uint32_t bits = 0;
    for (size_t k = 0; k < 4; ++k) {
      if (k >= 4 - pad) {
        bits <<= 6;
        continue;
      }
      const int v = value(text[i + k]);
      if (v < 0) return std::nullopt;
      bits = bits << 6 | static_cast<uint32_t>(v);
    }
    if ((pad == 1 && (bits & 0xFF) != 0) || (pad == 2 && (bits & 0xFFFF) != 0)) return std::nullopt;  // non-canonical
    out.push_back(static_cast<char>(bits >> 16));
    if (pad < 2) out.push_back(static_cast<char>(bits >> 8 & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(bits & 0xFF));
  }
  return out;
}

fb::HfPrependScheme prepend_scheme(const JsonAt& at) {
  const std::string s = at.text("prepend_scheme", "always");
  if (s == "always") return fb::HfPrependScheme::Always;
  if (s == "never") return fb::HfPrependScheme::Never;
  if (s == "first") return fb::HfPrependScheme::First;
  at.at("prepend_scheme").fail("unknown value '" + s + "'");
}

// Rust tokenizers' Metaspace (0.19 ..): a legacy add_prefix_space: false means the
// scheme never (and contradicts any other scheme given); absent, the scheme decides.
bool rust_metaspace_prefix(const JsonAt& at, fb::HfPrependScheme scheme) {
  if (at.has("add_prefix_space") && !at.flag("add_prefix_space", true)) {
    if (at.has("prepend_scheme") && scheme != fb::HfPrependScheme::Never)
      at.at("add_prefix_space").fail("false contradicts prepend_scheme");
    return false;
  }
  return scheme != fb::HfPrependScheme::Never;
}

}  // namespace

// Normalizers.
std::vector<flatbuffers::Offset<fb::HfNormalizer>> write_normalizers(flatbuffers::FlatBufferBuilder& fbb,
                                                                     const JsonAt& top,
                                                                     std::vector<std::string>& pipeline,
                                                                     HfTokenizerSummary& sum) {
  std::vector<flatbuffers::Offset<fb::HfNormalizer>> normalizers;
  if (top.has("normalizer")) {
    for (const JsonAt& n : top.at("normalizer").steps("normalizers")) {
      const std::string type = n.type();
      pipeline.push_back(type);
      flatbuffers::Offset<flatbuffers::String> pattern, content;
      bool is_regex = false;
      if (type == "Replace") {
        auto [p, regex] = n.pattern();
        if (p.empty()) n.at("pattern").fail("must not be empty");
        is_regex = regex;
        if (regex) sum.regexes.emplace_back(n.at("pattern").path() + ".Regex", p);
        pattern = fbb.CreateString(p);
        content = fbb.CreateString(n.step_text("content"));
      } else if (type == "Prepend") {
        content = fbb.CreateString(n.step_text("prepend"));
      }
      // BertNormalizer: transformers.js reads each flag as truthy (absent: false) and
      // strip_accents as null/absent (follow lowercase), false or true.
      fb::HfStripAccents strip_accents = fb::HfStripAccents::FollowLowercase;
      if (type == "BertNormalizer" && n.has("strip_accents"))
        strip_accents = n.flag("strip_accents", false) ? fb::HfStripAccents::Yes : fb::HfStripAccents::No;
      flatbuffers::Offset<flatbuffers::Vector<uint8_t>> charsmap;
      if (type == "Precompiled") {
        const std::optional<std::string> blob = decode_base64(n.text("precompiled_charsmap"));
        if (!blob) n.at("precompiled_charsmap").fail("is not base64 (RFC 4648, padded)");
        if (blob->empty()) n.at("precompiled_charsmap").fail("is empty (tokenizers cannot read it)");
        auto map = text::CharsMap::parse(*blob, "charsmap");
        if (!map) n.at("precompiled_charsmap").fail(map.error().message);
        // spm_precompiled refuses a map whose replacement strings are not UTF-8.
        const size_t trie_bytes = detail::load_le32(reinterpret_cast<const unsigned char*>(blob->data()));
        if (!detail::is_valid_utf8(std::string_view(*blob).substr(4 + trie_bytes)))
          n.at("precompiled_charsmap").fail("its replacement strings are not UTF-8");
        charsmap = fbb.CreateVector(reinterpret_cast<const uint8_t*>(blob->data()), blob->size());
      }
      static const std::map<std::string, fb::HfNormalizerKind> kinds = {
          {"NFC", fb::HfNormalizerKind::Nfc},         {"NFD", fb::HfNormalizerKind::Nfd},
          {"NFKC", fb::HfNormalizerKind::Nfkc},       {"NFKD", fb::HfNormalizerKind::Nfkd},
          {"Replace", fb::HfNormalizerKind::Replace}, {"Prepend", fb::HfNormalizerKind::Prepend},
          {"Strip", fb::HfNormalizerKind::Strip},     {"Lowercase", fb::HfNormalizerKind::Lowercase},
          {"BertNormalizer", fb::HfNormalizerKind::BertNormalizer}, {"Precompiled", fb::HfNormalizerKind::Precompiled}};
      auto kind = kinds.find(type);
      if (kind == kinds.end()) n.at("type").fail("normalizer '" + type + "' is not supported");
      fb::HfNormalizerBuilder nb(fbb);
      nb.add_kind(kind->second);
      if (!pattern.IsNull()) nb.add_pattern(pattern);
      nb.add_pattern_is_regex(is_regex);
      if (!content.IsNull()) nb.add_content(content);
      nb.add_strip_left(type == "Strip" && n.flag("strip_left", false));
      nb.add_strip_right(type == "Strip" && n.flag("strip_right", false));
      if (type == "BertNormalizer") {
        nb.add_clean_text(n.flag("clean_text", false));
        nb.add_handle_chinese_chars(n.flag("handle_chinese_chars", false));
        nb.add_strip_accents(strip_accents);
        nb.add_lowercase(n.flag("lowercase", false));
      }
      if (!charsmap.IsNull()) nb.add_precompiled_charsmap(charsmap);
      normalizers.push_back(nb.Finish());
    }
  }
  return normalizers;
}

// Pre-tokenizers.
std::vector<flatbuffers::Offset<fb::HfPreTokenizer>> write_pre_tokenizers(flatbuffers::FlatBufferBuilder& fbb,
                                                                          const JsonAt& top, bool unigram,
                                                                          std::vector<std::string>& pipeline,
                                                                          HfTokenizerSummary& sum) {
  std::vector<flatbuffers::Offset<fb::HfPreTokenizer>> pre_tokenizers;
  if (top.has("pre_tokenizer")) {
    bool byte_level = false;
    for (const JsonAt& p : top.at("pre_tokenizer").steps("pretokenizers")) {
      const std::string type = p.type();
      if (byte_level) p.fail("a pre-tokenizer after ByteLevel is not supported");
      byte_level = type == "ByteLevel";
      pipeline.push_back(type);
      flatbuffers::Offset<flatbuffers::String> pattern, replacement;
      bool is_regex = false;
      fb::HfSplitBehavior behavior = fb::HfSplitBehavior::Isolated;
      fb::HfPrependScheme scheme = fb::HfPrependScheme::Always;
      fb::HfPreTokenizerKind kind;
      bool metaspace_split = false, prefix_space = false;
      if (type == "Split") {
        kind = fb::HfPreTokenizerKind::Split;
        auto [text, regex] = p.pattern();
        if (text.empty()) p.at("pattern").fail("must not be empty");
        pattern = fbb.CreateString(text);
        is_regex = regex;
        if (regex) sum.regexes.emplace_back(p.at("pattern").path() + ".Regex", text);
        static const std::map<std::string, fb::HfSplitBehavior> behaviors = {
            {"Removed", fb::HfSplitBehavior::Removed},
            {"Isolated", fb::HfSplitBehavior::Isolated},
            {"MergedWithPrevious", fb::HfSplitBehavior::MergedWithPrevious},
            {"MergedWithNext", fb::HfSplitBehavior::MergedWithNext},
            {"Contiguous", fb::HfSplitBehavior::Contiguous}};
        auto b = behaviors.find(p.text("behavior", "Isolated"));
        if (b == behaviors.end()) p.at("behavior").fail("unknown value " + json_excerpt(p.at("behavior").raw()));
        behavior = b->second;
      } else if (type == "ByteLevel") {
        kind = fb::HfPreTokenizerKind::ByteLevel;
      } else if (type == "Metaspace") {
        kind = fb::HfPreTokenizerKind::Metaspace;
        replacement = fbb.CreateString(p.step_text("replacement"));
        scheme = prepend_scheme(p);
        const std::string r = p.text("replacement");
        if (unigram && (r.empty() || detail::utf8_sequence(r, 0) != r.size()))
          p.at("replacement").fail("must be one character (Rust's Metaspace holds a char)");
        if (unigram) {
          metaspace_split = p.flag("split", true);  // Rust's default
          if (rust_metaspace_prefix(p, scheme)) prefix_space = true;
        } else if (p.flag("split", false)) {
          p.at("split").fail("Metaspace with split: true is not supported (for a BPE model)");
        }
      } else if (type == "Digits") {
        kind = fb::HfPreTokenizerKind::Digits;
      } else if (type == "WhitespaceSplit") {
        kind = fb::HfPreTokenizerKind::WhitespaceSplit;
      } else if (type == "Whitespace") {
        kind = fb::HfPreTokenizerKind::Whitespace;
      } else if (type == "BertPreTokenizer") {
        kind = fb::HfPreTokenizerKind::BertPreTokenizer;
      } else if (type == "Punctuation") {
        // transformers.js keeps runs of punctuation together whatever the behavior says.
        if (p.text("behavior", "Isolated") != "Isolated" && p.text("behavior", "Isolated") != "Contiguous")
          p.at("behavior").fail("Punctuation with behavior '" + p.text("behavior") + "' is not supported");
        kind = fb::HfPreTokenizerKind::Punctuation;
      } else {
        p.at("type").fail("pre-tokenizer '" + type + "' is not supported");
      }
      fb::HfPreTokenizerBuilder b(fbb);
      b.add_kind(kind);
      if (!pattern.IsNull()) b.add_pattern(pattern);
      b.add_pattern_is_regex(is_regex);
      b.add_behavior(behavior);
      b.add_invert(p.flag("invert", false));
      // transformers.js reads Metaspace's add_prefix_space (absent: false); prepend_scheme decides when.
      // Rust (a Unigram tokenizer's): prepend unless add_prefix_space is false or the scheme never.
      b.add_add_prefix_space(unigram && type == "Metaspace" ? prefix_space : p.flag("add_prefix_space", false));
      b.add_split(metaspace_split);
      b.add_use_regex(p.flag("use_regex", true));
      if (!replacement.IsNull()) b.add_replacement(replacement);
      b.add_prepend_scheme(scheme);
      b.add_individual_digits(p.flag("individual_digits", false));
      pre_tokenizers.push_back(b.Finish());
    }
  }
  return pre_tokenizers;
}

// The post-processor: special tokens around a single sequence.
void read_post_processor(const JsonAt& top, const Tokenizer& t, std::vector<int32_t>& prefix_ids,
                         std::vector<int32_t>& suffix_ids, std::vector<std::string>& pipeline) {
  if (top.has("post_processor")) {
    for (const JsonAt& p : top.at("post_processor").steps("processors")) {
      const std::string type = p.type();
      if (type == "ByteLevel") continue;  // offsets only
      if (type == "BertProcessing" || type == "RobertaProcessing") {
        // [CLS] $A [SEP]: transformers.js adds the token strings cls[0] and sep[0]
        // through the vocabulary (their ids in the file are not read).
        for (const char* key : {"cls", "sep"}) {
          const JsonAt pair = p.at(key);
          if (!pair.raw().is_array() || pair.raw().empty() || !pair.raw()[0].is_string())
            pair.fail("must be [token, id], got " + json_excerpt(pair.raw()));
          const int32_t id = token_id(t, pair.at(size_t{0}), pair.raw()[0].get<std::string>());
          (key[0] == 'c' ? prefix_ids : suffix_ids).push_back(id);
        }
        pipeline.push_back(type);
        continue;
      }
      if (type != "TemplateProcessing") p.at("type").fail("post-processor '" + type + "' is not supported");
      const JsonAt single = p.at("single");
      if (!single.raw().is_array()) single.fail("must be a list");
      bool after = false;
      for (size_t i = 0; i < single.raw().size(); ++i) {
        const JsonAt item = single.at(i);
        if (item.has("Sequence")) {
          if (item.at("Sequence").text("id") != "A") item.fail("a single sequence template names sequence A only");
          if (after) item.fail("sequence A appears twice");
          after = true;
        } else if (item.has("SpecialToken")) {
          // transformers.js adds the SpecialToken's id string through the vocabulary.
          const JsonAt special = item.at("SpecialToken");
          const int32_t id = token_id(t, special, special.text("id"));
          (after ? suffix_ids : prefix_ids).push_back(id);
        } else {
          item.fail("must be a Sequence or a SpecialToken");
        }
      }
      pipeline.push_back("Template(" + std::to_string(prefix_ids.size()) + "+" + std::to_string(suffix_ids.size()) + ")");
    }
  }
}

// Decoders.
std::vector<flatbuffers::Offset<fb::HfDecoder>> write_decoders(flatbuffers::FlatBufferBuilder& fbb, const JsonAt& top,
                                                               bool unigram, std::vector<std::string>& pipeline) {
  std::vector<flatbuffers::Offset<fb::HfDecoder>> decoders;
  if (top.has("decoder")) {
    for (const JsonAt& d : top.at("decoder").steps("decoders")) {
      const std::string type = d.type();
      pipeline.push_back(type);
      flatbuffers::Offset<flatbuffers::String> pattern, content, replacement, prefix;
      fb::HfDecoderKind kind;
      if (type == "ByteLevel") {
        kind = fb::HfDecoderKind::ByteLevel;
      } else if (type == "Replace") {
        kind = fb::HfDecoderKind::Replace;
        auto [p, regex] = d.pattern();
        if (regex) d.at("pattern").fail("a Replace decoder with a regex is not supported");
        if (p.empty()) d.at("pattern").fail("must not be empty");
        pattern = fbb.CreateString(p);
        content = fbb.CreateString(d.step_text("content"));
      } else if (type == "ByteFallback") {
        kind = fb::HfDecoderKind::ByteFallback;
      } else if (type == "Fuse") {
        kind = fb::HfDecoderKind::Fuse;
      } else if (type == "Strip") {
        kind = fb::HfDecoderKind::Strip;
        const std::string c = d.text("content");
        // transformers.js compares one UTF-16 unit of the token with it.
        if (c.empty() || detail::utf8_sequence(c, 0) != c.size() || c.size() == 4)
          d.at("content").fail("must be one character of the Basic Multilingual Plane");
        content = fbb.CreateString(c);
      } else if (type == "Metaspace") {
        kind = fb::HfDecoderKind::Metaspace;
        replacement = fbb.CreateString(d.step_text("replacement"));
      } else if (type == "WordPiece") {
        kind = fb::HfDecoderKind::WordPiece;
        prefix = fbb.CreateString(d.step_text("prefix"));
      } else {
        d.at("type").fail("decoder '" + type + "' is not supported");
      }
      fb::HfDecoderBuilder b(fbb);
      b.add_kind(kind);
      if (!pattern.IsNull()) b.add_pattern(pattern);
      if (!content.IsNull()) b.add_content(content);
      b.add_start(type == "Strip" ? d.count("start", 0) : 0);
      b.add_stop(type == "Strip" ? d.count("stop", 0) : 0);
      if (!replacement.IsNull()) b.add_replacement(replacement);
      // Rust's Metaspace decoder drops the first token's leading space unless the scheme is never.
      b.add_add_prefix_space(type == "Metaspace" &&
                             (unigram ? rust_metaspace_prefix(d, prepend_scheme(d)) : d.flag("add_prefix_space", false)));
      if (!prefix.IsNull()) b.add_prefix(prefix);
      b.add_cleanup(type == "WordPiece" && d.flag("cleanup", false));
      decoders.push_back(b.Finish());
    }
  }
  return decoders;
}

}  // namespace petrel::convert::hf_tokenizer_detail
