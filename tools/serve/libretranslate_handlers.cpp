#include "serve/libretranslate_handlers.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "serve/language_codes.h"
#include "serve/libretranslate_request.h"
#include "serve/request_json.h"

namespace petrel::serve {
namespace {

using nlohmann::json;

void send_error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  if (status == 429 || status == 503) res.set_header("Retry-After", "1");
  res.set_content(json_text({{"error", message}}), "application/json");
}

// The status a failed translation answers with: the request's fault, or the server's.
int engine_status(const Error& e) {
  return e.code == ErrorCode::kInvalidArgument || e.code == ErrorCode::kUnsupported ? 400 : 500;
}

void translate(ServerState& state, const httplib::Request& req, const std::string& body, httplib::Response& res) {
  if (state.http->draining()) return send_error(res, 503, "the server is shutting down");
  if (!state.ready) return send_error(res, 503, "the models are loading");
  const json fields = translate_request_fields(req.get_header_value("Content-Type"), body);
  if (!state.api_key.empty()) {
    std::string key = ServerState::bearer_key(req);
    if (auto field = fields.find("api_key"); field != fields.end() && field->is_string()) key = field->get<std::string>();
    if (!state.key_matches(key)) return send_error(res, 403, "Invalid API key");
  }
  TranslateFields request = read_translate_fields(fields);
  std::vector<std::string>& texts = request.texts;
  const bool list = request.list;
  const std::string& target = request.target;
  const int64_t alternatives = request.alternatives;

  // The source language: "auto" is the one source served, when there is only one (no
  // language is detected).
  std::string source = request.source;
  const bool detect = source == "auto";
  if (detect) {
    const auto pairs = state.registry.language_pairs();
    if (pairs.size() != 1) {
      std::string served;
      size_t listed = 0;
      for (const auto& [code, targets] : pairs)
        if (++listed <= 20) served += (served.empty() ? "" : ", ") + code;
      if (listed > 20) served += ", ... (" + std::to_string(listed) + " languages; GET /languages)";
      throw RequestError(400, "source 'auto': petrel-serve does not detect languages; give the source language (" +
                                  (served.empty() ? std::string("none is served") : "served: " + served) + ")");
    }
    source = pairs.begin()->first;
  }
  if (source == target) throw RequestError(400, "source and target are both '" + source + "'");
  const ServedModel* model = state.registry.translation_model(source, target);
  if (model == nullptr)
    throw RequestError(400, source + " -> " + target + " is not served (GET /languages lists what is)");
  if (request.html && !model->supports_html())
    throw RequestError(400, "format html: the model " + model->name() +
                                " cannot put markup back (its tokenizer does not give its tokens' bytes; a Marian C++ "
                                "model's does)");
  if (request.html && alternatives > 0)
    throw RequestError(400, "alternatives: not with format html (it gives one translation)");

  json translated = json::array(), alternative_lists = json::array();
  if (!texts.empty()) {
    TranslationOptions options;
    options.html = request.html;
    options.source_language = model->sources().at(source);
    options.target_language = model->targets().at(target);
    options.n_best = static_cast<size_t>(alternatives) + 1;
    const std::string prefix = model->target_prefix(options.target_language);
    if (!prefix.empty()) {
      for (std::string& t : texts) t = prefix + t;
      options.target_language.clear();  // chosen by the text's token
    }
    auto job = std::make_shared<TranslationJob>(std::move(texts), options);
    if (!model->translator()->submit(job))
      return send_error(res, 429, "Slow down: too many translation requests are waiting; retry later");
    const WaitEnd end = wait_for_work([&](std::chrono::milliseconds t) { return job->wait_for(t); }, state.deadline());
    if (end != WaitEnd::kDone) {
      job->cancel();
      if (end == WaitEnd::kTimedOut)
        return send_error(res, 503, "the translation was not done within " + std::to_string(state.timeout_seconds) +
                                        " seconds (petrel-serve --timeout)");
      res.status = 499;  // the client left: nobody reads it
      return;
    }
    size_t tokens = 0;
    for (size_t i = 0; i < job->results().size(); ++i) {
      const Result<TextTranslation>& result = job->results()[i];
      if (!result)
        return send_error(res, engine_status(result.error()),
                          (list ? "q[" + std::to_string(i) + "]: " : std::string()) + result.error().message);
      const std::vector<TextHypothesis>& hypotheses = result.value().hypotheses;
      translated.push_back(hypotheses.empty() ? std::string() : hypotheses[0].text);
      json others = json::array();
      for (size_t h = 1; h < hypotheses.size(); ++h) others.push_back(hypotheses[h].text);
      alternative_lists.push_back(std::move(others));
      if (!hypotheses.empty()) tokens += hypotheses[0].ids.size();
    }
    if (Connection* c = Connection::current()) c->count_tokens(tokens);
  }
  json answer = {{"translatedText", list ? translated : translated[0]}};
  if (alternatives > 0) answer["alternatives"] = list ? alternative_lists : alternative_lists[0];
  if (detect) answer["detectedLanguage"] = {{"language", source}, {"confidence", 100}};
  res.set_content(json_text(answer), "application/json");
}

}  // namespace

void add_libretranslate_routes(ServerState& state) {
  state.http->post("/translate", [&state](const httplib::Request& req, const std::string& body, httplib::Response& res) {
    try {
      translate(state, req, body, res);
    } catch (const RequestError& e) {
      send_error(res, e.status, e.what());
    } catch (const std::bad_alloc&) {
      send_error(res, 503, "out of memory");
    } catch (const std::exception& e) {
      send_error(res, 500, e.what());
    }
  });
  state.http->get("/languages", [&state](const httplib::Request&, httplib::Response& res) {
    if (!state.ready) return send_error(res, 503, "the models are loading");
    // Every language served, each with the languages it translates into (none for one
    // that is only a target).
    std::map<std::string, std::vector<std::string>> pairs = state.registry.language_pairs();
    std::vector<std::string> targets_only;
    for (const auto& [code, targets] : pairs)
      for (const std::string& target : targets)
        if (!pairs.count(target)) targets_only.push_back(target);
    for (const std::string& code : targets_only) pairs[code];
    json languages = json::array();
    for (const auto& [code, targets] : pairs)
      languages.push_back({{"code", code}, {"name", language_name(code)}, {"targets", targets}});
    res.set_content(json_text(languages), "application/json");
  });
}

}  // namespace petrel::serve
