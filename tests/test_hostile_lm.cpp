// A language model file from a stranger must not hang or kill the app that loads it:
// its chat template is checked whole at load, a prompt's text is bounded by what the
// model's positions can hold before anything tokenizes it, and a hostile template ends
// in an error -- also in petrel-run under a 1 GiB address-space limit, where an
// allocation that a machine with overcommit grants fails.
#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "model_access.h"
#include "petrel/generator.h"
#include "support/lm_fixture.h"
#include "support/test_support.h"
#include "text/hf_tokenizer.h"

using namespace petrel;
using namespace petrel::test;

namespace {

// The bytes of the longest token of the model's tokenizer (vocabulary or added).
size_t longest_token(const Model& model) {
  const auto* t = dynamic_cast<const text::HfTokenizer*>(detail::ModelAccess::tokenizer(model));
  REQUIRE(t != nullptr);
  size_t longest = 0;
  for (std::string_view token : t->tables().vocab) longest = std::max(longest, token.size());
  return longest;
}

}  // namespace

TEST_CASE("a model file whose chat template does not parse is refused at load, naming the field and line:column",
          "[hostile][decoder_only]") {
  const std::vector<uint8_t> good = read_bytes(tiny_lm("chat", tiny_lm_chat_template()));
  REQUIRE(load_bytes(good));
  // The converter refuses such a template; a file can still carry one. "{% for" becomes
  // "{% do ", a statement the subset lacks, named at its keyword: line 1, column 19.
  const std::string from = "{% for m in messages %}";
  auto at = std::search(good.begin(), good.end(), from.begin(), from.end());
  REQUIRE(at != good.end());
  std::vector<uint8_t> bad = good;
  const std::string to = "{% do  m in messages %}";
  std::copy(to.begin(), to.end(), bad.begin() + (at - good.begin()));
  auto loaded = load_bytes(bad, "crafted.petrel");
  REQUIRE_FALSE(loaded);
  INFO(loaded.error().message);
  CHECK(loaded.error().code == ErrorCode::kFormat);
  CHECK(loaded.error().message.find("crafted.petrel: lm.chat_template: chat template 1:19: ") == 0);
  CHECK(loaded.error().message.find("'{% do %}'") != std::string::npos);
}

TEST_CASE("a prompt's text is bounded by the model's positions before it is tokenized", "[hostile][decoder_only]") {
  auto model = load_model(tiny_lm("chat", tiny_lm_chat_template()));
  auto generator = Generator::create(model);
  REQUIRE(generator);
  const size_t positions = model->info().max_positions, longest = longest_token(*model);
  REQUIRE(positions == 512);
  REQUIRE(longest == 15);  // <start_of_turn>: fewer bytes than kMaxPromptBytesPerPosition
  const size_t limit = generator.value().max_prompt_bytes();
  CHECK(limit == positions * longest + longest);
  GenerateOptions o;
  o.max_new_tokens = 1;

  auto over = generator.value().generate_text(std::string(limit + 1, 'a'), o);
  REQUIRE_FALSE(over);
  CHECK(over.error().code == ErrorCode::kInvalidArgument);
  CHECK(over.error().message.find("the prompt has " + std::to_string(limit + 1) + " bytes: more than the " +
                                  std::to_string(limit)) == 0);
  // At the limit the text is tokenized: its tokens are what do not fit.
  auto at_limit = generator.value().generate_text(std::string(limit, 'a'), o);
  REQUIRE_FALSE(at_limit);
  CHECK(at_limit.error().message.find("positions") != std::string::npos);
  CHECK(at_limit.error().message.find("bytes") == std::string::npos);

  // A conversation: a message the positions cannot hold is refused, and the
  // conversation is as it was.
  auto chat = Conversation::create(generator.value(), "Answer briefly.");
  REQUIRE(chat);
  auto long_reply = chat.value().reply(std::string(limit, 'b'), o);
  REQUIRE_FALSE(long_reply);
  CHECK(long_reply.error().message.find("the conversation's messages have") == 0);
  CHECK(chat.value().messages().size() == 1);
  auto dropped = chat.value().make_room(std::string(limit, 'b'), 1);
  REQUIRE(dropped);
  CHECK(dropped.value() == 0);
  auto reply = chat.value().reply("hi", o);
  REQUIRE(reply);
  CHECK(chat.value().messages().size() == 3);
}

TEST_CASE("a chat template's output is limited by the model's positions, not by a constant", "[hostile][decoder_only]") {
  // 25 bytes of template, 16 MiB of output: refused when the output passes what 512
  // positions can hold, before it is built.
  auto model = load_model(tiny_lm("output-16m", "{{ 'a ' * 8388608 }}"));
  auto generator = Generator::create(model);
  REQUIRE(generator);
  auto chat = Conversation::create(generator.value());
  REQUIRE_FALSE(chat);
  INFO(chat.error().message);
  CHECK(chat.error().code == ErrorCode::kOutOfMemory);
  CHECK(chat.error().message.rfind("chat template 1:", 0) == 0);
  CHECK(chat.error().message.find(std::to_string(generator.value().max_prompt_bytes())) != std::string::npos);
}

TEST_CASE("petrel-run ends hostile chat templates with an error under a 1 GiB address-space limit",
          "[hostile][decoder_only][cli]") {
  if (!can_run_programs()) return;
  const std::vector<std::pair<std::string, std::string>> templates = {
      {"list-repeat", "{{ [0] * 16777216 }}"},
      {"split-16m", "{{ ('a' * 16777216).split('a') | length }}"},
      {"output-16m", "{{ 'a ' * 8388608 }}"},
  };
  // Under an emulator the limit would bound the emulator's own reservations instead, and
  // a sanitizer reserves terabytes of shadow at start: there the in-process budget
  // (test_allocations.cpp) stands for it, and the run shows the same clean error.
  const bool limited = petrel_run_command().find("qemu") == std::string::npos && !built_with_sanitizer();
  const std::string limit = limited ? "prlimit --as=1073741824 " : "";
  for (const auto& [name, chat_template] : templates) {
    INFO(name);
    const std::string model = tiny_lm("hostile-" + name, chat_template);
    int status = 0;
    const std::string out =
        run_command("echo hello | " + limit + petrel_run_command() + " " + model + " --chat --max-new-tokens 2", &status);
    INFO(out);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
    CHECK(out.find("petrel-run: chat template") != std::string::npos);
  }
}
