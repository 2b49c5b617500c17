// tokenizer.json tokenizers (text::HfTokenizer) against transformers.js: the real Gemma 3
// and Qwen3 tokenizers on ~100,000 gettext messages in 20 locales
// (tools/reference/make_hf_tokenizer_fixtures.py made the fixtures), converted by
// petrel-convert's reader and bound as a model file's tokenizer is.
#include <catch2/catch.hpp>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "convert/convert_error.h"
#include "convert/hf_tokenizer.h"
#include "format/model_file.h"
#include "format/tokenizer_tables.h"
#include "model_access.h"
#include "petrel/generator.h"
#include "petrel/petrel.h"
#include "petrel_generated.h"
#include "support/coprocess.h"
#include "support/hf_test_support.h"
#include "support/lm_fixture.h"
#include "support/test_support.h"
#include "text/hf_tokenizer.h"

namespace {

std::string hf_fixture(const std::string& name) { return petrel::test::fixture_dir() + "/hf_tokenizer/" + name; }

// A fixture tokenizer's files, decompressed (nothing when xz may be skipped and is missing).
std::optional<petrel::convert::HfTokenizerFiles> hf_fixture_files(const std::string& name) {
  return petrel::test::hf::fixture_files(hf_fixture(name));
}

using petrel::test::hf::LoadedHfTokenizer;
using petrel::test::hf::load_hf_tokenizer;
using petrel::test::hf::unescape_line;


}  // namespace

TEST_CASE("tokenizer.json: Gemma 3, Qwen3 and Llama 3 encode and decode real text as transformers.js does",
          "[bulk][hf_tokenizer][hf_oracle]") {
  using petrel::test::ids_text;
  const std::string name = GENERATE(as<std::string>{}, "gemma3", "qwen3", "llama3");
  INFO(name);
  auto loaded = petrel::test::hf::load_fixture_tokenizer(hf_fixture(name));
  const auto lines_text = petrel::test::xz_decompress(hf_fixture("lines.txt.xz"));
  const auto expected_text = petrel::test::xz_decompress(hf_fixture(name + "/expected.bin.xz"));
  if (!loaded || !lines_text || !expected_text) return;  // PETREL_TEST_SKIP=xz
  std::vector<std::string> lines;
  {
    std::istringstream in(*lines_text);
    for (std::string line; std::getline(in, line);) lines.push_back(unescape_line(line));
  }
  REQUIRE(lines.size() >= 100000);
  const petrel::text::HfTokenizer& tok = *loaded->tokenizer;
  const std::string& expected_bytes = *expected_text;
  petrel::test::hf::FixtureReader expected{expected_bytes};
  const size_t stride = petrel::test::subset_stride();
  size_t encode_wrong = 0, decode_wrong = 0, decode_special_wrong = 0;
  std::string report;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::vector<int32_t> want(expected.u32());
    for (int32_t& id : want) id = static_cast<int32_t>(expected.u32());
    const uint32_t flags = expected.byte();
    const std::string want_text = flags & 1 ? lines[i] : expected.text();
    const std::string want_special_text = flags & 2 ? want_text : expected.text();
    if (i % stride != 0) continue;  // sanitizer and emulated runs check a subset (PETREL_TEST_SUBSET)
    auto got = tok.encode_text(lines[i], true);
    REQUIRE(got);
    if (got.value() != want && ++encode_wrong <= 5)
      report += "line " + std::to_string(i) + " '" + lines[i] + "'\n  want " + ids_text(want) + "\n  got  " +
                ids_text(got.value()) + "\n";
    auto text = tok.decode_ids(want.data(), want.size(), true);
    REQUIRE(text);
    if (text.value() != want_text && ++decode_wrong <= 5)
      report += "decode line " + std::to_string(i) + ": want '" + want_text + "' got '" + text.value() + "'\n";
    auto special_text = tok.decode_ids(want.data(), want.size(), false);
    REQUIRE(special_text);
    if (special_text.value() != want_special_text && ++decode_special_wrong <= 5)
      report += "decode (specials kept) line " + std::to_string(i) + ": want '" + want_special_text + "' got '" +
                special_text.value() + "'\n";
  }
  CHECK(expected.at == expected_bytes.size());
  INFO(report);
  CHECK(encode_wrong == 0);
  CHECK(decode_wrong == 0);
  CHECK(decode_special_wrong == 0);
}

// ---------------------------------------------------------------------------------
// A language model with a tokenizer: the decoder-only fixture gemma3_f32 (128 ids, a
// 6-token sliding window) with a small Gemma-style tokenizer.json made here (letters,
// merges into the chat template's words) and Gemma 3's real chat template.
namespace {

using json = nlohmann::json;

json small_tokenizer_json() {
  std::vector<std::string> tokens = {"<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>",
                                     "\xe2\x96\x81", "\n"};
  for (char c = 'a'; c <= 'z'; ++c) tokens.emplace_back(1, c);
  for (char c = 'A'; c <= 'Z'; ++c) tokens.emplace_back(1, c);
  for (char c = '0'; c <= '9'; ++c) tokens.emplace_back(1, c);
  for (const char* p : {".", ",", "!", "?", "'", ":"}) tokens.emplace_back(p);
  // Merges, each of two tokens already listed; their results are tokens too.
  json tokenizer = petrel::test::gemma_style_tokenizer_json(
      tokens, {{"e", "r"}, {"u", "s"}, {"us", "er"}, {"m", "o"}, {"mo", "d"}, {"e", "l"}, {"mod", "el"},
               {"t", "h"}, {"th", "e"}, {"\xe2\x96\x81", "the"}, {"i", "n"}, {"a", "n"}, {"o", "n"},
               {"r", "e"}, {"\xe2\x96\x81", "a"}, {"s", "y"}, {"sy", "s"}, {"t", "e"}, {"sys", "te"},
               {"syste", "m"}, {"\xe2\x96\x81", "i"}, {"\xe2\x96\x81i", "s"}, {"h", "i"}, {"\xe2\x96\x81", "t"}});
  REQUIRE(tokenizer["model"]["vocab"].size() <= 128);
  return tokenizer;
}

// gemma3_f32 converted with the small tokenizer and the chat template of the real
// tokenizer `chat` (gemma3 or qwen3).
std::string lm_with_tokenizer(const std::string& chat = "gemma3") {
  return petrel::test::shared_file("lm-gemma3-text-" + chat + ".petrel", [&](const std::string& out) {
    petrel::test::TempDir dir;
    petrel::test::copy_dir(petrel::test::fixture_dir() + "/decoder_only/gemma3_f32", dir.path());
    const auto real = hf_fixture_files(chat);
    REQUIRE(real);
    const json real_config = json::parse(*real->tokenizer_config);
    const json config = {{"chat_template", real_config["chat_template"]},
                         {"bos_token", "<bos>"},
                         {"eos_token", "<end_of_turn>"},
                         {"clean_up_tokenization_spaces", false}};
    std::ofstream(dir.path() + "/tokenizer.json") << small_tokenizer_json().dump();
    std::ofstream(dir.path() + "/tokenizer_config.json") << config.dump();
    petrel::convert::ConvertOptions o;
    o.checkpoint_dir = dir.path();
    o.output_path = out;
    o.linear_dtype = o.embedding_dtype = petrel::DType::kF32;
    petrel::convert::convert_checkpoint(o);
  });
}

}  // namespace

TEST_CASE("Language models take text: generate_text is the ids path with the tokenizer on both ends",
          "[hf_tokenizer][decoder_only]") {
  if (!petrel::test::xz_decompress(hf_fixture("gemma3/tokenizer_config.json.xz"))) return;
  auto model = petrel::test::load_model(lm_with_tokenizer());
  CHECK(model->info().tokenizer.kind == "huggingface");
  CHECK_FALSE(model->info().lm.chat_template.empty());
  auto generator = petrel::Generator::create(model);
  REQUIRE(generator);
  petrel::GenerateOptions o;
  o.do_sample = false;
  o.max_new_tokens = 24;
  o.ignore_eos = true;
  const std::string prompt = "the system is in the user model";
  auto text = generator.value().generate_text(prompt, o);
  REQUIRE(text);
  const auto* tok = dynamic_cast<const petrel::text::HfTokenizer*>(petrel::detail::ModelAccess::tokenizer(*model));
  REQUIRE(tok != nullptr);
  auto prompt_ids = tok->encode_text(prompt, true);
  REQUIRE(prompt_ids);
  CHECK(prompt_ids.value().front() == 2);  // <bos> from the post-processor
  CHECK(text.value().prompt_tokens == prompt_ids.value().size());
  auto ids = generator.value().generate({prompt_ids.value()}, o);
  REQUIRE(ids);
  CHECK(text.value().ids == ids.value()[0].ids);
  CHECK(text.value().text == tok->decode_ids(ids.value()[0].ids.data(), ids.value()[0].ids.size(), true).value());

  SECTION("streamed deltas add up to the text") {
    std::string streamed;
    petrel::GenerateOptions s = o;
    s.stream_text = true;
    s.on_token = [&](const petrel::TokenEvent& e) {
      streamed.append(e.text_delta);
      return true;
    };
    auto r = generator.value().generate_text(prompt, s);
    REQUIRE(r);
    CHECK(streamed == r.value().text);
    CHECK(streamed == text.value().text);
  }
  SECTION("a stop string ends the text before it") {
    const std::string& full = text.value().text;
    REQUIRE(full.size() > 6);
    const std::string stop = full.substr(full.size() / 2, 2);
    petrel::GenerateOptions s = o;
    s.stop = {stop};
    s.stream_text = true;
    std::string streamed;
    s.on_token = [&](const petrel::TokenEvent& e) {
      streamed.append(e.text_delta);
      return true;
    };
    auto r = generator.value().generate_text(prompt, s);
    REQUIRE(r);
    CHECK(r.value().ended_on_stop);
    CHECK(r.value().text == full.substr(0, full.find(stop)));
    CHECK(streamed == r.value().text);  // nothing of the stop string was shown
    s.stop = {std::string(300, 'x')};
    CHECK_FALSE(generator.value().generate_text(prompt, s));
  }
}

namespace {

petrel::Generator make_generator(const std::shared_ptr<const petrel::Model>& model) {
  auto g = petrel::Generator::create(model);
  REQUIRE(g);
  return std::move(g.value());
}

// A conversation's model (the small Gemma-style one), and a second Generator that runs a
// whole rendered history afresh: what each of the conversation's replies must equal.
struct FreshRuns {
  std::shared_ptr<const petrel::Model> model = petrel::test::load_model(lm_with_tokenizer());
  petrel::Generator generator = make_generator(model);  // the conversation's
  petrel::Generator fresh = make_generator(model);
  const petrel::text::HfTokenizer* tok =
      dynamic_cast<const petrel::text::HfTokenizer*>(petrel::detail::ModelAccess::tokenizer(*model));

  // The prompt of `history` and the user's `message`, rendered (the assistant's turn
  // opened) and tokenized as a conversation's reply does.
  std::vector<int32_t> prompt(std::vector<petrel::ChatMessage> history, const std::string& message) {
    history.push_back({"user", message});
    auto rendered = fresh.apply_chat_template(history, true);
    REQUIRE(rendered);
    CHECK(rendered.value().rfind("<start_of_turn>model\n") == rendered.value().size() - 21);
    auto ids = tok->encode_text(rendered.value(), false);
    REQUIRE(ids);
    return ids.value();
  }
  // The fresh Generator's ids after `prompt`.
  std::vector<int32_t> run(const std::vector<int32_t>& prompt, const petrel::GenerateOptions& o) {
    auto want = fresh.generate({prompt}, o);
    REQUIRE(want);
    return want.value()[0].ids;
  }
};

}  // namespace

TEST_CASE("A conversation reuses its KV cache across turns and answers as a fresh run of the whole history",
          "[hf_tokenizer][decoder_only]") {
  if (!petrel::test::xz_decompress(hf_fixture("gemma3/tokenizer_config.json.xz"))) return;
  FreshRuns runs;
  petrel::GenerateOptions o;
  o.do_sample = false;
  o.max_new_tokens = GENERATE(as<size_t>{}, 5, 60);  // 60: the history outgrows the 6-token window's ring
  o.kv_cache_f16 = false;
  auto chat = petrel::Conversation::create(runs.generator, "the system");
  REQUIRE(chat);
  size_t reused_total = 0;
  for (const char* message : {"hi the user", "is the model in", "the end"}) {
    const std::vector<int32_t> prompt = runs.prompt(chat.value().messages(), message);
    auto reply = chat.value().reply(message, o);
    REQUIRE(reply);
    reused_total += reply.value().reused_tokens;
    CHECK(reply.value().prompt_tokens == prompt.size());
    CHECK(reply.value().ids == runs.run(prompt, o));
  }
  CHECK(reused_total > 0);
  CHECK(chat.value().messages().size() == 7);  // system + 3 x (user, assistant)
  CHECK(chat.value().messages()[2].role == "assistant");
}

TEST_CASE("A conversation past the model's positions drops its oldest exchanges and answers as a fresh run",
          "[hf_tokenizer][decoder_only]") {
  if (!petrel::test::xz_decompress(hf_fixture("gemma3/tokenizer_config.json.xz"))) return;
  FreshRuns runs;
  const size_t positions = runs.model->info().max_positions;
  petrel::GenerateOptions o;
  o.do_sample = false;
  o.max_new_tokens = 16;
  o.ignore_eos = true;  // every reply takes its 16 tokens
  auto chat = petrel::Conversation::create(runs.generator, "the system");
  REQUIRE(chat);
  const std::string message = "is the model in the user system";
  size_t drops = 0;
  for (size_t turn = 0; turn < 100 && drops < 3; ++turn) {
    INFO("turn " << turn);
    const std::vector<petrel::ChatMessage> before = chat.value().messages();
    auto dropped = chat.value().make_room(message, o.max_new_tokens);
    REQUIRE(dropped);
    CHECK(chat.value().messages().size() == before.size() - 2 * dropped.value());
    CHECK(chat.value().messages()[0].role == "system");
    // What is left, with the message, leaves the room asked for; after a drop, half the
    // positions free, and one exchange more would not.
    const std::vector<int32_t> prompt = runs.prompt(chat.value().messages(), message);
    CHECK(prompt.size() + o.max_new_tokens <= positions);
    if (dropped.value() > 0) {
      ++drops;
      CHECK(runs.prompt(before, message).size() + o.max_new_tokens > positions);  // it had to drop
      CHECK(prompt.size() + positions / 2 <= positions);
      std::vector<petrel::ChatMessage> one_more = chat.value().messages();
      one_more.insert(one_more.begin() + 1, before.begin() + 1 + 2 * (dropped.value() - 1),
                      before.begin() + 1 + 2 * dropped.value());
      CHECK(runs.prompt(one_more, message).size() + positions / 2 > positions);
    }
    // The reply: as a fresh Generator's run of that history (the caches, which held the
    // dropped exchanges, are reused only as far as the prompt is unchanged).
    auto reply = chat.value().reply(message, o);
    REQUIRE(reply);
    CHECK(reply.value().ids.size() == o.max_new_tokens);
    CHECK(reply.value().ids == runs.run(prompt, o));
  }
  CHECK(drops == 3);
  // reply() takes make_room's rendering only for make_room's message.
  REQUIRE(chat.value().make_room(message, o.max_new_tokens));
  const std::vector<petrel::ChatMessage> history = chat.value().messages();
  const std::vector<int32_t> other_prompt = runs.prompt(history, "the user");
  REQUIRE(other_prompt.size() != runs.prompt(history, message).size());
  auto other = chat.value().reply("the user", o);
  REQUIRE(other);
  CHECK(other.value().prompt_tokens == other_prompt.size());
  CHECK(other.value().ids == runs.run(other_prompt, o));
  // A reply that fails leaves the conversation as it was; the next renders it afresh.
  REQUIRE(chat.value().make_room(message, o.max_new_tokens));
  const std::vector<petrel::ChatMessage> before_failure = chat.value().messages();
  petrel::GenerateOptions refused_options = o;
  refused_options.stop = {""};
  REQUIRE_FALSE(chat.value().reply(message, refused_options));
  CHECK(chat.value().messages().size() == before_failure.size());
  const std::vector<int32_t> again = runs.prompt(before_failure, message);
  auto after_failure = chat.value().reply(message, o);
  REQUIRE(after_failure);
  CHECK(after_failure.value().prompt_tokens == again.size());
  CHECK(after_failure.value().ids == runs.run(again, o));
  // A reply longer than even the message alone leaves room for: every exchange dropped,
  // and the reply takes the positions left.
  petrel::GenerateOptions longest = o;
  longest.max_new_tokens = positions;
  const size_t exchanges = (chat.value().messages().size() - 1) / 2;
  REQUIRE(exchanges > 0);
  auto all = chat.value().make_room(message, longest.max_new_tokens);
  REQUIRE(all);
  CHECK(all.value() == exchanges);
  REQUIRE(chat.value().messages().size() == 1);
  auto reply = chat.value().reply(message, longest);
  REQUIRE(reply);
  CHECK(reply.value().prompt_tokens + reply.value().ids.size() == positions);
  // A message that alone leaves no room: nothing dropped, and the reply says why.
  const std::string huge(positions * 4, 'a');
  const size_t kept = chat.value().messages().size();
  auto none = chat.value().make_room(huge, o.max_new_tokens);
  REQUIRE(none);
  CHECK(none.value() == 0);
  CHECK(chat.value().messages().size() == kept);
  auto refused = chat.value().reply(huge, o);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message, Catch::Contains("positions"));
  CHECK(chat.value().messages().size() == kept);
}

TEST_CASE("Chat template flags reach the template: Qwen3's enable_thinking", "[hf_tokenizer][decoder_only]") {
  if (!petrel::test::xz_decompress(hf_fixture("qwen3/tokenizer_config.json.xz"))) return;
  auto generator = petrel::Generator::create(petrel::test::load_model(lm_with_tokenizer("qwen3")));
  REQUIRE(generator);
  const std::vector<petrel::ChatMessage> messages = {{"user", "hi"}};
  auto thinking = generator.value().apply_chat_template(messages, true);
  auto not_thinking = generator.value().apply_chat_template(messages, true, {{"enable_thinking", false}});
  REQUIRE(thinking);
  REQUIRE(not_thinking);
  CHECK(thinking.value() == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  CHECK(not_thinking.value() == thinking.value() + "<think>\n\n</think>\n\n");
  auto chat = petrel::Conversation::create(generator.value(), "", {{"enable_thinking", false}});
  CHECK(chat);
}

TEST_CASE("The chat template's refusals and a model without a tokenizer are errors", "[hf_tokenizer][decoder_only]") {
  if (!petrel::test::xz_decompress(hf_fixture("gemma3/tokenizer_config.json.xz"))) return;
  auto model = petrel::test::load_model(lm_with_tokenizer());
  auto generator = petrel::Generator::create(model);
  REQUIRE(generator);
  // Gemma's template: roles must alternate user/assistant.
  auto bad = generator.value().apply_chat_template({{"user", "a"}, {"user", "b"}}, true);
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message, Catch::Contains("alternate"));

  auto plain = petrel::test::load_model(petrel::test::shared_file("lm-gemma3-ids.petrel", [](const std::string& out) {
    petrel::convert::ConvertOptions o;
    o.checkpoint_dir = petrel::test::fixture_dir() + "/decoder_only/gemma3_f32";
    o.output_path = out;
    petrel::convert::convert_checkpoint(o);
  }));
  auto ids_only = petrel::Generator::create(plain);
  REQUIRE(ids_only);
  auto text = ids_only.value().generate_text("hi", {});
  REQUIRE_FALSE(text);
  CHECK_THAT(text.error().message, Catch::Contains("no tokenizer"));
  CHECK_FALSE(petrel::Conversation::create(ids_only.value()));
}

TEST_CASE("A hostile tokenizer.json table is refused by field, and corrupt hash slots give tokens, not crashes",
          "[hf_tokenizer]") {
  petrel::convert::HfTokenizerFiles files;
  files.dir = "small";
  files.tokenizer_json = small_tokenizer_json().dump();
  const std::vector<uint8_t> good = petrel::convert::hf_tokenizer_buffer(files);
  auto mutated = [&](const std::function<bool(petrel::fb::Tokenizer*)>& change) {
    std::vector<uint8_t> bytes = good;
    auto* root = flatbuffers::GetMutableRoot<petrel::fb::Tokenizer>(bytes.data());
    REQUIRE(change(root));
    return bytes;
  };
  auto bind = [](const std::vector<uint8_t>& bytes) {
    const auto* root = flatbuffers::GetRoot<petrel::fb::Tokenizer>(bytes.data());
    return petrel::detail::bind_hf_tokenizer(*root, root->vocab_spans()->size(), "hostile.petrel");
  };
  REQUIRE(bind(good));
  struct Case {
    const char* field;
    std::function<bool(petrel::fb::Tokenizer*)> change;
  };
  const std::vector<Case> cases = {
      {"prefix_ids[0]", [](petrel::fb::Tokenizer* t) { t->mutable_hf()->mutable_prefix_ids()->Mutate(0, 5000);
         return true;
       }},
      {"unk_id", [](petrel::fb::Tokenizer* t) { return t->mutable_hf()->mutate_unk_id(-7); }},
      {"added_tokens[1].id",
       [](petrel::fb::Tokenizer* t) { return t->mutable_hf()->mutable_added_tokens()->GetMutableObject(1)->mutate_id(128); }},
      {"normalizers[0].kind",
       [](petrel::fb::Tokenizer* t) {
         return t->mutable_hf()->mutable_normalizers()->GetMutableObject(0)->mutate_kind(
             static_cast<petrel::fb::HfNormalizerKind>(77));
       }},
      {"decoders[1].kind",
       [](petrel::fb::Tokenizer* t) {
         return t->mutable_hf()->mutable_decoders()->GetMutableObject(1)->mutate_kind(
             static_cast<petrel::fb::HfDecoderKind>(0));
       }},
      {"merge_slots", [](petrel::fb::Tokenizer* t) { return t->mutable_hf()->mutate_merge_max_probe(1u << 30); }},
      {"token_slots", [](petrel::fb::Tokenizer* t) { return t->mutable_hf()->mutate_token_max_probe(1u << 30); }},
      // below the capacity, past the bound on a lookup's work
      {"token_slots: max_probe 65 exceeds the limit of 64",
       [](petrel::fb::Tokenizer* t) { return t->mutable_hf()->mutate_token_max_probe(petrel::detail::kMaxHashProbe + 1); }},
  };
  for (const Case& c : cases) {
    INFO(c.field);
    auto bound = bind(mutated(c.change));
    REQUIRE_FALSE(bound);
    CHECK_THAT(bound.error().message, Catch::Contains("hostile.petrel") && Catch::Contains(c.field));
  }
  // Slots and merges pointing anywhere: lookups check what they read.
  std::vector<uint8_t> scrambled = mutated([](petrel::fb::Tokenizer* t) {
    auto* hf = t->mutable_hf();
    for (uint32_t i = 0; i < hf->merge_slots()->size(); ++i) hf->mutable_merge_slots()->Mutate(i, i * 2654435761u);
    for (uint32_t i = 0; i < hf->token_slots()->size(); ++i) hf->mutable_token_slots()->Mutate(i, i % 7 ? i * 40503u : 0);
    for (uint32_t i = 0; i < hf->merges()->size(); ++i) {
      auto* m = hf->mutable_merges()->GetMutableObject(i);
      m->mutate_result(static_cast<int32_t>(i * 1000003u));
    }
    return true;
  });
  // The stored added-token trie: checked to be exactly the trie of the contents when the
  // tokenizer is built.
  for (const auto& [field, change] : std::vector<std::pair<std::string, std::function<bool(petrel::fb::Tokenizer*)>>>{
           {"added_trie_nodes[", [](petrel::fb::Tokenizer* t) {
              auto* nodes = t->mutable_hf()->mutable_added_trie_nodes();
              auto* last = nodes->GetMutableObject(nodes->size() - 2);
              last->mutate_id(last->id() == 0 ? 1 : 0);
              return true;
            }},
           {"added_trie_", [](petrel::fb::Tokenizer* t) {  // a label: found as a node whose path is wrong
              auto* labels = t->mutable_hf()->mutable_added_trie_labels();
              return labels->Mutate(1, static_cast<uint8_t>(labels->Get(1) ^ 0x20)), true;
            }}}) {
    INFO(field);
    const std::vector<uint8_t> corrupt_bytes = mutated(change);  // the tables view it
    auto corrupt = bind(corrupt_bytes);
    REQUIRE(corrupt);
    auto built = petrel::text::HfTokenizer::create(std::move(corrupt.value()), "hostile.petrel");
    REQUIRE_FALSE(built);
    CHECK_THAT(built.error().message, Catch::Contains("hostile.petrel: tokenizer.hf." + field));
  }

  auto tables = bind(scrambled);
  REQUIRE(tables);
  auto tokenizer = petrel::text::HfTokenizer::create(std::move(tables.value()), "scrambled");
  REQUIRE(tokenizer);
  auto ids = tokenizer.value()->encode_text("the system is in the user model", true);
  if (ids)
    for (int32_t id : ids.value()) CHECK((id >= 0 && id < 128));
}

TEST_CASE("Tokens built to collide in the lookup table grow it, or fail conversion: lookups stay short",
          "[hf_tokenizer]") {
  // The small tokenizer plus 80 tokens whose hashes agree in their low `bits` bits: at
  // the converter's first capacity (a power of two >= 2 x the entries, here 512) they
  // form one run of 80 slots, past the 64 a lookup may read.
  const json base = small_tokenizer_json();
  auto colliding = [](int bits) {
    std::vector<std::string> tokens;
    const uint32_t mask = (1u << bits) - 1;
    for (uint32_t n = 0; tokens.size() < 80; ++n) {
      const std::string token = "c" + std::to_string(n);
      if ((petrel::detail::hf_token_hash(token) & mask) == (petrel::detail::hf_token_hash("c0") & mask))
        tokens.push_back(token);
    }
    return tokens;
  };
  auto with_tokens = [&](const std::vector<std::string>& extra) {
    json j = base;
    size_t id = j["model"]["vocab"].size();
    REQUIRE(id + extra.size() > 128);  // 180-odd entries: a first capacity of 512
    REQUIRE(id + extra.size() <= 256);
    for (const std::string& t : extra) j["model"]["vocab"][t] = id++;
    petrel::convert::HfTokenizerFiles files;
    files.dir = "colliding";
    files.tokenizer_json = j.dump();
    return petrel::convert::hf_tokenizer_buffer(files);
  };
  // Low 9 bits alike: doubling the table splits the run.
  const std::vector<std::string> nine = colliding(9);
  const std::vector<uint8_t> bytes = with_tokens(nine);
  const auto* root = flatbuffers::GetRoot<petrel::fb::Tokenizer>(bytes.data());
  CHECK(root->hf()->token_slots()->size() >= 1024);
  CHECK(root->hf()->token_max_probe() <= petrel::detail::kMaxHashProbe);
  auto tables = petrel::detail::bind_hf_tokenizer(*root, root->vocab_spans()->size(), "colliding");
  REQUIRE(tables);
  auto t = petrel::text::HfTokenizer::create(std::move(tables.value()), "colliding");
  REQUIRE(t);
  for (size_t i = 0; i < nine.size(); ++i) {
    INFO(nine[i]);
    CHECK(t.value()->token_id(nine[i]) == std::optional<int32_t>(static_cast<int32_t>(root->vocab_spans()->size() - nine.size() + i)));
  }
  // Low 13 bits alike: one run at every capacity up to 1/32 load.
  try {
    with_tokens(colliding(13));
    FAIL("converted");
  } catch (const petrel::convert::ConvertError& e) {
    CHECK_THAT(e.what(), Catch::Contains("colliding/tokenizer.json: the vocabulary: more than 64 entries collide"));
  }
}

TEST_CASE("A step's string past the loader's limit is refused by the converter, naming the field", "[hf_tokenizer]") {
  const std::string long_text(petrel::detail::kMaxPieceBytes + 1, 'x');
  const json steps[] = {
      {{"normalizer", {{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", long_text}}}},
      {{"normalizer", {{"type", "Replace"}, {"pattern", {{"Regex", long_text}}}, {"content", "b"}}}},
      {{"normalizer", {{"type", "Prepend"}, {"prepend", long_text}}}},
      {{"decoder", {{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", long_text}}}},
  };
  for (const json& step : steps) {
    json j = small_tokenizer_json();
    for (const auto& [key, value] : step.items()) j[key] = value;
    INFO(step.dump().substr(0, 80));
    petrel::convert::HfTokenizerFiles files;
    files.dir = "long";
    files.tokenizer_json = j.dump();
    try {
      petrel::convert::hf_tokenizer_buffer(files);
      FAIL("converted");
    } catch (const petrel::convert::ConvertError& e) {
      CHECK_THAT(e.what(), Catch::Contains("long/tokenizer.json: ") && Catch::Contains("more than 4096"));
    }
  }
  // At the limit: converted, and the engine binds it.
  json j = small_tokenizer_json();
  j["normalizer"] = {{"type", "Prepend"}, {"prepend", std::string(petrel::detail::kMaxPieceBytes, 'x')}};
  petrel::convert::HfTokenizerFiles files;
  files.dir = "at-limit";
  files.tokenizer_json = j.dump();
  const std::vector<uint8_t> bytes = petrel::convert::hf_tokenizer_buffer(files);
  const auto* root = flatbuffers::GetRoot<petrel::fb::Tokenizer>(bytes.data());
  CHECK(petrel::detail::bind_hf_tokenizer(*root, root->vocab_spans()->size(), "at-limit"));
}

TEST_CASE("Added tokens of equal content: the last one is matched, as transformers.js's map keeps it",
          "[hf_tokenizer]") {
  json j = small_tokenizer_json();
  // "<unk>" listed again with the id of "<eos>" and lstrip: the later entry wins.
  j["added_tokens"].push_back({{"id", 1}, {"content", "<unk>"}, {"lstrip", true}, {"special", true}});
  petrel::convert::HfTokenizerFiles files;
  files.dir = "dup";
  files.tokenizer_json = j.dump();
  const std::vector<uint8_t> bytes = petrel::convert::hf_tokenizer_buffer(files);
  const auto* root = flatbuffers::GetRoot<petrel::fb::Tokenizer>(bytes.data());
  REQUIRE(root->hf()->added_trie_nodes() != nullptr);
  auto tables = petrel::detail::bind_hf_tokenizer(*root, root->vocab_spans()->size(), "dup");
  REQUIRE(tables);
  auto t = petrel::text::HfTokenizer::create(std::move(tables.value()), "dup");
  REQUIRE(t);
  auto ids = t.value()->encode_text("a <unk>", false);
  REQUIRE(ids);
  CHECK(ids.value() == std::vector<int32_t>{t.value()->token_id("a").value(), 1});  // lstrip took the space
}

namespace hf_flags_test {
std::unique_ptr<petrel::text::HfTokenizer> tokenizer_of(const json& j, std::vector<uint8_t>& bytes) {
  petrel::convert::HfTokenizerFiles files;
  files.dir = "flags";
  files.tokenizer_json = j.dump();
  bytes = petrel::convert::hf_tokenizer_buffer(files);
  const auto* root = flatbuffers::GetRoot<petrel::fb::Tokenizer>(bytes.data());
  auto tables = petrel::detail::bind_hf_tokenizer(*root, root->vocab_spans()->size(), "flags");
  REQUIRE(tables);
  auto t = petrel::text::HfTokenizer::create(std::move(tables.value()), "flags");
  REQUIRE(t);
  return std::move(t.value());
}
std::vector<int32_t> ids_of(const petrel::text::HfTokenizer& t, const std::string& text) {
  auto ids = t.encode_text(text, false);
  REQUIRE(ids);
  return ids.value();
}
std::vector<int32_t> joined(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
}  // namespace hf_flags_test

TEST_CASE("Added tokens' single_word and normalized flags follow tokenizers' AddedVocabulary",
          "[hf_tokenizer]") {
  using namespace hf_flags_test;
  std::vector<uint8_t> plain_bytes, flagged_bytes;
  const json plain_json = small_tokenizer_json();
  const auto plain = tokenizer_of(plain_json, plain_bytes);
  const int32_t mo = plain->token_id("mo").value();
  json j = plain_json;
  const int32_t next_id = static_cast<int32_t>(plain->vocab_size());
  // "mo", a vocabulary token, added as a single word; "is in", a new normalized one
  // (the normalizer makes its space U+2581, and it is matched so in normalized text).
  j["added_tokens"].push_back({{"id", mo}, {"content", "mo"}, {"single_word", true}, {"normalized", false}});
  j["added_tokens"].push_back({{"id", next_id}, {"content", "is in"}, {"normalized", true}});
  const auto flagged = tokenizer_of(j, flagged_bytes);

  // single_word: matched alone, not inside "model" or "amo" or "mo_" (\w includes '_' and
  // letters of any script), matched beside punctuation and spaces.
  CHECK(ids_of(*flagged, "mo") == std::vector<int32_t>{mo});
  CHECK(ids_of(*flagged, "model") == ids_of(*plain, "model"));
  CHECK(ids_of(*flagged, "amo") == ids_of(*plain, "amo"));
  CHECK(ids_of(*flagged, "mo\xc3\xa9") == ids_of(*plain, "mo\xc3\xa9"));  // "moé"
  CHECK(ids_of(*flagged, "mo model") == joined({mo}, ids_of(*plain, " model")));
  CHECK(ids_of(*flagged, "a,mo!") == joined(joined(ids_of(*plain, "a,"), {mo}), ids_of(*plain, "!")));
  // normalized: not found in the raw text's "is in" by the raw pass, found in the
  // normalized section ("this\u2581is\u2581in": the leftmost match starts at the second "is").
  CHECK(ids_of(*flagged, "this is in") == joined(ids_of(*plain, "this "), {next_id}));
  CHECK(ids_of(*flagged, "is in the") == joined({next_id}, ids_of(*plain, " the")));
  CHECK(ids_of(*flagged, "isin") == ids_of(*plain, "isin"));
  // Its stored trie covers the raw added tokens only.
  const auto* root = flatbuffers::GetRoot<petrel::fb::Tokenizer>(flagged_bytes.data());
  CHECK(root->hf()->added_tokens()->size() == plain_json["added_tokens"].size() + 2);
}

TEST_CASE("A regex that rescans the text for every match is refused on a long text, not run in quadratic time",
          "[hf_tokenizer]") {
  using namespace hf_flags_test;
  json j = small_tokenizer_json();
  // `a*b|a` on "aaa...": the preferred alternative runs to the end of the a's and fails
  // for each one-letter match (Rust's regex and Oniguruma take quadratic time here).
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "a*b|a"}}}, {"behavior", "Isolated"}, {"invert", false}};
  std::vector<uint8_t> bytes;
  const auto t = tokenizer_of(j, bytes);
  CHECK(ids_of(*t, "aaab aa").size() == 7);  // short texts: as before ("aaab", " ", "a", "a": no merges of them)
  auto long_text = t->encode_text(std::string(size_t{1} << 18, 'a'), false);
  REQUIRE_FALSE(long_text);
  CHECK_THAT(long_text.error().message, Catch::Contains("tokenizer.hf.pre_tokenizers[0]") && Catch::Contains("rescans"));
  // A normalizer's regex likewise.
  j = small_tokenizer_json();
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "a*b|a"}}}, {"content", "x"}};
  const auto n = tokenizer_of(j, bytes);
  auto normalized = n->encode_text(std::string(size_t{1} << 18, 'a'), false);
  REQUIRE_FALSE(normalized);
  CHECK_THAT(normalized.error().message, Catch::Contains("tokenizer.hf.normalizers[0]"));
}

namespace hf_budget_test {
using petrel::detail::HfTokenizerTables;

// A tokenizer and the converted buffer its tables view.
struct Edited {
  std::vector<uint8_t> bytes;
  petrel::Result<std::unique_ptr<petrel::text::HfTokenizer>> tokenizer;
};

// The tokenizer of `j` with its bound tables changed by `edit` first: steps as a hostile
// model file's loader hands them over (the converter refuses some, such as a Metaspace
// replacement of more than one character).
Edited create_edited(const json& j, const std::function<void(HfTokenizerTables&)>& edit) {
  petrel::convert::HfTokenizerFiles files;
  files.dir = "budget";
  files.tokenizer_json = j.dump();
  std::vector<uint8_t> bytes = petrel::convert::hf_tokenizer_buffer(files);
  const auto* root = flatbuffers::GetRoot<petrel::fb::Tokenizer>(bytes.data());
  auto tables = petrel::detail::bind_hf_tokenizer(*root, root->vocab_spans()->size(), "budget");
  REQUIRE(tables);
  edit(tables.value());
  auto tokenizer = petrel::text::HfTokenizer::create(std::move(tables.value()), "budget");
  return Edited{std::move(bytes), std::move(tokenizer)};  // (the buffer moves, its bytes stay put)
}

petrel::detail::HfNormalizerStep replace_normalizer(std::string_view pattern, std::string_view content) {
  petrel::detail::HfNormalizerStep step;
  step.kind = petrel::detail::HfNormalizerKind::kReplace;
  step.pattern = pattern;
  step.content = content;
  return step;
}

std::string message_of(const Edited& e) { return e.tokenizer ? "" : e.tokenizer.error().message; }
}  // namespace hf_budget_test

TEST_CASE("A step that would make the text too long is refused by name before it is built, modest growth is not",
          "[hf_tokenizer]") {
  using namespace hf_flags_test;
  using namespace hf_budget_test;
  using Catch::Contains;
  // The longest string a file may hold: a step writing it for each "a" or space, twice
  // over, would multiply a text by 16M (and used to end in std::bad_alloc).
  const std::string big(4096, 'a'), spaces(4096, ' ');
  const json plain_json = small_tokenizer_json();
  std::vector<uint8_t> plain_bytes;
  const auto plain = tokenizer_of(plain_json, plain_bytes);
  const int32_t a = plain->token_id("a").value();
  auto grow_a = [&](int steps) {
    return [&, steps](HfTokenizerTables& t) {
      for (int i = 0; i < steps; ++i) t.normalizers.push_back(replace_normalizer("a", big));
    };
  };

  // Normalizers, at load: a `normalized` added token's content is normalized then. Its
  // one byte may grow by 16 + 4096: once is 4095, the second step would make 16 MiB.
  json with_added = plain_json;
  with_added["added_tokens"].push_back({{"id", a}, {"content", "a"}, {"normalized", true}});
  const Edited load = create_edited(with_added, grow_a(2));
  REQUIRE_FALSE(load.tokenizer);
  CHECK(load.tokenizer.error().code == petrel::ErrorCode::kFormat);
  CHECK_THAT(message_of(load), Contains("budget: tokenizer.hf.normalizers[2] (Replace) would make the text longer than "
                                        "4113 bytes") &&
                                   Contains("added_tokens[6].content"));
  // ... and encoding: "aa" may grow by 32 + 4096.
  const Edited once = create_edited(with_added, grow_a(1));
  REQUIRE(once.tokenizer);
  CHECK(ids_of(*once.tokenizer.value(), "a") == std::vector<int32_t>{a});  // the added token, as normalized
  auto twice = once.tokenizer.value()->encode_text("aa", false);
  REQUIRE_FALSE(twice);
  CHECK(twice.error().code == petrel::ErrorCode::kInvalidArgument);
  CHECK_THAT(twice.error().message, Contains("tokenizer.hf.normalizers[1] (Replace) would make the text longer than "
                                             "4130 bytes"));
  // Modest growth: each "a" four times, on a short text and on 64 KiB (192 KiB more).
  const Edited modest = create_edited(plain_json, [](HfTokenizerTables& t) {
    t.normalizers.push_back(replace_normalizer("a", "aaaa"));
  });
  REQUIRE(modest.tokenizer);
  CHECK(ids_of(*modest.tokenizer.value(), "banana") == ids_of(*plain, "baaaanaaaanaaaa"));
  CHECK(ids_of(*modest.tokenizer.value(), std::string(size_t{64} << 10, 'a')).size() > 1);

  // Metaspace (a pre-tokenizer): each space becomes the replacement. "a b" may grow by
  // 48 + 4096: the first step adds 4095, the second would make 16 MiB.
  auto metaspace = [&](int steps, std::string_view replacement) {
    return [steps, replacement](HfTokenizerTables& t) {
      petrel::detail::HfPreTokenizerStep step;
      step.kind = petrel::detail::HfPreTokenizerKind::kMetaspace;
      step.replacement = replacement;
      t.normalizers.clear();  // (the small tokenizer's makes its spaces U+2581)
      t.pre_tokenizers.assign(static_cast<size_t>(steps), step);
    };
  };
  const Edited meta_once = create_edited(plain_json, metaspace(1, spaces));
  REQUIRE(meta_once.tokenizer);
  CHECK(meta_once.tokenizer.value()->encode_text("a b", false));
  const Edited meta_twice = create_edited(plain_json, metaspace(2, spaces));
  REQUIRE(meta_twice.tokenizer);
  auto meta_ids = meta_twice.tokenizer.value()->encode_text("a b", false);
  REQUIRE_FALSE(meta_ids);
  CHECK_THAT(meta_ids.error().message, Contains("tokenizer.hf.pre_tokenizers[1] (Metaspace) would make the text longer "
                                                "than 4147 bytes"));
  // Modest: U+2581 (3 bytes) for each space, as Llama 2 and T5 do, over 64 KiB of spaces.
  const Edited meta_modest = create_edited(plain_json, metaspace(1, "\xe2\x96\x81"));
  REQUIRE(meta_modest.tokenizer);
  CHECK(ids_of(*meta_modest.tokenizer.value(), "the model") == ids_of(*plain, "the model"));
  CHECK(ids_of(*meta_modest.tokenizer.value(), std::string(size_t{64} << 10, ' ')).size() > 1);

  // Decoders: Replace likewise, per token; the one-byte token "a" may grow by 16 + 4096.
  petrel::detail::HfDecoderStep replace;
  replace.kind = petrel::detail::HfDecoderKind::kReplace;
  replace.pattern = "a";
  replace.content = big;
  const Edited dec_once = create_edited(plain_json, [&](HfTokenizerTables& t) { t.decoders.assign(1, replace); });
  REQUIRE(dec_once.tokenizer);
  auto dec_text = dec_once.tokenizer.value()->decode_ids(&a, 1, true);
  REQUIRE(dec_text);
  CHECK(dec_text.value() == big);
  const Edited dec_twice = create_edited(plain_json, [&](HfTokenizerTables& t) { t.decoders.assign(2, replace); });
  REQUIRE(dec_twice.tokenizer);
  auto dec_bad = dec_twice.tokenizer.value()->decode_ids(&a, 1, true);
  REQUIRE_FALSE(dec_bad);
  CHECK_THAT(dec_bad.error().message, Contains("tokenizer.hf.decoders[1] (Replace) would make the text longer than "
                                               "4113 bytes"));
  replace.content = "aa";  // modest
  const Edited dec_modest = create_edited(plain_json, [&](HfTokenizerTables& t) { t.decoders.assign(1, replace); });
  REQUIRE(dec_modest.tokenizer);
  const std::vector<int32_t> banana = ids_of(*plain, "banana");
  auto doubled = dec_modest.tokenizer.value()->decode_ids(banana.data(), banana.size(), true);
  REQUIRE(doubled);
  CHECK(doubled.value() == "baanaanaa");
  // WordPiece's space before each token is a byte, but 64 such steps would add 64 per
  // token: 1000 one-byte tokens may grow by 16000 + 4096, 999 a step, so the 21st stops.
  petrel::detail::HfDecoderStep wordpiece;
  wordpiece.kind = petrel::detail::HfDecoderKind::kWordPiece;
  wordpiece.prefix = "##";
  const Edited spaced = create_edited(plain_json, [&](HfTokenizerTables& t) { t.decoders.assign(64, wordpiece); });
  REQUIRE(spaced.tokenizer);
  const std::vector<int32_t> many_a(1000, a);
  auto spaced_text = spaced.tokenizer.value()->decode_ids(many_a.data(), many_a.size(), true);
  REQUIRE_FALSE(spaced_text);
  CHECK_THAT(spaced_text.error().message, Contains("tokenizer.hf.decoders[20] (WordPiece) would make the text longer"));
}

TEST_CASE("A regex's work is bounded: a pattern past 1024 instructions is refused at load, one at the limit runs "
          "within the call's steps",
          "[hf_tokenizer]") {
  using namespace hf_flags_test;
  using namespace hf_budget_test;
  using Catch::Contains;
  const json plain_json = small_tokenizer_json();
  std::vector<uint8_t> plain_bytes;
  const auto plain = tokenizer_of(plain_json, plain_bytes);
  // 21 bytes of counted repetition that compiled to 800k instructions, all alive at each
  // code point: 51 s to load a file normalizing one 4096-byte added token with it.
  json j = plain_json;
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "(?:(?:.?){1000}){400}"}}}, {"content", "a"}};
  const Edited expands = create_edited(j, [](HfTokenizerTables&) {});
  REQUIRE_FALSE(expands.tokenizer);
  CHECK_THAT(message_of(expands),
             Contains("tokenizer.hf.normalizers[0].pattern") && Contains("more than 1024 instructions"));
  // 1024 instructions, every thread alive at each code point while no "x" ends a match
  // (more steps per byte than HfTokenizer::kRegexStepsPerByte: test_split_regex.cpp
  // counts them): a few characters are within the call's slack, 4096 bytes are not.
  const std::string busy = "(?:.?){511}x";
  j = plain_json;
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", busy}}}, {"behavior", "Isolated"}, {"invert", false}};
  const Edited split = create_edited(j, [](HfTokenizerTables&) {});
  REQUIRE(split.tokenizer);
  CHECK(ids_of(*split.tokenizer.value(), "model") == ids_of(*plain, "model"));
  auto long_ids = split.tokenizer.value()->encode_text(std::string(4096, 'y'), false);
  REQUIRE_FALSE(long_ids);
  CHECK_THAT(long_ids.error().message,
             Contains("tokenizer.hf.pre_tokenizers[0] (Split): its regex takes more than 128 steps per byte"));
  // At load: a normalized added token of 4096 bytes through such a Replace.
  j = plain_json;
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", busy}}}, {"content", "a"}};
  j["added_tokens"].push_back({{"id", plain->vocab_size()}, {"content", std::string(4096, 'y')}, {"normalized", true}});
  const Edited load = create_edited(j, [](HfTokenizerTables&) {});
  REQUIRE_FALSE(load.tokenizer);
  CHECK_THAT(message_of(load), Contains("tokenizer.hf.normalizers[0] (Replace): its regex takes more than 128 steps") &&
                                   Contains("added_tokens[6].content"));
}

TEST_CASE("petrel-convert refuses tokenizer.json features it does not run, naming the JSON path", "[hf_tokenizer]") {
  struct Case {
    const char* expect;
    std::function<void(json&)> change;
  };
  const std::vector<Case> cases = {
      {"model.type: 'WordLevel' is not supported", [](json& j) { j["model"]["type"] = "WordLevel"; }},
      {"normalizer.type: normalizer 'StripAccents' is not supported", [](json& j) { j["normalizer"] = {{"type", "StripAccents"}}; }},
      {"pre_tokenizer", [](json& j) {
         j["pre_tokenizer"] = {{"type", "Sequence"},
                               {"pretokenizers", json::array({{{"type", "ByteLevel"}}, {{"type", "Digits"}}})}};
       }},
      {"model.merges[0]: token 'zz' is not in the vocabulary", [](json& j) { j["model"]["merges"][0] = {"zz", "a"}; }},
      {"model.merges[1]: must be", [](json& j) { j["model"]["merges"][1] = 7; }},
      {"model.vocab: id 3 is given twice", [](json& j) { j["model"]["vocab"]["dup"] = 3; }},
      {"post_processor", [](json& j) { j["post_processor"] = {{"type", "BertProcessing"}}; }},
      {"decoder", [](json& j) { j["decoder"] = {{"type", "WordPiece"}}; }},
      {"model.dropout", [](json& j) { j["model"]["dropout"] = 0.1; }},
  };
  for (const Case& c : cases) {
    INFO(c.expect);
    json j = small_tokenizer_json();
    c.change(j);
    petrel::convert::HfTokenizerFiles files;
    files.dir = "ckpt";
    files.tokenizer_json = j.dump();
    try {
      petrel::convert::hf_tokenizer_buffer(files);
      FAIL("accepted");
    } catch (const petrel::convert::ConvertError& e) {
      CHECK_THAT(e.what(), Catch::Contains("ckpt/tokenizer.json") && Catch::Contains(c.expect));
    }
  }
}

TEST_CASE("Tokenizing is linear in the text: megabytes of one character, of spaces, of digits",
          "[hf_tokenizer]") {
  // One word for Gemma-style BPE (no spaces), one long run for each regex branch: a
  // quadratic pass would not finish within the test's time limit.
  petrel::convert::HfTokenizerFiles files;
  files.dir = "small";
  files.tokenizer_json = small_tokenizer_json().dump();
  LoadedHfTokenizer loaded = load_hf_tokenizer(files);
  const size_t size = (size_t{4} << 20) / std::min<size_t>(petrel::test::subset_stride(), 4);  // emulated runs: 1 MiB
  for (const std::string& text : {std::string(size, 'e'), std::string(size, ' '), std::string(size / 2, '7'),
                                  [&] {
                                    std::string s;
                                    while (s.size() < size) s += "user ";
                                    return s;
                                  }()}) {
    auto ids = loaded.tokenizer->encode_text(text, true);
    REQUIRE(ids);
    CHECK(ids.value().size() > 1);
    auto back = loaded.tokenizer->decode_ids(ids.value().data(), ids.value().size(), true);
    REQUIRE(back);
    CHECK(back.value() == text);
  }
  CHECK_FALSE(loaded.tokenizer->encode_text(std::string(petrel::text::HfTokenizer::kMaxTextBytes + 1, 'a'), true));
  CHECK_FALSE(loaded.tokenizer->encode_text("bad \xff utf-8", true));
}

TEST_CASE("petrel-run --prompt, --stream and --chat on a language model with a tokenizer", "[hf_tokenizer][cli]") {
  using petrel::test::petrel_run_command;
  using petrel::test::run_command;
  if (!petrel::test::can_run_programs() || !petrel::test::xz_decompress(hf_fixture("gemma3/tokenizer_config.json.xz")))
    return;
  const std::string model = lm_with_tokenizer();
  auto loaded = petrel::test::load_model(model);
  auto generator = petrel::Generator::create(loaded);
  REQUIRE(generator);
  petrel::GenerateOptions o;
  o.do_sample = false;
  o.max_new_tokens = 12;
  auto want = generator.value().generate_text("the user", o);
  REQUIRE(want);
  int status = -1;
  const std::string out =
      run_command(petrel_run_command() + " " + model + " --prompt 'the user' --greedy --max-new-tokens 12 --json", &status, true);
  REQUIRE(status == 0);
  const json j = json::parse(out);
  CHECK(j["results"][0]["hypotheses"][0]["text"] == want.value().text);
  CHECK(j["results"][0]["hypotheses"][0]["ids"].get<std::vector<int32_t>>() == want.value().ids);
  const std::string streamed =
      run_command(petrel_run_command() + " " + model + " --prompt 'the user' --greedy --max-new-tokens 12 --stream --quiet", &status, true);
  CHECK(status == 0);
  CHECK(streamed == want.value().text + "\n");

  petrel::test::TempDir tmp;
  std::ofstream(tmp.file("chat.txt")) << "hi the user\nis the model in\n";
  const std::string chat = run_command(petrel_run_command() + " " + model + " --chat --system 'the system' --greedy " +
                                           "--max-new-tokens 6 --json-lines < " + tmp.file("chat.txt"),
                                       &status, true);
  REQUIRE(status == 0);
  std::istringstream lines(chat);
  std::vector<json> replies;
  for (std::string line; std::getline(lines, line);) replies.push_back(json::parse(line));
  REQUIRE(replies.size() == 2);
  CHECK(replies[0]["dropped_exchanges"] == 0);
  CHECK(replies[0]["reused_tokens"] == 0);
  CHECK(replies[1]["reused_tokens"].get<size_t>() > 0);
  auto conversation = petrel::Conversation::create(generator.value(), "the system");
  REQUIRE(conversation);
  petrel::GenerateOptions six = o;
  six.max_new_tokens = 6;
  CHECK(conversation.value().reply("hi the user", six).value().text == replies[0]["text"]);
  CHECK(conversation.value().reply("is the model in", six).value().text == replies[1]["text"]);
  {  // on a live pipe: each reply before the next message is written; a message too long
     // to hold (over 1 MiB) is that message's error, and the conversation goes on
    petrel::test::Coprocess live(petrel_run_command() + " " + model + " --chat --system 'the system' --greedy " +
                                 "--max-new-tokens 6 --json-lines --quiet 2>/dev/null");
    std::vector<json> answers;
    for (const std::string& message : {std::string("hi the user"), std::string((size_t{1} << 20) + 10, 'x'),
                                       std::string("is the model in")}) {
      live.write_line(message);
      const auto answer = live.read_line();
      REQUIRE(answer.has_value());
      answers.push_back(json::parse(*answer));
    }
    CHECK(answers[0]["text"] == replies[0]["text"]);
    CHECK(answers[1]["index"] == 1);
    CHECK_THAT(answers[1]["error"].get<std::string>(), Catch::Contains("line 2 is longer than 1048576 bytes"));
    CHECK(answers[2]["text"] == replies[1]["text"]);
    CHECK(live.finish().second == 1);
  }

  {  // a conversation longer than the model's positions: every message answered, the
     // oldest exchanges dropped to make room (said on standard error)
    std::ofstream many(tmp.file("many.txt"));
    // 24 messages: the 15th is the first past the positions; from there every turn runs
    // the whole kept history again (~0.9 s each under qemu), so no more than needed.
    for (int i = 0; i < 24; ++i) many << "is the model in the user system\n";
    many.close();
    const std::string err = tmp.file("err.txt");
    const std::string out = run_command("{ " + petrel_run_command() + " " + model + " --chat --greedy --ignore-eos " +
                                            "--max-new-tokens 16 --json-lines < " + tmp.file("many.txt") + " 2>" + err + "; }",
                                        &status, true);
    CHECK(status == 0);
    std::istringstream in(out);
    size_t answered = 0, dropped = 0;
    for (std::string line; std::getline(in, line); ++answered) {
      const json r = json::parse(line);
      REQUIRE(r.contains("text"));
      CHECK(r["ids"].size() == 16);
      dropped += r["dropped_exchanges"].get<size_t>();
    }
    CHECK(answered == 24);
    CHECK(dropped > 0);
    std::ifstream e(err);
    const std::string said((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
    CHECK_THAT(said, Catch::Contains("oldest exchange"));
  }

  for (const auto& [flags, expect] : std::vector<std::pair<std::string, std::string>>{
           {"--text 'a'", "--text is for translation models"},
           {"--system x --prompt a", "--system applies with --chat"},
           {"--chat --template-flag enable_thinking", "expected NAME=true or NAME=false"},
           {"--chat --json", "--json does not apply with --chat"},
           {"--prompt a --stop ''", "--stop: each string must be 1..256 bytes"}}) {
    INFO(flags);
    const std::string err = run_command(petrel_run_command() + " " + model + " " + flags + " --max-new-tokens 2", &status);
    CHECK(status != 0);
    CHECK_THAT(err, Catch::Contains(expect));
  }
  // Sampling flags on a model that decodes greedily unless told: a warning, as
  // transformers gives, instead of silence; with --sample, none.
  auto defaults = petrel::resolve_generate_options(*loaded, {});
  REQUIRE(defaults);
  REQUIRE_FALSE(*defaults.value().do_sample);  // the fixture's generation_config.json has no do_sample
  for (const std::string sample : {"", " --sample"}) {
    INFO("flags:" << sample);
    const std::string err = run_command("{ " + petrel_run_command() + " " + model + " --prompt a --temperature 0.5 --top-k 3" +
                                            sample + " --max-new-tokens 2 --quiet 2>&1 >/dev/null; }",
                                        &status);
    CHECK(status == 0);
    const bool warned = err.find("--temperature has no effect") != std::string::npos &&
                        err.find("--top-k has no effect") != std::string::npos;
    CHECK(warned == sample.empty());
  }
  const std::string plain = petrel::test::shared_file("lm-gemma3-ids.petrel", [](const std::string& out_path) {
    petrel::convert::ConvertOptions c;
    c.checkpoint_dir = petrel::test::fixture_dir() + "/decoder_only/gemma3_f32";
    c.output_path = out_path;
    petrel::convert::convert_checkpoint(c);
  });
  const std::string err = run_command(petrel_run_command() + " " + plain + " --chat < /dev/null", &status);
  CHECK(status != 0);
  CHECK_THAT(err, Catch::Contains("--chat needs a language model converted with its tokenizer.json"));
}

TEST_CASE("The C API generates from text, renders the chat template and holds a conversation",
          "[hf_tokenizer][decoder_only]") {
  if (!petrel::test::xz_decompress(hf_fixture("gemma3/tokenizer_config.json.xz"))) return;
  const std::string path = lm_with_tokenizer();
  petrel_model* model = nullptr;
  REQUIRE(petrel_model_load(path.c_str(), &model) == PETREL_OK);
  petrel_session* session = nullptr;
  REQUIRE(petrel_session_create(model, nullptr, 1, &session) == PETREL_OK);
  petrel_generate_options o;
  petrel_generate_options_init(&o);
  o.do_sample = 0;
  o.max_new_tokens = 10;
  std::string streamed;
  o.stream_text = 1;
  o.on_token = [](void* data, const petrel_token_event* e) {
    static_cast<std::string*>(data)->append(e->text_delta ? e->text_delta : "<null>");
    return 1;
  };
  o.on_token_data = &streamed;
  petrel_result* result = nullptr;
  REQUIRE(petrel_generate_text(session, "the user", &o, &result) == PETREL_OK);
  const char* text = petrel_result_text(result, 0, 0);
  REQUIRE(text != nullptr);
  CHECK(streamed == text);
  size_t length = 0;
  CHECK(petrel_result_ids(result, 0, 0, &length) != nullptr);
  CHECK(length > 0);
  petrel_result_free(result);

  const char* roles[] = {"user", "assistant", "user"};
  const char* contents[] = {"hi", "hello", "bye"};
  char* rendered = nullptr;
  REQUIRE(petrel_apply_chat_template(session, roles, contents, 3, 1, &rendered) == PETREL_OK);
  CHECK(std::string(rendered) ==
        "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\nhello<end_of_turn>\n"
        "<start_of_turn>user\nbye<end_of_turn>\n<start_of_turn>model\n");
  petrel_string_free(rendered);
  CHECK(petrel_apply_chat_template(session, roles, contents, 2, 0, &rendered) == PETREL_OK);
  petrel_string_free(rendered);

  petrel_conversation* chat = nullptr;
  REQUIRE(petrel_conversation_new(session, "the system", &chat) == PETREL_OK);
  o.on_token = nullptr;
  for (const char* message : {"hi the user", "the end"}) {
    REQUIRE(petrel_conversation_reply(chat, message, &o, &result) == PETREL_OK);
    CHECK(petrel_result_text(result, 0, 0) != nullptr);
    petrel_result_free(result);
  }
  // make_room: nothing to drop while the conversation leaves room; its exchanges when
  // it must leave all but 30 of the model's positions.
  size_t dropped = 99;
  CHECK(petrel_conversation_make_room(chat, "more", 16, &dropped) == PETREL_OK);
  CHECK(dropped == 0);
  const size_t positions = petrel::test::load_model(path)->info().max_positions;
  CHECK(petrel_conversation_make_room(chat, "more", positions - 30, &dropped) == PETREL_OK);
  CHECK(dropped == 2);
  CHECK(petrel_conversation_make_room(chat, nullptr, 16, &dropped) == PETREL_INVALID_ARGUMENT);
  const char* stop[] = {""};
  o.stop = stop;
  o.stop_count = 1;
  CHECK(petrel_conversation_reply(chat, "x", &o, &result) == PETREL_INVALID_ARGUMENT);
  CHECK_THAT(petrel_last_error(), Catch::Contains("stop[0]"));
  petrel_conversation_free(chat);
  petrel_session_free(session);
  petrel_model_free(model);
}

namespace hf_linear_test {
using json = nlohmann::json;

const std::string kQwenPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

json split_pre_tokenizer(const std::string& pattern) {
  return {{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}};
}

// Ordinary text of about `size` bytes: words, spaces, digits and punctuation.
std::string prose(size_t size) {
  std::string s;
  while (s.size() < size) s += "The model is in the user's system, 12 of 345 times! Is it? ";
  return s;
}
}  // namespace hf_linear_test

TEST_CASE("A 3,000-byte Prepend leaves the regex after it its steps: the allowance follows the text it runs on",
          "[hf_tokenizer]") {
  using namespace hf_flags_test;
  using namespace hf_linear_test;
  std::string prepended;
  while (prepended.size() < 3000) prepended += "system user ";
  json reference_json = small_tokenizer_json();
  reference_json["normalizer"] = nullptr;
  reference_json["pre_tokenizer"] = split_pre_tokenizer(kQwenPattern);
  json j = reference_json;
  j["normalizer"] = {{"type", "Prepend"}, {"prepend", prepended}};
  std::vector<uint8_t> reference_bytes, bytes;
  const auto reference = tokenizer_of(reference_json, reference_bytes);
  const auto t = tokenizer_of(j, bytes);
  // Its regex scans the 3,000 bytes for each text: ~25 steps per byte, 75,000 in all,
  // more than an allowance counted on a 9-byte input gave (1,024 per byte and 16,384).
  for (const std::string& text : {std::string("the model"), std::string("a"), prose(size_t{64} << 10)}) {
    INFO(text.size() << " bytes");
    auto ids = t->encode_text(text, false);
    REQUIRE(ids);
    CHECK(ids.value() == ids_of(*reference, prepended + text));
  }
}

// Tokenizer parts at their limits over megabytes (#24's time bombs of the tokenizer):
// each took 7-26 us per byte before its pass was bounded per byte.
TEST_CASE("A 4,095-byte added token over 1 MiB of its character, and over runs one byte short of it", "[.][linear]") {
  using namespace hf_flags_test;
  std::vector<uint8_t> plain_bytes, bytes;
  const json plain_json = small_tokenizer_json();
  const auto plain = tokenizer_of(plain_json, plain_bytes);
  json j = plain_json;
  const std::string big(4095, 'a');
  const auto big_id = static_cast<int32_t>(plain->vocab_size());
  j["added_tokens"].push_back({{"id", big_id}, {"content", big}, {"normalized", false}});
  const auto t = tokenizer_of(j, bytes);
  const size_t n = size_t{1} << 20;
  std::vector<int32_t> expected(n / 4095, big_id);
  const std::vector<int32_t> tail = ids_of(*plain, std::string(n % 4095, 'a'));
  expected.insert(expected.end(), tail.begin(), tail.end());
  CHECK(ids_of(*t, std::string(n, 'a')) == expected);
  std::string runs;  // each position a prefix of the token as deep as its run, never all of it
  while (runs.size() + 4095 <= n) runs += std::string(4094, 'a') + "b";
  CHECK(ids_of(*t, runs) == ids_of(*plain, runs));
}

TEST_CASE("The largest regex the loader accepts over 1 MiB: within the steps per byte, or refused by them",
          "[.][linear]") {
  using namespace hf_flags_test;
  using namespace hf_linear_test;
  const size_t n = size_t{1} << 20;
  const std::string refused = "tokenizer.hf.pre_tokenizers[0] (Split): its regex takes more than " +
                              std::to_string(petrel::text::HfTokenizer::kRegexStepsPerByte) + " steps per byte";
  // 1024 instructions: over prose a thread or two alive at a time, so it runs; over 'a'
  // a thread from each of the last 1023 positions, so it is refused once its steps pass
  // kRegexStepsPerByte per byte (a few hundred ms), not run at 1023 steps per byte.
  json j = small_tokenizer_json();
  j["pre_tokenizer"] = split_pre_tokenizer("a{1023}");
  std::vector<uint8_t> bytes;
  const auto t = tokenizer_of(j, bytes);
  CHECK(ids_of(*t, prose(n)).size() > n / 8);
  auto ids = t->encode_text(std::string(n, 'a'), false);
  REQUIRE_FALSE(ids);
  CHECK_THAT(ids.error().message, Catch::Contains(refused));
  // Every thread alive at each code point.
  j["pre_tokenizer"] = split_pre_tokenizer("(?:.?){511}x");
  const auto busy = tokenizer_of(j, bytes);
  ids = busy->encode_text(std::string(n, 'y'), false);
  REQUIRE_FALSE(ids);
  CHECK_THAT(ids.error().message, Catch::Contains(refused));
  // The real patterns run within it on prose.
  j["pre_tokenizer"] = split_pre_tokenizer(kQwenPattern);
  const auto qwen = tokenizer_of(j, bytes);
  CHECK(ids_of(*qwen, prose(n)).size() > n / 8);
}

TEST_CASE("A 3,000-byte Prepend over 1 MiB of prose tokenizes", "[.][linear]") {
  using namespace hf_flags_test;
  using namespace hf_linear_test;
  std::string prepended;
  while (prepended.size() < 3000) prepended += "system user ";
  json j = small_tokenizer_json();
  j["normalizer"] = {{"type", "Prepend"}, {"prepend", prepended}};
  j["pre_tokenizer"] = split_pre_tokenizer(kQwenPattern);
  std::vector<uint8_t> bytes;
  const auto t = tokenizer_of(j, bytes);
  CHECK(ids_of(*t, prose(size_t{1} << 20)).size() > (size_t{1} << 20) / 8);
}
