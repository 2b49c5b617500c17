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
//   petrel_text_linear_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <malloc.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "convert/convert_error.h"
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
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
