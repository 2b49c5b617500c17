// Streaming: a callback per generated token (greedy: the output as it grows; beam: the
// best live hypothesis, provisional), a final event per input, stopping early, the text
// as it is produced; from C++ and C. Run on the real en-de model (tools/en-de-model)
// and on an oracle fixture.
#include <catch2/catch.hpp>
#include <map>

#include "convert/convert.h"
#include "petrel/petrel.h"
#include "petrel/translator.h"
#include "support/test_support.h"

using namespace petrel;
using namespace petrel::test;

namespace {

std::shared_ptr<const Model> en_de_model() { return load_model(en_de_model_path()); }

const std::vector<std::string> kTexts = {"You need to specify a command.", "Open file",
                                         "Unable to correct missing packages."};

}  // namespace

TEST_CASE("streaming, greedy: each event extends the output by one token, the last is the translation",
          "[stream]") {
  auto translator = Translator::create(en_de_model());
  REQUIRE(translator.has_value());
  std::map<size_t, std::vector<int32_t>> last;
  std::map<size_t, std::string> pieces;
  std::map<size_t, int> finals;
  bool in_order = true;
  TranslateOptions o;
  o.beam_size = 1;
  o.on_token = [&](const TokenEvent& e) {
    std::vector<int32_t> ids(e.ids, e.ids + e.length);
    if (e.final) {
      ++finals[e.input];
      in_order &= ids == last[e.input];
      return true;
    }
    CHECK_FALSE(e.provisional);
    in_order &= ids.size() == last[e.input].size() + 1 && std::equal(last[e.input].begin(), last[e.input].end(), ids.begin());
    pieces[e.input] += std::string(e.piece);
    last[e.input] = ids;
    return true;
  };
  auto r = translator.value().translate_text(kTexts, o);
  REQUIRE(r.has_value());
  CHECK(in_order);
  for (size_t i = 0; i < kTexts.size(); ++i) {
    INFO(kTexts[i]);
    CHECK(last[i] == r.value()[i].hypotheses[0].ids);
    CHECK(finals[i] == 1);
    std::string joined;
    for (const auto& p : r.value()[i].hypotheses[0].pieces) joined += p;
    CHECK(pieces[i] == joined);
  }
}

TEST_CASE("streaming text: the deltas add up to the translation, beam events are provisional", "[stream]") {
  auto translator = Translator::create(en_de_model());
  REQUIRE(translator.has_value());
  for (size_t beam : {1, 4}) {
    std::map<size_t, std::string> shown;
    bool provisional = beam > 1;
    TranslateOptions o;
    o.beam_size = beam;
    o.stream_text = true;
    o.on_token = [&](const TokenEvent& e) {
      if (e.text_restarted) shown[e.input].clear();
      shown[e.input] += std::string(e.text_delta);
      CHECK(shown[e.input] == std::string(e.text));
      if (!e.final) CHECK(e.provisional == provisional);
      return true;
    };
    auto r = translator.value().translate_text(kTexts, o);
    REQUIRE(r.has_value());
    for (size_t i = 0; i < kTexts.size(); ++i) CHECK(shown[i] == r.value()[i].hypotheses[0].text);
  }
}

TEST_CASE("streaming: returning false stops that input, the others go on", "[stream]") {
  auto model = load_model(fixture_dir() + "/portable/post_swish_concat_tied-f32.petrel");
  auto translator = Translator::create(model);
  REQUIRE(translator.has_value());
  const std::vector<std::vector<int32_t>> batch = {{19, 20, 37, 19, 34, 4, 0}, {27, 18, 24, 0}};
  TranslateOptions o;
  o.beam_size = 1;
  o.max_new_tokens = o.min_new_tokens = 12;
  auto full = translator.value().translate(batch, o);
  REQUIRE(full.has_value());
  o.on_token = [](const TokenEvent& e) { return e.input != 0 || e.length < 3; };
  auto stopped = translator.value().translate(batch, o);
  REQUIRE(stopped.has_value());
  const auto& first = full.value()[0].hypotheses[0].ids;
  CHECK(stopped.value()[0].hypotheses[0].ids == std::vector<int32_t>(first.begin(), first.begin() + 3));
  CHECK(stopped.value()[1].hypotheses[0].ids == full.value()[1].hypotheses[0].ids);
}

namespace {
struct CStream {
  std::string text;
  int events = 0, finals = 0;
  size_t stop_after = 0;  // 0: never
};
int collect(void* data, const petrel_token_event* e) {
  auto* s = static_cast<CStream*>(data);
  if (e->text_restarted) s->text.clear();
  s->text += e->text_delta;
  s->finals += e->final;
  ++s->events;
  return s->stop_after == 0 || e->length < s->stop_after;
}
}  // namespace

TEST_CASE("streaming from C: petrel_translate_stream and petrel_options.on_token", "[stream][capi]") {
  TempDir tmp;
  convert::ConvertOptions o;
  o.checkpoint_dir = source_dir() + "/tools/en-de-model";
  o.output_path = tmp.file("en-de.petrel");
  convert::convert_checkpoint(o);
  petrel_model* model = nullptr;
  REQUIRE(petrel_model_load(o.output_path.c_str(), &model) == PETREL_OK);
  petrel_session* session = nullptr;
  REQUIRE(petrel_session_create(model, nullptr, 1, &session) == PETREL_OK);
  CStream stream;
  char* translation = nullptr;
  REQUIRE(petrel_translate_stream(session, kTexts[0].c_str(), nullptr, collect, &stream, &translation) == PETREL_OK);
  CHECK(stream.text == translation);
  CHECK(stream.finals == 1);
  CHECK(stream.events > 3);
  petrel_string_free(translation);

  petrel_options options;
  petrel_options_init(&options);
  options.beam_size = 1;
  options.on_token = collect;
  CStream stopped;
  stopped.stop_after = 2;
  options.on_token_data = &stopped;
  options.stream_text = 1;
  REQUIRE(petrel_translate_text(session, kTexts[2].c_str(), &options, &translation) == PETREL_OK);
  CHECK(stopped.text == translation);  // the final event carries the stopped translation
  char* full = nullptr;
  options.on_token = nullptr;
  REQUIRE(petrel_translate_text(session, kTexts[2].c_str(), &options, &full) == PETREL_OK);
  CHECK(std::string(full).size() > std::string(translation).size());
  petrel_string_free(translation);
  petrel_string_free(full);
  petrel_session_free(session);
  petrel_model_free(model);
}
