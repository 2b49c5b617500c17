// petrel-serve: Petrel's models over HTTP, with OpenAI's API for language models and
// LibreTranslate's for translation models. This file reads the command line, binds,
// loads the models, and shuts down gracefully on SIGTERM / SIGINT.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/cli.h"
#include "serve/libretranslate_handlers.h"
#include "serve/openai_handlers.h"
#include "serve/request_json.h"
#include "serve/server_state.h"

using namespace petrel;
using namespace petrel::serve;

namespace {

// What the main thread waits for once the models are loaded.
struct Lifecycle {
  std::mutex mutex;
  std::condition_variable cv;
  bool shutdown_asked = false;
  bool listener_ended = false;
};
Lifecycle lifecycle;

// SIGTERM and SIGINT are taken by one thread (blocked everywhere else): the first asks
// for a graceful shutdown, a second ends the process at once.
void watch_signals(sigset_t signals) {
  std::chrono::steady_clock::time_point first;
  for (;;) {
    int signal = 0;
    if (sigwait(&signals, &signal) != 0) continue;
    const auto now = std::chrono::steady_clock::now();
    if (first != std::chrono::steady_clock::time_point()) {
      // One stop sent twice (to the process and its group, as `timeout` does) is one.
      if (now - first < std::chrono::seconds(1)) continue;
      std::fprintf(stderr, "petrel-serve: %s again: exiting without finishing the requests in progress\n",
                   signal == SIGINT ? "SIGINT" : "SIGTERM");
      std::_Exit(1);
    }
    first = now;
    std::lock_guard<std::mutex> lock(lifecycle.mutex);
    lifecycle.shutdown_asked = true;
    lifecycle.cv.notify_all();
  }
}

void add_status_routes(ServerState& state) {
  state.http->get("/health", [&state](const httplib::Request&, httplib::Response& res) {
    if (state.http->draining())
      return send_openai_error(res, RequestError(503, "the server is shutting down", "", "unavailable_error"));
    if (!state.ready) return send_openai_error(res, RequestError(503, "the models are loading", "", "unavailable_error"));
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  // Each model's counters (how well requests were batched): petrel-serve's own.
  state.http->get("/stats", [&state](const httplib::Request& req, httplib::Response& res) {
    if (!state.api_key.empty() && !state.key_matches(ServerState::bearer_key(req)))
      return send_openai_error(res, RequestError(401, "invalid API key (Authorization: Bearer KEY)", "",
                                                 "authentication_error", "invalid_api_key"));
    nlohmann::json models = nlohmann::json::object();
    for (const auto& m : state.registry.models()) {
      if (!state.ready) break;
      if (const TranslationScheduler* t = m->translator()) {
        const TranslationStats s = t->stats();
        models[m->name()] = {{"requests", s.requests}, {"texts", s.texts}, {"translated", s.translated},
                             {"engine_calls", s.calls},
                             {"texts_per_call", s.calls ? static_cast<double>(s.texts) / s.calls : 0.0},
                             {"sentences", s.sentences}, {"source_tokens", s.source_tokens},
                             {"generated_tokens", s.generated_tokens}, {"refused", s.refused},
                             {"cancelled", s.cancelled}};
      } else if (const LmScheduler* g = m->generator()) {
        const LmStats s = g->stats();
        models[m->name()] = {{"sequences", s.sequences}, {"prompt_tokens", s.prompt_tokens},
                             {"generated_tokens", s.generated_tokens}, {"refused", s.refused}};
      }
    }
    res.set_content(json_text({{"models", models}}), "application/json");
  });
}

int serve_main(int argc, char** argv) {
  cli::Parser p(
      "petrel-serve", "--model NAME=FILE [--model NAME=FILE ...] [--host H] [--port P] [options]",
      "Serves Petrel models over HTTP until SIGTERM or SIGINT (then it finishes the requests in\n"
      "progress, answers new ones with 503, and exits 0; a second signal exits at once).\n"
      "Language models (decoder-only) answer OpenAI's API, as llama-server does:\n"
      "    POST /v1/chat/completions, POST /v1/completions (stream: server-sent events), GET /v1/models\n"
      "Translation models answer LibreTranslate's: POST /translate, GET /languages. A bilingual model\n"
      "is named by its languages (--model en-de=en-de.petrel); a multilingual one (NLLB, M2M100,\n"
      "mBART-50, opus-mt with >>xx<< tokens) serves the languages its file records, by ISO 639-1 codes.\n"
      "GET /health answers 200 once the models are loaded (503 before). The first line of standard\n"
      "output is the port (useful with --port 0); a line per request goes to standard error.\n"
      "    petrel-serve --model gemma=gemma-3-270m.petrel --model en-de=en-de.petrel --port 8080");
  p.flag("model", "NAME=FILE", "a model to serve under NAME (repeatable)", true);
  p.flag("host", "H", "the address to listen on (default 127.0.0.1: this machine only)");
  p.flag("port", "P", "the port (default 8080; 0: any free port)");
  p.flag("api-key", "K", "answer only requests carrying this key (Authorization: Bearer K; LibreTranslate's\n"
                         "                              api_key field); /health and /languages stay open");
  p.flag("api-key-file", "FILE", "--api-key read from FILE's first line (not shown by ps)");
  p.flag("threads", "N", "intra-op threads per session (default 1)");
  p.flag("workers", "W", "translation sessions per translation model, each on its own thread (default 1)");
  p.flag("isa", "NAME", "kernel path (default: the best this CPU runs)");
  p.flag("max-batch", "N", "translation: sentences per batch (default 32; 1: one at a time)");
  p.flag("max-batch-tokens", "N", "translation: source tokens per batch (default 4096)");
  p.flag("queue", "N", "requests (translation) or sequences (language models) waiting per model; more\n"
                       "                              are answered 503 (OpenAI) / 429 (LibreTranslate) with Retry-After (default 64)");
  p.flag("timeout", "S", "seconds a request may take from its arrival to its answer's end (default 600)");
  p.flag("max-body", "BYTES", "the largest request body (default 4194304)");
  p.flag("http-threads", "N", "connections served at once (default 64; more wait to be taken)");
  p.flag("read-timeout", "S", "seconds a request's head and body may take to arrive (default 10)");
  p.flag("write-timeout", "S", "seconds a response write may wait for the client to read (default 10)");
  p.flag("keep-alive", "S", "seconds an idle connection is kept open (default 5)");

  std::vector<ModelSpec> specs;
  RegistrySettings settings;
  HttpLimits limits;
  std::string host;
  int port = 8080;
  ServerState state;
  try {
    if (!p.parse(argc, argv)) {
      std::cout << p.help();
      return 0;
    }
    if (!p.positionals().empty()) throw cli::UsageError("unexpected argument '" + p.positionals()[0] + "' (see --help)");
    if (!p.has("model")) throw cli::UsageError("give at least one --model NAME=FILE");
    for (const std::string& m : p.all("model")) {
      const size_t eq = m.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == m.size())
        throw cli::UsageError("--model '" + m + "': expected NAME=FILE");
      const std::string name = m.substr(0, eq);
      for (const char c : name)
        if (c == '/' || c <= ' ' || c == 0x7f)
          throw cli::UsageError("--model '" + m + "': a name has no '/', spaces or control characters");
      specs.push_back({name, m.substr(eq + 1)});
    }
    host = p.get("host", "127.0.0.1");
    port = static_cast<int>(p.get_int("port", 8080, 0, 65535));
    if (p.has("api-key") && p.has("api-key-file")) throw cli::UsageError("--api-key or --api-key-file, not both");
    state.api_key = p.get("api-key", "");
    if (p.has("api-key-file")) {
      std::ifstream in(p.get("api-key-file"));
      if (!in || !std::getline(in, state.api_key)) throw cli::UsageError("--api-key-file: cannot read " + p.get("api-key-file"));
      while (!state.api_key.empty() && (state.api_key.back() == '\r' || state.api_key.back() == ' '))
        state.api_key.pop_back();
    }
    if ((p.has("api-key") || p.has("api-key-file")) && state.api_key.empty())
      throw cli::UsageError("the API key is empty");
    settings.session.isa = p.get("isa", "");
    settings.session.threads = static_cast<size_t>(p.get_int("threads", 1, 1, 256));
    settings.workers = static_cast<size_t>(p.get_int("workers", 1, 1, 64));
    settings.translation.batching.max_batch_size = static_cast<size_t>(p.get_int("max-batch", 32, 1, 4096));
    settings.translation.batching.max_batch_tokens = static_cast<size_t>(p.get_int("max-batch-tokens", 4096, 1, 1 << 24));
    const size_t queue = static_cast<size_t>(p.get_int("queue", 64, 1, 1 << 20));
    settings.translation.queue_limit = queue;
    settings.lm.queue_limit = queue;
    settings.lm.max_batch = settings.translation.batching.max_batch_size;
    state.timeout_seconds = static_cast<int>(p.get_int("timeout", 600, 1, 86400));
    limits.max_body_bytes = static_cast<size_t>(p.get_int("max-body", limits.max_body_bytes, 1024, int64_t{1} << 30));
    limits.threads = static_cast<size_t>(p.get_int("http-threads", 64, 2, 4096));
    limits.request_seconds = static_cast<int>(p.get_int("read-timeout", 10, 1, 3600));
    limits.write_seconds = static_cast<int>(p.get_int("write-timeout", 10, 1, 3600));
    limits.keep_alive_seconds = static_cast<int>(p.get_int("keep-alive", 5, 1, 3600));
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "petrel-serve: %s\n", e.what());
    return 2;
  }

  // Signals go to the watcher alone: blocked here, before any thread starts (threads
  // inherit the mask). A client that leaves is a failed write, not SIGPIPE.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  std::thread(watch_signals, signals).detach();

  HttpServer http(limits);
  state.http = &http;
  add_status_routes(state);
  add_openai_routes(state);
  add_libretranslate_routes(state);
  const int bound = http.bind(host, port);
  if (bound < 0) {
    std::fprintf(stderr, "petrel-serve: cannot listen on %s port %d\n", host.c_str(), port);
    return 1;
  }
  std::printf("%d\n", bound);
  std::fflush(stdout);
  std::fprintf(stderr, "petrel-serve: listening on http://%s:%d, loading %zu model%s\n", host.c_str(), bound,
               specs.size(), specs.size() == 1 ? "" : "s");
  std::thread listener([&http] {
    http.listen_after_bind();
    std::lock_guard<std::mutex> lock(lifecycle.mutex);
    lifecycle.listener_ended = true;
    lifecycle.cv.notify_all();
  });
  auto stop = [&](int status) {
    // httplib's stop() before the listener runs does nothing, and the listener would then
    // run on (a model that fails to load is found right after the bind): wait for it.
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(lifecycle.mutex);
        if (lifecycle.listener_ended) break;
      }
      if (http.is_running()) {
        http.stop();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    listener.join();
    state.registry.shutdown();
    return status;
  };

  const auto start = std::chrono::steady_clock::now();
  if (Status loaded = state.registry.load(specs, settings); !loaded) {
    std::fprintf(stderr, "petrel-serve: %s\n", loaded.error().message.c_str());
    return stop(1);
  }
  for (const auto& m : state.registry.models()) {
    std::string what;
    if (m->is_language_model()) {
      what = "language model";
      if (!m->has_chat_template()) what += " (no chat template: /v1/completions only)";
    } else {
      // A multilingual model's languages, the first dozen of each side.
      auto codes = [](const std::map<std::string, std::string>& languages) {
        std::string text;
        size_t shown = 0;
        for (const auto& [code, model_code] : languages)
          if (++shown <= 12) text += (text.empty() ? "" : ",") + code;
        if (shown > 12) text += ",... (" + std::to_string(shown) + " languages)";
        return text;
      };
      what = "translation " + codes(m->sources()) + " -> " + codes(m->targets());
      if (m->supports_html()) what += "; html";
    }
    std::fprintf(stderr, "petrel-serve: %s: %s\n", m->name().c_str(), what.c_str());
  }
  state.ready = true;
  std::fprintf(stderr, "petrel-serve: ready (models loaded in %.0f ms)\n",
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());

  {
    std::unique_lock<std::mutex> lock(lifecycle.mutex);
    lifecycle.cv.wait(lock, [] { return lifecycle.shutdown_asked || lifecycle.listener_ended; });
    if (!lifecycle.shutdown_asked) {
      lock.unlock();
      std::fprintf(stderr, "petrel-serve: the listening socket failed\n");
      return stop(1);
    }
  }
  // Graceful: new requests are answered 503, the ones in progress finish (each within
  // --timeout), then the listener stops and the schedulers finish what they hold.
  http.begin_draining();
  std::fprintf(stderr, "petrel-serve: shutting down: finishing %zu request%s in progress\n",
               http.requests_in_progress(), http.requests_in_progress() == 1 ? "" : "s");
  while (http.requests_in_progress() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int status = stop(0);
  std::fprintf(stderr, "petrel-serve: stopped\n");
  return status;
}

}  // namespace

int main(int argc, char** argv) { return cli::run_tool("petrel-serve", serve_main, argc, argv); }
