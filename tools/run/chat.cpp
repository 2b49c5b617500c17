#include "run/chat.h"

#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run/line_reader.h"
#include "run/run_io.h"

namespace petrel::run {

int run_chat(Generator& generator, const GenerateOptions& options, const ChatSettings& settings, int fd) {
  auto created = Conversation::create(generator, settings.system, settings.template_flags);
  if (!created) {
    std::fprintf(stderr, "petrel-run: %s\n", created.error().message.c_str());
    return 1;
  }
  Conversation& chat = created.value();
  const bool interactive = isatty(fd) && !settings.quiet;
  GenerateOptions turn = options;
  if (!settings.json_lines) {
    turn.stream_text = true;
    turn.on_token = [](const TokenEvent& e) {
      std::fwrite(e.text_delta.data(), 1, e.text_delta.size(), stdout);
      std::fflush(stdout);
      return true;
    };
  }
  int status = 0;
  auto fail = [&](size_t index, const std::string& message) {
    std::fprintf(stderr, "petrel-run: message %zu: %s\n", index + 1, message.c_str());
    if (settings.json_lines)
      std::printf("%s\n", json_text({{"index", index}, {"error", message}}).c_str());
    std::fflush(stdout);
    status = 1;
  };
  // One message per line, in bounded memory: a line longer than the reader holds is that
  // message's error, and the conversation goes on.
  LineReader reader(fd, "standard input");
  std::vector<Input> window;
  for (size_t index = 0;; ++index) {
    if (std::ferror(stdout)) break;  // nobody reads the replies (main reports it)
    if (interactive) std::fputs("> ", stderr);
    if (!reader.next_window(1, window)) break;
    const Input& message = window[0];
    if (message.error) {
      fail(index, *message.error);
      continue;
    }
    if (message.text.find_first_not_of(" \t") == std::string::npos) {
      --index;
      continue;
    }
    auto dropped = chat.make_room(message.text, settings.reply_tokens);
    if (!dropped) {
      fail(index, dropped.error().message);
      continue;
    }
    if (dropped.value() > 0 && !settings.quiet)
      std::fprintf(stderr, "[the model's positions would not hold the conversation and a %zu-token reply: dropped its %zu oldest exchange%s]\n",
                   settings.reply_tokens, dropped.value(), dropped.value() == 1 ? "" : "s");
    auto reply = chat.reply(message.text, turn);
    if (!reply) {
      fail(index, reply.error().message);
      continue;
    }
    const TextGeneration& r = reply.value();
    const GenerateTimings& t = generator.last_timings();
    if (!settings.prompt_cache.empty())
      if (const Status saved = generator.save_prompt_cache(settings.prompt_cache); !saved) {
        std::fprintf(stderr, "petrel-run: %s\n", saved.error().message.c_str());
        status = 1;
      }
    if (settings.json_lines) {
      nlohmann::json j = {{"index", index},
                          {"text", r.text},
                          {"ids", r.ids},
                          {"ended_on_eos", r.ended_on_eos},
                          {"ended_on_stop", r.ended_on_stop},
                          {"prompt_tokens", r.prompt_tokens},
                          {"reused_tokens", r.reused_tokens},
                          {"dropped_exchanges", dropped.value()},
                          {"prefill_ms", t.prefill_ms},
                          {"generate_ms", t.generate_ms}};
      std::printf("%s\n", json_text(j).c_str());
    } else {
      std::printf("\n");
    }
    std::fflush(stdout);
    if (!settings.quiet && !settings.json_lines)
      std::fprintf(stderr, "[%zu tokens of history reused, %zu read in %.1f ms; %zu generated in %.1f ms (%.1f tokens/s)]\n",
                   r.reused_tokens, r.prompt_tokens - r.reused_tokens, t.prefill_ms, r.ids.size(), t.generate_ms,
                   t.generate_ms > 0 ? r.ids.size() / (t.generate_ms / 1000) : 0.0);
  }
  if (!reader.read_error().empty()) {
    std::fprintf(stderr, "petrel-run: %s\n", reader.read_error().c_str());
    status = 1;
  }
  return status;
}

}  // namespace petrel::run
