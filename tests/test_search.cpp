// The search loop's seams (forced tokens, a per-step observer, dropped finished
// rows), its order of candidates, and its answer to non-finite scores; with a
// scripted model where the rules must be seen exactly, and with real fixtures.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>

#include "convert/convert.h"
#include "decode/decoder_steps.h"
#include "format/model_file.h"
#include "kernels/isa.h"
#include "models/encoder_decoder.h"
#include "model_access.h"
#include "petrel/translator.h"
#include "support/test_support.h"

using namespace petrel;
using namespace petrel::test;
using Catch::Matchers::Contains;

namespace {

constexpr int32_t kEos = 0, kStart = 4;
constexpr size_t kVocab = 5;

// A model whose logits follow a script: sentence s prefers token 1 + (s + step) % 3
// until its step stop[s], then EOS. It tracks which sentence each row belongs to
// through select(), as the real decoder's caches do, and records the rows of each step.
class ScriptedModel final : public decode::StepModel {
 public:
  ScriptedModel(std::vector<size_t> stop, size_t beam) : stop_(std::move(stop)) {
    for (size_t r = 0; r < stop_.size() * beam; ++r) sentence_.push_back(r / beam);
  }
  void step(const int32_t*, size_t rows, size_t step, float* logits) override {
    rows_per_step.push_back(rows);
    for (size_t r = 0; r < rows; ++r) {
      const size_t s = sentence_[r];
      const size_t favourite = step >= stop_[s] ? kEos : 1 + (s + step) % 3;
      for (size_t j = 0; j < kVocab; ++j) logits[r * kVocab + j] = j == favourite ? 5.0f : static_cast<float>(j) * 0.1f;
    }
  }
  void select(const size_t* parent, size_t rows, size_t) override {
    std::vector<size_t> next(rows);
    for (size_t r = 0; r < rows; ++r) next[r] = sentence_[parent[r]];
    std::copy(next.begin(), next.end(), sentence_.begin());
  }
  std::vector<size_t> rows_per_step;

 private:
  std::vector<size_t> stop_;
  std::vector<size_t> sentence_;
};

decode::SearchOptions scripted_options(size_t beam, size_t max_new) {
  decode::SearchOptions o;
  o.beam = o.n_best = beam;
  o.max_new_tokens = max_new;
  o.decoder_start_id = kStart;
  o.eos_id = kEos;
  o.bad_word_ids = {kStart};
  return o;
}

decode::SearchResult run_scripted(ScriptedModel& model, size_t sentences, const decode::SearchOptions& o) {
  detail::ModelWeights none;
  detail::Matrix projection;
  projection.rows = kVocab;
  none.output_proj = projection;
  models::OutputVocabulary output;
  output.use_all(none);
  decode::SearchState state;
  auto r = decode::search(model, sentences, output, kernels::reference_table(), o, state);
  REQUIRE(r.has_value());
  return std::move(r.value());
}

struct Recorder final : decode::SearchObserver {
  size_t stop_at = SIZE_MAX;
  std::vector<std::pair<size_t, std::vector<int32_t>>> seen;
  bool on_step(size_t sentence, const int32_t* tokens, size_t length) override {
    seen.emplace_back(sentence, std::vector<int32_t>(tokens, tokens + length));
    return length < stop_at;
  }
};

// The portable f32 fixture's graph on one kernel path, two sentences encoded, for tests
// that drive decode_step and reorder directly.
struct PortableDecoding {
  explicit PortableDecoding(const std::string& isa)
      : model(load_model(fixture_dir() + "/portable/post_swish_concat_tied-f32.petrel")),
        graph(detail::ModelAccess::weights(*model), table(isa), pool) {
    graph.encode({{19, 20, 37, 19, 34, 4, 0}, {27, 18, 24, 0}}, enc, ws);
    everything.use_all(detail::ModelAccess::weights(*model));
  }
  static const kernels::KernelTable& table(const std::string& isa) {
    kernels::Isa id;
    REQUIRE(kernels::parse_isa(isa, &id));
    return *kernels::table_for(id);
  }
  std::shared_ptr<const Model> model;
  threads::ThreadPool pool{1};
  models::EncoderDecoder graph;
  layers::Workspace ws;
  models::EncoderOutput enc;
  models::OutputVocabulary everything;
};

}  // namespace

TEST_CASE("search: finished sentences' rows are dropped, outputs unchanged", "[search]") {
  for (size_t beam : {1, 3}) {
    ScriptedModel model({2, 5, 1}, beam);
    auto result = run_scripted(model, 3, scripted_options(beam, 8));
    INFO("beam " << beam);
    if (beam == 1) {  // sentence 2 finishes at step 2, sentence 0 at step 3, sentence 1 at step 6
      CHECK(model.rows_per_step == std::vector<size_t>{3, 3, 2, 1, 1, 1});
      CHECK(result.steps == 6);
    } else {  // weaker hypotheses live on after the best one ends, but blocks still go
      CHECK(std::is_sorted(model.rows_per_step.rbegin(), model.rows_per_step.rend()));
      CHECK(model.rows_per_step.front() == 3 * beam);
      CHECK(model.rows_per_step.back() < 3 * beam);
      for (size_t rows : model.rows_per_step) CHECK(rows % beam == 0);
    }
    CHECK(result.hypotheses[0][0].ids == std::vector<int32_t>{1, 2});
    CHECK(result.hypotheses[1][0].ids == std::vector<int32_t>{2, 3, 1, 2, 3});
    CHECK(result.hypotheses[2][0].ids == std::vector<int32_t>{3});
    for (size_t s = 0; s < 3; ++s) CHECK(result.hypotheses[s][0].ended_on_eos);
  }
}

TEST_CASE("search: a hypothesis says whether it ended on EOS or at the length limit", "[search]") {
  for (size_t beam : {1, 3}) {
    ScriptedModel model({2, 5}, beam);  // sentence 1 wants 5 tokens, the limit is 4
    auto result = run_scripted(model, 2, scripted_options(beam, 4));
    INFO("beam " << beam);
    CHECK(result.hypotheses[0][0].ended_on_eos);
    CHECK(result.hypotheses[1][0].ids.size() == 4);
    CHECK_FALSE(result.hypotheses[1][0].ended_on_eos);
  }
  // Stopped by the observer: not on EOS.
  ScriptedModel model({6}, 1);
  Recorder stopper;
  stopper.stop_at = 2;
  auto o = scripted_options(1, 8);
  o.observer = &stopper;
  CHECK_FALSE(run_scripted(model, 1, o).hypotheses[0][0].ended_on_eos);
}

TEST_CASE("search: forced tokens start the output, score 0 and bypass masks", "[search]") {
  for (size_t beam : {1, 2}) {
    ScriptedModel free_model({3, 3}, beam), forced_model({3, 3}, beam);
    auto free = run_scripted(free_model, 2, scripted_options(beam, 6));
    const std::vector<std::vector<int32_t>> forced = {{kStart, 3}, {}};  // a bad word is still forced
    auto o = scripted_options(beam, 6);
    o.forced = &forced;
    auto got = run_scripted(forced_model, 2, o);
    INFO("beam " << beam);
    CHECK(got.hypotheses[0][0].ids == std::vector<int32_t>{kStart, 3, 3});  // then the script goes on
    CHECK(got.hypotheses[1][0].ids == free.hypotheses[1][0].ids);
    CHECK(got.hypotheses[1][0].score == free.hypotheses[1][0].score);
    // Forcing the script's own choice changes only the score: the forced step adds 0.
    ScriptedModel same_model({3, 3}, beam);
    const std::vector<std::vector<int32_t>> own = {{1}, {}};
    o.forced = &own;
    auto same = run_scripted(same_model, 2, o);
    CHECK(same.hypotheses[0][0].ids == free.hypotheses[0][0].ids);
    CHECK(same.hypotheses[0][0].score > free.hypotheses[0][0].score);
  }
}

TEST_CASE("search: the observer sees each step's best hypothesis and can stop a sentence", "[search]") {
  ScriptedModel model({4, 2}, 1);
  Recorder recorder;
  auto o = scripted_options(1, 8);
  o.observer = &recorder;
  auto result = run_scripted(model, 2, o);
  // Greedy: each call extends the previous one by a token; the last one is the output.
  std::vector<int32_t> last[2];
  for (const auto& [sentence, tokens] : recorder.seen) {
    REQUIRE(tokens.size() == last[sentence].size() + 1);
    CHECK(std::equal(last[sentence].begin(), last[sentence].end(), tokens.begin()));
    last[sentence] = tokens;
  }
  CHECK(last[0] == result.hypotheses[0][0].ids);
  CHECK(last[1] == result.hypotheses[1][0].ids);

  for (size_t beam : {1, 3}) {
    ScriptedModel stopped_model({6, 6}, beam);
    Recorder stopper;
    stopper.stop_at = 2;
    o = scripted_options(beam, 8);
    o.observer = &stopper;
    auto stopped = run_scripted(stopped_model, 2, o);
    CHECK(stopped.steps == 2);
    CHECK(stopped.hypotheses[0][0].ids == std::vector<int32_t>{1, 2});
    CHECK(stopped.hypotheses[1][0].ids == std::vector<int32_t>{2, 3});
  }
}

TEST_CASE("search: candidates are ordered strictly, NaN and infinities included", "[search]") {
  using Candidate = decode::SearchState::Candidate;
  std::vector<Candidate> all;
  for (double score : {double(NAN), -double(INFINITY), -2.0, 0.0, double(INFINITY), -2.0, double(NAN)})
    for (int32_t token : {3, 1})
      for (uint32_t hyp : {0u, 1u}) all.push_back({score, token, hyp, 0.0f});
  auto before = decode::ranks_before;
  auto equivalent = [&](const Candidate& a, const Candidate& b) { return !before(a, b) && !before(b, a); };
  for (const auto& a : all) {
    CHECK_FALSE(before(a, a));  // irreflexive
    for (const auto& b : all) {
      if (before(a, b)) CHECK_FALSE(before(b, a));  // asymmetric
      for (const auto& c : all) {
        if (before(a, b) && before(b, c)) CHECK(before(a, c));  // transitive
        if (equivalent(a, b) && equivalent(b, c)) CHECK(equivalent(a, c));
      }
    }
  }
  std::sort(all.begin(), all.end(), before);
  CHECK(all.front().score == INFINITY);
  CHECK(std::isnan(all.back().score));
  CHECK(all.back().token == 3);
}

TEST_CASE("search: NaN logits from a corrupt file stop translation with a named error", "[search]") {
  TempDir tmp;
  convert::ConvertOptions o;
  o.checkpoint_dir = oracle_dir("post_swish_concat_tied");
  o.output_path = tmp.file("m.petrel");
  o.linear_dtype = o.embedding_dtype = DType::kF32;
  convert::convert_checkpoint(o);
  auto bytes = read_bytes(o.output_path);
  {
    auto model = load_model(o.output_path);
    const TensorInfo* bias = nullptr;
    for (const auto& t : model->info().tensors)
      if (t.name == "final_logits_bias") bias = &t;
    REQUIRE(bias != nullptr);
    uint32_t metadata_size = 0;
    std::memcpy(&metadata_size, bytes.data(), 4);
    const uint64_t section = detail::data_section_start(metadata_size);
    const float nan = NAN;
    std::memcpy(&bytes[section + bias->offset + 3 * sizeof(float)], &nan, sizeof nan);
  }
  auto model = Model::load_from_memory(bytes.data(), bytes.size(), "nan.petrel");
  REQUIRE(model.has_value());
  for (size_t beam : {1, 3}) {
    auto translator = Translator::create(model.value());
    REQUIRE(translator.has_value());
    TranslateOptions options;
    options.beam_size = beam;
    auto r = translator.value().translate({{5, 9, 0}, {7, 0}}, options);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == ErrorCode::kFormat);
    CHECK_THAT(r.error().message, Contains("input 1, step 1") && Contains("non-finite scores"));
  }
}

TEST_CASE("a batch translates as its sentences one at a time", "[search][oracle]") {
  const std::string isa = GENERATE(from_range(model_test_isas()));
  auto model = load_model(fixture_dir() + "/portable/post_swish_concat_tied-f32.petrel");
  auto translator = Translator::create(model, {isa, 1});
  REQUIRE(translator.has_value());
  const std::vector<std::vector<int32_t>> batch = {{19, 20, 37, 19, 34, 4, 0}, {27, 18, 24, 0}, {0}, {5, 9, 13, 0}};
  for (size_t beam : {1, 3}) {
    TranslateOptions o;
    o.beam_size = o.n_best = beam;
    o.max_new_tokens = 12;
    auto together = translator.value().translate(batch, o);
    REQUIRE(together.has_value());
    for (size_t s = 0; s < batch.size(); ++s) {
      auto alone = translator.value().translate({batch[s]}, o);
      REQUIRE(alone.has_value());
      INFO(isa << ", beam " << beam << ", sentence " << s);
      const auto& a = alone.value()[0].hypotheses;
      const auto& t = together.value()[s].hypotheses;
      REQUIRE(a.size() == t.size());
      for (size_t k = 0; k < a.size(); ++k) {
        CHECK(a[k].ids == t[k].ids);
        CHECK(a[k].score == Approx(t[k].score).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("the KV caches grow as outputs get longer, with the same results as caches sized up front", "[search]") {
  const std::string isa = GENERATE(from_range(model_test_isas()));
  PortableDecoding portable(isa);
  auto& [model, pool, graph, ws, enc, everything] = portable;
  const size_t steps = 60, vocab = model->info().target_vocab_size;
  for (DType cache : {DType::kF32, DType::kF16}) {
    std::vector<float> logits[2];
    for (size_t capacity : {size_t{60}, size_t{5}}) {  // 5 grows to 16, 32, 48, 60
      models::DecoderState st;
      graph.start_decoding(enc, {0, 0, 1}, steps, cache, st, ws, capacity);
      std::vector<int32_t> tokens = {47, 47, 47};
      std::vector<float>& out = logits[capacity == 5];
      std::vector<float> step_logits(3 * vocab);
      for (size_t t = 0; t < steps; ++t) {
        graph.decode_step(tokens.data(), 3, t, st, ws, everything, step_logits.data());
        out.insert(out.end(), step_logits.begin(), step_logits.end());
        const size_t parent[] = {1, 0, 2};  // rows swap places each step, as beams do
        graph.reorder(parent, 3, t, st);
        for (size_t r = 0; r < 3; ++r) tokens[r] = static_cast<int32_t>((t * 7 + r * 13) % (vocab - 1));
      }
      if (capacity == 5) CHECK(st.capacity == steps);
    }
    INFO(isa << ", " << to_string(cache) << " cache");
    CHECK(logits[0] == logits[1]);
  }
}

// A reorder moves lists of cache slots, never K/V: with random parents (duplicates,
// rows dropped), every row's logits are those of its own history decoded alone, and the
// caches' bytes are the same after each reorder as before it.
TEST_CASE("beam reordering moves slot lists, not keys: each row decodes as its own history alone", "[search]") {
  const std::string isa = GENERATE(from_range(model_test_isas()));
  PortableDecoding portable(isa);
  auto& [model, pool, graph, ws, enc, everything] = portable;
  const size_t steps = 14, vocab = model->info().target_vocab_size;
  std::mt19937 rng(27);
  for (DType cache : {DType::kF32, DType::kF16}) {
    INFO(isa << ", " << to_string(cache) << " cache");
    const std::vector<size_t> sentence_of_row = {0, 0, 0, 1, 1, 1, 1};
    models::DecoderState st;
    graph.start_decoding(enc, sentence_of_row, steps, cache, st, ws, 5);  // grows on the way, too
    std::vector<size_t> sentence = sentence_of_row;
    std::vector<std::vector<int32_t>> history(sentence.size());  // each row's tokens so far
    size_t rows = sentence.size();
    std::vector<float> logits(rows * vocab), alone(vocab);
    for (size_t t = 0; t < steps && rows > 0; ++t) {
      std::vector<int32_t> tokens(rows);
      for (size_t r = 0; r < rows; ++r) {
        tokens[r] = static_cast<int32_t>(rng() % (vocab - 1));
        history[r].push_back(tokens[r]);
      }
      graph.decode_step(tokens.data(), rows, t, st, ws, everything, logits.data());
      for (size_t r = 0; r < rows; ++r) {  // the naive reference: this row's history, decoded alone
        models::DecoderState one;
        layers::Workspace one_ws;
        graph.start_decoding(enc, {sentence[r]}, steps, cache, one, one_ws);
        for (size_t u = 0; u <= t; ++u) graph.decode_step(&history[r][u], 1, u, one, one_ws, everything, alone.data());
        float worst = 0;  // batched rows may round differently from one alone: tolerance
        for (size_t j = 0; j < vocab; ++j)
          worst = std::max(worst, std::abs(logits[r * vocab + j] - alone[j]) / (1 + std::abs(alone[j])));
        INFO("step " << t << ", row " << r);
        CHECK(worst < 1e-5f);
      }
      // Random parents: repeats, rows left out, and from the third step on one row fewer.
      const size_t next_rows = t >= 2 ? rows - 1 : rows;
      std::vector<size_t> parent(next_rows);
      for (size_t& p : parent) p = rng() % rows;
      const auto keys = st.self_k, values = st.self_v;
      const size_t slots = st.slots;
      graph.reorder(parent.data(), next_rows, t, st);
      CHECK(st.slots == slots);
      CHECK((st.self_k == keys && st.self_v == values));  // no K/V copied or moved
      std::vector<size_t> next_sentence(next_rows);
      std::vector<std::vector<int32_t>> next_history(next_rows);
      for (size_t r = 0; r < next_rows; ++r) {
        next_sentence[r] = sentence[parent[r]];
        next_history[r] = history[parent[r]];
      }
      sentence.swap(next_sentence);
      history.swap(next_history);
      rows = next_rows;
    }
  }
}
