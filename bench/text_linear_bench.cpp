// Every pass over text must take time linear in the text's length (#24). This times each
// pass of the text layer on adversarial inputs of 64 KB and 1 MB and reports µs per input
// byte ("us/B"): a linear pass shows the same figure at both sizes, a quadratic one 16x.
// bench/text_linear_table.py runs it and prints the table in bench/README.md with the
// 1 MB / 64 KB ratio of each row.
//
// Passes: SentencePiece normalization (nmt_nfkc charsmap), unigram and BPE encoding
// (fixture models of tests/fixtures/sentencepiece, byte fallback and user-defined
// symbols), decoding the encoded ids, MarianTokenizer tokenize and decode (special
// tokens, >>xx<< codes, ▁ and clean-up rules), the sentence splitter, and the string
// rules (space_symbols_to_spaces, clean_up_tokenization, python_strip); language models'
// tokenizer.json tokenizers (the real Gemma 3 and Qwen3 ones of tests/fixtures/hf_tokenizer:
// encode and decode) and chat templates (Gemma 3's, rendering the text as a message).
// Inputs: one repeated character, ">>"/"<<" runs, a line of '>', text without spaces,
// periods between capitals without ASCII spaces, only combining marks, only ▁, " ." runs.
//
// Rows "limits:..." put each tokenizer part at the most a model file may give it over the
// input that costs it most (tokenizer.json made here): a 4,095-byte added token; WordPiece
// and Unigram vocabularies with a 4,096-byte piece; a Unigram one of pieces nested 1,024
// deep ("a" .. 1,024 'a'); a regex of 1024 instructions (the loader's largest), over
// prose and over 'y', where every thread is alive at every code point; the real Qwen
// pattern on its costliest repeat; a 3,000-byte Prepend. The nested Unigram and the busy
// regex are refused at their per-byte limits (kUnigramEdgesPerByte, kRegexStepsPerByte):
// those rows are the time to refuse. Chat templates at theirs, rendering a message of the
// row's size: `p in s`, `.replace` and `.split` with p = 'a' x 1000 + 'b' over 'a...',
// `'a ' * n` output; the most set globals, and the largest dict literal, a template may
// hold (ChatTemplate::parse's limits), looked up once per 64 bytes of the message.
//
//   petrel_text_linear_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <malloc.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert/convert_error.h"
#include "convert/hf_tokenizer.h"
#include "convert/spm_model.h"
#include "bench_support.h"
#include "text/chat_template.h"
#include "text/hf_text.h"
#include "text/hf_tokenizer.h"
#include "text/marian_tokenizer.h"
#include "text/sentence_splitter.h"
#include "text/sentencepiece.h"
#include "text/spm_normalizer.h"

using namespace petrel;

namespace {

// `unit` repeated to exactly `size` bytes or just under (whole units).
std::string repeat(const std::string& unit, size_t size) {
  std::string out;
  out.reserve(size);
  while (out.size() + unit.size() <= size) out += unit;
  return out;
}

struct Input {
  std::string name;
  std::string (*make)(size_t size);
};

const Input kInputs[] = {
    {"one_char", [](size_t n) { return std::string(n, 'a'); }},
    {"angle_runs", [](size_t n) { return repeat(std::string(100, '>') + std::string(100, '<'), n); }},
    {"gt_line", [](size_t n) { return std::string(n, '>'); }},
    {"no_spaces", [](size_t n) { return repeat("Lorem,ipsum.dolor(sit)amet;Grüße-数据", n); }},
    {"periods_em_space", [](size_t n) { return repeat("Ab.\u2003", n); }},
    {"combining_marks", [](size_t n) { return repeat("\u0301\u0308\u0323", n); }},
    {"space_symbols", [](size_t n) { return repeat("\u2581", n); }},
    {"space_periods", [](size_t n) { return repeat(" .", n); }},
};

struct Models {
  convert::SpmModel unigram_file, bpe_file;
  std::unique_ptr<text::SentencePiece> unigram, bpe;
  text::Normalizer normalizer;
  std::vector<int32_t> vocab_ids;
  std::unique_ptr<text::MarianTokenizer> marian;
  // tokenizer.json tokenizers, viewing their converted buffers, and a chat template.
  bench::HfFixture gemma, qwen;
  std::optional<text::ChatTemplate> chat;
};


Models* load(const std::string& dir) {
  auto m = std::make_unique<Models>();
  try {
    m->unigram_file = convert::read_spm_model(dir + "/models/unigram_nfkc_bytes_udf.spm");
    m->bpe_file = convert::read_spm_model(dir + "/models/bpe_identity_bytes_udf.spm");
  } catch (const convert::ConvertError& e) {
    std::cerr << e.what() << "\n";
    return nullptr;
  }
  auto unigram = text::SentencePiece::create(m->unigram_file.spec(), "unigram");
  auto bpe = text::SentencePiece::create(m->bpe_file.spec(), "bpe");
  auto map = text::CharsMap::parse(m->unigram_file.precompiled_charsmap, "unigram");
  if (!unigram || !bpe || !map) return nullptr;
  m->unigram = std::make_unique<text::SentencePiece>(std::move(unigram.value()));
  m->bpe = std::make_unique<text::SentencePiece>(std::move(bpe.value()));
  m->normalizer = text::Normalizer(map.value(), text::NormalizerFlags{});
  // opus-mt's shape: the source model's pieces are the vocabulary (</s>, <unk> among
  // them), <pad> added; the target is the BPE model.
  detail::MarianTokenizerTables parts;
  parts.source = m->unigram_file.spec();
  parts.target = m->bpe_file.spec();
  std::vector<std::string_view> vocab = m->unigram_file.pieces, target_vocab = m->bpe_file.pieces;
  vocab.push_back("<pad>");
  target_vocab.push_back("<pad>");
  parts.vocab = StringTable(vocab);
  for (size_t i = 0; i < m->unigram_file.pieces.size(); ++i) m->vocab_ids.push_back(static_cast<int32_t>(i));
  parts.source_vocab_ids = m->vocab_ids.data();
  parts.target_vocab = StringTable(target_vocab);
  parts.unk_id = m->unigram->unk_id();
  parts.eos_id = m->unigram->piece_to_id("</s>");
  parts.pad_id = static_cast<int32_t>(parts.vocab.size() - 1);
  auto marian = text::MarianTokenizer::create(parts, "marian");
  if (!marian) {
    std::cerr << marian.error().message << "\n";
    return nullptr;
  }
  m->marian = std::move(marian.value());
  const std::string hf = PETREL_HF_FIXTURES_DIR;
  try {
    m->gemma = bench::load_hf_fixture(hf + "/gemma3");
    m->qwen = bench::load_hf_fixture(hf + "/qwen3");
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return nullptr;
  }
  const std::string config = bench::xz_decompress(hf + "/gemma3/tokenizer_config.json.xz");
  const size_t key = config.find("\"chat_template\"");
  if (key == std::string::npos) return nullptr;
  std::string source;  // the JSON string's value, unescaped (\n, \", \\ are all it holds)
  for (size_t i = config.find('"', config.find(':', key)) + 1; i < config.size() && config[i] != '"'; ++i) {
    if (config[i] == '\\' && i + 1 < config.size()) {
      const char c = config[++i];
      source.push_back(c == 'n' ? '\n' : c);
    } else {
      source.push_back(config[i]);
    }
  }
  auto chat = text::ChatTemplate::parse(source);
  if (!chat) {
    std::cerr << chat.error().message << "\n";
    return nullptr;
  }
  m->chat.emplace(std::move(chat.value()));
  return m.release();
}

// Reports µs per input byte: a rate counter over bytes/1e6, inverted.
void per_byte(benchmark::State& state, size_t bytes) {
  state.counters["us/B"] = benchmark::Counter(static_cast<double>(state.iterations()) * static_cast<double>(bytes) / 1e6,
                                              benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

template <class Pass>
void run(benchmark::State& state, const std::string& text, Pass pass) {
  pass(text);  // warm-up: lazily made inputs, scratch space
  for (auto _ : state) pass(text);
  per_byte(state, text.size());
}

std::vector<int32_t> ids_of(const text::SentencePiece& sp, const std::string& text) {
  text::Encoding e;
  std::vector<int32_t> ids;
  if (sp.encode(text, e))
    for (const text::Piece& p : e.pieces()) ids.push_back(p.id);
  return ids;
}

void register_all(const Models& m) {
  static std::vector<std::unique_ptr<std::string>> texts;
  for (const Input& input : kInputs) {
    for (const size_t size : {size_t{64} << 10, size_t{1} << 20}) {
      texts.push_back(std::make_unique<std::string>(input.make(size)));
      const std::string& text = *texts.back();
      const std::string suffix = "/" + input.name + "/" + (size == (size_t{1} << 20) ? "1MB" : "64KB");
      auto add = [&](const std::string& pass, auto fn) {
        benchmark::RegisterBenchmark((pass + suffix).c_str(), [&text, fn](benchmark::State& state) {
          run(state, text, fn);
        })->Unit(benchmark::kMillisecond);
      };
      add("normalize", [&m](const std::string& t) {
        std::vector<char> out;
        benchmark::DoNotOptimize(m.normalizer.normalize(t, nullptr, size_t{1} << 30, out));
      });
      // The Encoding is reused, as a caller keeps one per thread.
      add("unigram_encode", [&m](const std::string& t) {
        static text::Encoding e;
        benchmark::DoNotOptimize(m.unigram->encode(t, e));
      });
      add("bpe_encode", [&m](const std::string& t) {
        static text::Encoding e;
        benchmark::DoNotOptimize(m.bpe->encode(t, e));
      });
      // Decoding: the ids of this text's BPE encoding (timed per byte of the text),
      // made on the first call, outside the timing.
      auto ids = std::make_shared<std::vector<int32_t>>();
      add("bpe_decode", [&m, ids](const std::string& t) {
        if (ids->empty()) *ids = ids_of(*m.bpe, t);
        std::string out;
        benchmark::DoNotOptimize(m.bpe->decode(*ids, out));
      });
      add("marian_tokenize", [&m](const std::string& t) { benchmark::DoNotOptimize(m.marian->tokenize(t)); });
      add("marian_decode", [&m, ids](const std::string& t) {
        if (ids->empty()) *ids = ids_of(*m.bpe, t);
        benchmark::DoNotOptimize(m.marian->decode(*ids));
      });
      for (const auto& [name, tokenizer] : {std::pair{std::string("gemma3"), m.gemma.tokenizer.get()},
                                            std::pair{std::string("qwen3"), m.qwen.tokenizer.get()}}) {
        const text::HfTokenizer* t = tokenizer;
        add(name + "_encode", [t](const std::string& text) { benchmark::DoNotOptimize(t->encode_text(text, true)); });
        auto hf_ids = std::make_shared<std::vector<int32_t>>();
        add(name + "_decode", [t, hf_ids](const std::string& text) {
          if (hf_ids->empty()) *hf_ids = t->encode_text(text, true).value();
          benchmark::DoNotOptimize(t->decode_ids(hf_ids->data(), hf_ids->size(), true));
        });
      }
      add("chat_template", [&m](const std::string& t) {
        text::ChatTemplateInputs in;
        in.messages = {{"system", t}, {"user", t}, {"assistant", t}, {"user", t}};
        in.strings = {{"bos_token", "<bos>"}};
        benchmark::DoNotOptimize(m.chat->render(in));
      });
      add("split_sentences", [](const std::string& t) { benchmark::DoNotOptimize(text::split_sentences(t)); });
      add("hf_string_rules", [](const std::string& t) {
        std::string s = t;
        text::space_symbols_to_spaces(s);
        text::clean_up_tokenization(s);
        benchmark::DoNotOptimize(text::python_strip(s));
      });
    }
  }
}

// Tokenizer parts and chat templates at their limits.
using json = nlohmann::json;

bench::HfFixture hf_from_json(const std::string& name, const json& j) {
  convert::HfTokenizerFiles files;
  files.dir = name;
  files.tokenizer_json = j.dump();
  bench::HfFixture f;
  f.buffer = convert::hf_tokenizer_buffer(files);
  const auto* root = flatbuffers::GetRoot<fb::Tokenizer>(f.buffer.data());
  auto tables = detail::bind_hf_tokenizer(*root, root->vocab_spans()->size(), name);
  if (!tables) throw std::runtime_error(tables.error().message);
  auto t = text::HfTokenizer::create(std::move(tables.value()), name);
  if (!t) throw std::runtime_error(t.error().message);
  f.tokenizer = std::move(t.value());
  return f;
}

json added_token(int id, const std::string& content) {
  return {{"id", id},         {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false},  {"normalized", false}, {"special", true}};
}

// BPE over printable ASCII (a few merges), no normalizer; `pre_tokenizer` as given.
json bpe_json(const json& pre_tokenizer) {
  json vocab = json::object();
  vocab["<unk>"] = 0;
  for (char c = ' '; c <= '~'; ++c) vocab[std::string(1, c)] = vocab.size();
  vocab["th"] = vocab.size();
  vocab["the"] = vocab.size();
  return {{"version", "1.0"},
          {"added_tokens", json::array({added_token(0, "<unk>")})},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre_tokenizer},
          {"post_processor", nullptr},
          {"decoder", nullptr},
          {"model",
           {{"type", "BPE"}, {"unk_token", "<unk>"}, {"vocab", vocab}, {"merges", json::array({{"t", "h"}, {"th", "e"}})}}}};
}

json split_regex(const std::string& pattern) {
  return {{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}};
}

struct Limits {
  bench::HfFixture added, wordpiece, unigram, unigram_nested, regex, busy_regex, qwen_regex, prepend;
  std::vector<std::pair<std::string, text::ChatTemplate>> chats;  // over a message of the row's size
};

Limits* load_limits() {
  auto l = std::make_unique<Limits>();
  try {
    // Words end at each 'b' (as a space would): BPE's work stays per word.
    const json words = {{"type", "Split"}, {"pattern", {{"String", "b"}}}, {"behavior", "MergedWithPrevious"}, {"invert", false}};
    json j = bpe_json(words);
    j["added_tokens"].push_back(added_token(static_cast<int>(j["model"]["vocab"].size()), std::string(4095, 'a')));
    l->added = hf_from_json("added_token_4095", j);
    json vocab = {{"[UNK]", 0}, {"a", 1}, {"##a", 2}, {"b", 3}, {"##b", 4}, {std::string(4096, 'a'), 5},
                  {"##" + std::string(4094, 'a'), 6}};
    l->wordpiece = hf_from_json(
        "wordpiece_4096",
        {{"version", "1.0"},
         {"added_tokens", json::array({added_token(0, "[UNK]")})},
         {"normalizer", nullptr},
         {"pre_tokenizer", {{"type", "WhitespaceSplit"}}},
         {"post_processor", nullptr},
         {"decoder", nullptr},
         {"model",
          {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"continuing_subword_prefix", "##"},
           {"max_input_chars_per_word", 0xffffffffu}, {"vocab", vocab}}}});
    const auto unigram = [&](const json& vocab) -> json {  // <unk> is id 0
      return {{"version", "1.0"},
              {"added_tokens", json::array({added_token(0, "<unk>")})},
              {"normalizer", nullptr},
              {"pre_tokenizer", nullptr},
              {"post_processor", nullptr},
              {"decoder", nullptr},
              {"model", {{"type", "Unigram"}, {"unk_id", 0}, {"byte_fallback", false}, {"vocab", vocab}}}};
    };
    l->unigram = hf_from_json(
        "unigram_4096", unigram(json::array({{"<unk>", 0.0}, {"a", -2.0}, {"b", -2.0}, {std::string(4096, 'a'), -1.0}})));
    json nested = json::array({{"<unk>", 0.0}});  // "a" .. 1024 'a': each 'a' starts 1024 pieces
    for (int k = 1; k <= 1024; ++k) nested.push_back({std::string(static_cast<size_t>(k), 'a'), -k / 7.0});
    l->unigram_nested = hf_from_json("unigram_nested_1024", unigram(nested));
    l->regex = hf_from_json("regex_1024", bpe_json(split_regex("a{1023}")));
    l->busy_regex = hf_from_json("regex_1024_busy", bpe_json(split_regex("(?:.?){511}x")));
    const std::string qwen =
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
    l->qwen_regex = hf_from_json("regex_qwen", bpe_json(split_regex(qwen)));
    std::string prepended;
    while (prepended.size() < 3000) prepended += "the user ";
    j = bpe_json(split_regex(qwen));
    j["normalizer"] = {{"type", "Prepend"}, {"prepend", prepended}};
    l->prepend = hf_from_json("prepend_3000", j);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return nullptr;
  }
  const std::string p = "('a' * 1000 + 'b')";
  for (const auto& [name, source] : std::vector<std::pair<std::string, std::string>>{
           {"chat_in", "{% for m in messages %}{{ " + p + " in m.content }}{% endfor %}"},
           {"chat_replace", "{% for m in messages %}{{ m.content.replace(" + p + ", 'x') | length }}{% endfor %}"},
           {"chat_split", "{% for m in messages %}{{ m.content.split(" + p + ") | length }}{% endfor %}"},
           {"chat_repeat", "{% for m in messages %}{{ 'a ' * (m.content | length) }}{% endfor %}"}}) {
    auto chat = text::ChatTemplate::parse(source);
    if (!chat) {  // (the row is left out)
      std::cerr << name << ": " << chat.error().message << "\n";
      continue;
    }
    l->chats.emplace_back(name, std::move(chat.value()));
  }
  // The most globals, and the most keys of one dict literal, that parse (from 10,000
  // globals and 90,000 keys down, a tenth at a time), then a lookup of the last one per
  // 64 bytes of the message. A template that never parses leaves its row out.
  const std::string lookups = "{% for m in messages %}{% for i in range((m.content | length) // 64) %}";
  for (const bool dict : {false, true}) {
    for (size_t count = dict ? 90000 : 10000; count >= 100; count = count * 9 / 10) {
      std::string source = dict ? "{% set d = {" : "";
      for (size_t i = 0; i < count; ++i)
        source += dict ? (i ? ",'k" : "'k") + std::to_string(i) + "':1" : "{% set v" + std::to_string(i) + " = 1 %}";
      const std::string last = std::to_string(count - 1);
      source += (dict ? "} %}" : "") + lookups + (dict ? "{{ d['k" + last + "'] }}" : "{{ v" + last + " }}") +
                "{% endfor %}{% endfor %}";
      auto chat = text::ChatTemplate::parse(source);
      if (!chat) continue;
      l->chats.emplace_back((dict ? "chat_dict_" : "chat_globals_") + std::to_string(count), std::move(chat.value()));
      break;
    }
  }
  return l.release();
}

// Sets ChatTemplateInputs::max_output_bytes where the field exists.
template <class Inputs>
auto allow_output(Inputs& in, size_t bytes, int) -> decltype(in.max_output_bytes = bytes, void()) {
  in.max_output_bytes = bytes;
}
template <class Inputs>
void allow_output(Inputs&, size_t, long) {}

void register_limits(const Limits& l) {
  static std::vector<std::unique_ptr<std::string>> texts;
  auto make = [](const std::string& unit, size_t size) { return repeat(unit, size); };
  std::string prose_unit = "The model is in the user's system, 12 of 345 times! Is it? ";
  for (const size_t size : {size_t{64} << 10, size_t{1} << 20}) {
    const std::string suffix = std::string("/") + (size == (size_t{1} << 20) ? "1MB" : "64KB");
    auto text = [&](const std::string& s) -> const std::string& {
      texts.push_back(std::make_unique<std::string>(s));
      return *texts.back();
    };
    auto add = [&](const std::string& pass, const std::string& input, const std::string& t, auto fn) {
      benchmark::RegisterBenchmark(("limits:" + pass + "/" + input + suffix).c_str(), [&t, fn](benchmark::State& state) {
        run(state, t, fn);
      })->Unit(benchmark::kMillisecond);
    };
    auto encode = [](const text::HfTokenizer* t) {
      return [t](const std::string& s) { benchmark::DoNotOptimize(t->encode_text(s, false)); };
    };
    const std::string& a = text(std::string(size, 'a'));
    add("added_token_4095", "one_char", a, encode(l.added.tokenizer.get()));
    add("added_token_4095", "runs_4094", text(make(std::string(4094, 'a') + "b", size)), encode(l.added.tokenizer.get()));
    add("wordpiece_4096", "one_char", a, encode(l.wordpiece.tokenizer.get()));
    add("wordpiece_4096", "runs_4093", text(make(std::string(4093, 'a') + "b", size)), encode(l.wordpiece.tokenizer.get()));
    add("unigram_4096", "one_char", a, encode(l.unigram.tokenizer.get()));
    add("unigram_4096", "runs_4095", text(make(std::string(4095, 'a') + "b", size)), encode(l.unigram.tokenizer.get()));
    add("unigram_nested_1024", "one_char", a, encode(l.unigram_nested.tokenizer.get()));  // refused: the time to refuse
    const std::string& prose = text(make(prose_unit, size));
    add("regex_1024", "prose", prose, encode(l.regex.tokenizer.get()));
    add("regex_1024_busy", "one_char", text(std::string(size, 'y')), encode(l.busy_regex.tokenizer.get()));
    add("regex_qwen", "worst_repeat", text(make(" \t'", size)), encode(l.qwen_regex.tokenizer.get()));
    add("prepend_3000", "prose", prose, encode(l.prepend.tokenizer.get()));
    for (const auto& [name, chat] : l.chats) {
      const text::ChatTemplate* c = &chat;
      add(name, "one_char", a, [c](const std::string& t) {
        text::ChatTemplateInputs in;
        in.messages = {{"user", t}};
        allow_output(in, text::ChatTemplate::kMaxOutputBytes, 0);
        benchmark::DoNotOptimize(c->render(in));
      });
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Freed memory stays with the process (glibc would unmap blocks over its mmap
  // threshold and trim the heap): otherwise a 1 MB input's outputs, tens of MB, come
  // back as fresh pages the kernel zeroes on every call while a 64 KB input's are
  // reused, and the ratio would measure that, not the passes' work per byte.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  benchmark::Initialize(&argc, argv);
  static const Models* models = load(PETREL_SPM_FIXTURES_DIR);
  if (models == nullptr) {
    std::cerr << "cannot build the benchmark's models from " << PETREL_SPM_FIXTURES_DIR << "\n";
    return 1;
  }
  register_all(*models);
  static const Limits* limits = load_limits();
  if (limits == nullptr) {
    std::cerr << "cannot build the tokenizers and chat templates at their limits\n";
    return 1;
  }
  register_limits(*limits);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
