#include "serve/openai_handlers.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "serve/openai_request.h"
#include "serve/request_json.h"
#include "serve/sse.h"

namespace petrel::serve {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

json nullable(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

// "chatcmpl-" or "cmpl-" and 24 random hex digits.
std::string completion_id(const char* prefix) {
  thread_local std::mt19937_64 random(std::random_device{}());
  char hex[32];
  std::snprintf(hex, sizeof hex, "%016llx%08llx", static_cast<unsigned long long>(random()),
                static_cast<unsigned long long>(random() & 0xffffffffull));
  return prefix + std::string(hex);
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// What the engine refused; `param` is the field the request's input came in. A JSON
// schema's or its grammar's errors are response_format's.
RequestError engine_error(const Error& e, std::string param = "", bool constrained = false) {
  if (constrained && (e.message.find("schema") != std::string::npos || e.message.find("grammar") != std::string::npos))
    param = "response_format";
  switch (e.code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kUnsupported:
      return RequestError(400, e.message, param);
    case ErrorCode::kOutOfMemory:
      return RequestError(503, e.message, "", "unavailable_error", "out_of_memory");
    default:
      return RequestError(500, e.message, "", "server_error");
  }
}

RequestError timeout_error(const ServerState& state) {
  return RequestError(503, "the request was not done within " + std::to_string(state.timeout_seconds) +
                               " seconds (petrel-serve --timeout)",
                      "", "unavailable_error", "timeout");
}

// The checks every /v1 route makes first: loaded, not shutting down, the API key.
void admit(const ServerState& state, const httplib::Request& req) {
  if (state.http->draining()) throw RequestError(503, "the server is shutting down", "", "unavailable_error");
  if (!state.ready) throw RequestError(503, "the models are loading", "", "unavailable_error");
  if (!state.api_key.empty() && !state.key_matches(ServerState::bearer_key(req)))
    throw RequestError(401, "invalid API key (Authorization: Bearer KEY)", "", "authentication_error",
                       "invalid_api_key");
}

// A route's handler with OpenAI's error shape for whatever it throws.
HttpServer::BodyHandler openai_route(ServerState& state,
                                     std::function<void(const httplib::Request&, const std::string&, httplib::Response&)> f) {
  return [&state, f](const httplib::Request& req, const std::string& body, httplib::Response& res) {
    try {
      admit(state, req);
      f(req, body, res);
    } catch (const RequestError& e) {
      send_openai_error(res, e);
    } catch (const std::bad_alloc&) {
      send_openai_error(res, RequestError(503, "out of memory", "", "unavailable_error", "out_of_memory"));
    } catch (const std::exception& e) {
      send_openai_error(res, RequestError(500, e.what(), "", "server_error"));
    }
  };
}

json model_object(const ServedModel& m) {
  json o = {{"id", m.name()}, {"object", "model"}, {"created", m.created()}, {"owned_by", "petrel"}};
  o["petrel"] = {{"kind", m.is_language_model() ? "language-model" : "translation"},
                 {"architecture", m.model().info().architecture}};
  return o;
}

// A completion request read and checked, with its model and its prompts as the model's
// scheduler takes them.
struct CompletionRequest : CompletionFields {
  CompletionRequest(CompletionFields fields, const ServedModel& model)
      : CompletionFields(std::move(fields)), model(&model) {}
  const ServedModel* model;
  bool special_tokens = true;  // LmRequest::special_tokens: false for a chat's rendering
};

const ServedModel& language_model(const ServerState& state, const std::string& name) {
  const ServedModel* m = state.registry.find(name);
  if (m == nullptr)
    throw RequestError(404, "the model '" + name + "' does not exist (GET /v1/models lists them)", "model",
                       "invalid_request_error", "model_not_found");
  if (!m->is_language_model())
    throw RequestError(400, "the model '" + name + "' is a translation model: POST /translate", "model");
  return *m;
}

// The model is looked up before the other fields are read: an unknown model is the error
// whatever else the request holds.
CompletionRequest read_chat_request(const ServerState& state, const json& body) {
  const ServedModel& model = language_model(state, read_model_field(body));
  CompletionRequest r(read_chat_fields(body), model);
  if (!r.model->has_chat_template())
    throw RequestError(400, "the model '" + r.model->name() + "' has no chat template: use /v1/completions", "messages");
  auto prompt = r.model->chat_prompt(r.messages);
  if (!prompt) throw engine_error(prompt.error(), "messages");
  r.prompts.push_back(std::move(prompt.value()));
  r.messages.clear();  // the prompt holds them now
  r.special_tokens = false;
  return r;
}

CompletionRequest read_completion_request(const ServerState& state, const json& body) {
  const ServedModel& model = language_model(state, read_model_field(body));
  return CompletionRequest(read_completion_fields(body), model);
}

const char* finish_reason(const TextGeneration& g) { return g.ended_on_eos || g.ended_on_stop ? "stop" : "length"; }

// A request's sequences (prompts x n choices) on their way through the model's scheduler.
struct Generations {
  std::mutex mutex;
  std::condition_variable done_cv;
  std::vector<std::shared_ptr<LmRequest>> requests;
  std::vector<std::optional<Result<TextGeneration>>> results;
  size_t done = 0;
  bool timed_out = false;  // the handler cancelled them for the deadline
  // Streaming:
  std::shared_ptr<EventStream> events;
  std::vector<bool> started;     // its first chunk was sent
  bool sent_any = false;         // some chunk was sent: errors are events from now on
  bool failed = false;           // an error was (or is to be) reported
  std::optional<Error> first_error;
  size_t choices_per_prompt = 1;

  void cancel_all() {
    for (const auto& r : requests) r->cancelled = true;
  }
  bool wait(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex);
    return done_cv.wait_for(lock, timeout, [&] { return done == requests.size(); });
  }
};

// Each prompt's tokens, counted once however many choices it has.
size_t usage_prompt_tokens(const Generations& g) {
  size_t total = 0;
  for (size_t s = 0; s < g.results.size(); s += g.choices_per_prompt)
    if (g.results[s] && *g.results[s]) total += g.results[s]->value().prompt_tokens;
  return total;
}

class CompletionHandler {
 public:
  CompletionHandler(ServerState& state, bool chat) : state_(state), chat_(chat) {}

  void operator()(const httplib::Request&, const std::string& body, httplib::Response& res) const {
    const json request = parse_json_body(body);
    const CompletionRequest r = chat_ ? read_chat_request(state_, request) : read_completion_request(state_, request);
    const auto deadline = state_.deadline();
    auto g = std::make_shared<Generations>();
    const std::string id = completion_id(chat_ ? "chatcmpl-" : "cmpl-");
    const int64_t created = unix_now();
    const std::string model = r.model->name();
    if (r.stream) g->events = std::make_shared<EventStream>();
    const size_t sequences = r.prompts.size() * r.n;
    const size_t queue_limit = r.model->generator()->queue_limit();
    if (sequences > queue_limit)
      throw RequestError(400, "the request asks for " + std::to_string(sequences) + " sequences (prompts x n), more than the " +
                                  std::to_string(queue_limit) + " the model's queue holds (petrel-serve --queue)", "n");
    g->results.resize(sequences);
    g->started.assign(sequences, false);
    const bool chat = chat_;
    // A chunk of choice `index` (streaming): a chat delta or a completion's text.
    auto chunk = [=](size_t index, const json& delta_or_text, const char* finish) {
      json choice = {{"index", index}, {"logprobs", nullptr}, {"finish_reason", finish ? json(finish) : json(nullptr)}};
      choice[chat ? "delta" : "text"] = delta_or_text;
      return json{{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", created},
                  {"model", model}, {"choices", json::array({choice})}};
    };
    const bool include_usage = r.include_usage;
    const std::string timeout_message = timeout_error(state_).what();
    for (size_t s = 0; s < sequences; ++s) {
      auto lm = std::make_shared<LmRequest>();
      lm->prompt = r.prompts[s / r.n];
      lm->special_tokens = r.special_tokens;
      lm->options = r.options;
      lm->options.seed = r.options.seed + s % r.n;  // each choice its own draw
      Generations* gp = g.get();
      if (r.stream) {
        // The choice's first chunk (a chat's role) goes before its first text.
        lm->on_text = [gp, s, chunk, chat](std::string_view delta) {
          std::lock_guard<std::mutex> lock(gp->mutex);
          if (gp->failed) return false;
          if (!gp->started[s]) {
            gp->started[s] = true;
            if (chat) gp->events->send(chunk(s, {{"role", "assistant"}, {"content", ""}}, nullptr));
          }
          gp->sent_any = true;
          gp->events->send(chunk(s, chat ? json{{"content", std::string(delta)}} : json(std::string(delta)), nullptr));
          return true;
        };
      }
      lm->on_done = [g, s, chunk, chat, include_usage, id, created, model, timeout_message](Result<TextGeneration>&& result) {
        std::lock_guard<std::mutex> lock(g->mutex);
        const bool cancelled = g->requests[s]->cancelled;
        if (result && cancelled)  // stopped early by the deadline or a client that left: not an answer
          result = Error{ErrorCode::kCancelled, g->timed_out ? timeout_message : "cancelled"};
        if (g->events) {
          EventStream& events = *g->events;
          if (result && !g->failed) {
            if (!g->started[s] && chat) events.send(chunk(s, {{"role", "assistant"}, {"content", ""}}, nullptr));
            g->started[s] = true;
            g->sent_any = true;
            events.send(chunk(s, chat ? json::object() : json(""), finish_reason(result.value())));
            events.count_tokens(result.value().ids.size());
          } else if (!result && !g->failed) {
            g->failed = true;
            g->first_error = result.error();
            g->cancel_all();
            if (g->sent_any) {  // the status line has gone: the error is an event
              const RequestError e = result.error().code == ErrorCode::kCancelled && g->timed_out
                                         ? RequestError(503, result.error().message, "", "unavailable_error", "timeout")
                                         : engine_error(result.error());
              events.send({{"error", {{"message", e.what()}, {"type", e.type}, {"param", nullable(e.param)},
                                      {"code", nullable(e.code)}}}});
            }
          }
        }
        g->results[s] = std::move(result);
        if (++g->done < g->results.size()) return;
        if (g->events) {
          if (!g->failed) {
            if (include_usage) {
              size_t completion_tokens = 0;
              for (const auto& t : g->results) completion_tokens += t->value().ids.size();
              const size_t prompt_tokens = usage_prompt_tokens(*g);
              g->events->send({{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"},
                               {"created", created}, {"model", model}, {"choices", json::array()},
                               {"usage", {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens},
                                          {"total_tokens", prompt_tokens + completion_tokens}}}});
            }
            g->events->send_done();
          }
          g->events->finish();
        }
        g->done_cv.notify_all();
      };
      g->requests.push_back(std::move(lm));
    }
    g->choices_per_prompt = r.n;
    if (!r.model->generator()->submit(g->requests)) {
      for (const auto& q : g->requests) {  // their callbacks hold `g`: let it go
        q->on_done = nullptr;
        q->on_text = nullptr;
      }
      throw RequestError(503, "the model '" + model + "' has too many requests waiting: retry later", "",
                         "unavailable_error", "queue_full");
    }
    if (r.stream) return stream(res, g, deadline, !r.options.json_schema.empty());
    const WaitEnd end = wait_for_work([&](std::chrono::milliseconds t) { return g->wait(t); }, deadline);
    if (end != WaitEnd::kDone) return abandon(res, *g, end);
    json choices = json::array();
    size_t completion_tokens = 0;
    for (size_t s = 0; s < sequences; ++s) {
      const Result<TextGeneration>& result = *g->results[s];
      if (!result) throw engine_error(result.error(), chat_ ? "messages" : "prompt", !r.options.json_schema.empty());
      const TextGeneration& t = result.value();
      completion_tokens += t.ids.size();
      json choice = {{"index", s}, {"logprobs", nullptr}, {"finish_reason", finish_reason(t)}};
      if (chat_) choice["message"] = {{"role", "assistant"}, {"content", t.text}};
      else choice["text"] = t.text;
      choices.push_back(std::move(choice));
    }
    const size_t prompt_tokens = usage_prompt_tokens(*g);
    if (Connection* c = Connection::current()) c->count_tokens(completion_tokens);
    res.set_content(json_text({{"id", id},
                               {"object", chat_ ? "chat.completion" : "text_completion"},
                               {"created", created},
                               {"model", model},
                               {"choices", std::move(choices)},
                               {"usage",
                                {{"prompt_tokens", prompt_tokens},
                                 {"completion_tokens", completion_tokens},
                                 {"total_tokens", prompt_tokens + completion_tokens}}}}),
                    "application/json");
  }

 private:
  // Streaming: once the first chunk (or the end) is there, the answer's status is known:
  // an error before any chunk is an HTTP error, later ones are error events.
  void stream(httplib::Response& res, const std::shared_ptr<Generations>& g, Clock::time_point deadline,
              bool constrained) const {
    const WaitEnd end = wait_for_work([&](std::chrono::milliseconds t) { return g->events->wait(t); }, deadline);
    if (end != WaitEnd::kDone) return abandon(res, *g, end);
    {
      std::lock_guard<std::mutex> lock(g->mutex);
      if (!g->sent_any && g->failed && g->first_error)
        throw engine_error(*g->first_error, chat_ ? "messages" : "prompt", constrained);
    }
    respond_with_events(res, g->events, deadline, [g](bool timed_out) {
      std::lock_guard<std::mutex> lock(g->mutex);
      g->timed_out = timed_out;
      g->cancel_all();
    });
  }

  // The client left, or the time is up, before the answer began.
  void abandon(httplib::Response& res, Generations& g, WaitEnd end) const {
    {
      std::lock_guard<std::mutex> lock(g.mutex);
      g.timed_out = end == WaitEnd::kTimedOut;
      g.cancel_all();
    }
    if (end == WaitEnd::kTimedOut) throw timeout_error(state_);
    res.status = 499;  // nobody reads it (nginx's "client closed request", for the log)
  }

  ServerState& state_;
  bool chat_;
};

}  // namespace

void send_openai_error(httplib::Response& res, const RequestError& e) {
  res.status = e.status;
  if (e.status == 503 || e.status == 429) res.set_header("Retry-After", "1");
  if (e.status == 401) res.set_header("WWW-Authenticate", "Bearer");
  res.set_content(json_text({{"error",
                              {{"message", e.what()}, {"type", e.type}, {"param", nullable(e.param)}, {"code", nullable(e.code)}}}}),
                  "application/json");
}

void add_openai_routes(ServerState& state) {
  HttpServer& http = *state.http;
  http.post("/v1/chat/completions", openai_route(state, CompletionHandler(state, true)));
  http.post("/v1/completions", openai_route(state, CompletionHandler(state, false)));
  auto get = [&state](std::function<void(const httplib::Request&, httplib::Response&)> f) {
    return [&state, f](const httplib::Request& req, httplib::Response& res) {
      openai_route(state, [f](const httplib::Request& q, const std::string&, httplib::Response& r) { f(q, r); })(
          req, std::string(), res);
    };
  };
  http.get("/v1/models", get([&state](const httplib::Request&, httplib::Response& res) {
             json data = json::array();
             for (const auto& m : state.registry.models()) data.push_back(model_object(*m));
             res.set_content(json_text({{"object", "list"}, {"data", std::move(data)}}), "application/json");
           }));
  http.get(R"(/v1/models/([^/]+))", get([&state](const httplib::Request& req, httplib::Response& res) {
             const std::string name = req.matches[1];
             const ServedModel* m = state.registry.find(name);
             if (m == nullptr)
               throw RequestError(404, "the model '" + name + "' does not exist", "model", "invalid_request_error",
                                  "model_not_found");
             res.set_content(json_text(model_object(*m)), "application/json");
           }));
}

}  // namespace petrel::serve
