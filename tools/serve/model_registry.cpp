#include "serve/model_registry.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "petrel/translator.h"
#include "serve/language_codes.h"

namespace petrel::serve {

std::string ServedModel::target_prefix(const std::string& target_code) const {
  return marian_language_tokens_ && !target_code.empty() ? target_code + " " : std::string();
}

Result<std::string> ServedModel::chat_prompt(const std::vector<ChatMessage>& messages) const {
  std::lock_guard<std::mutex> lock(render_mutex_);
  auto text = renderer_->apply_chat_template(messages, true);
  if (!text) return text.error();
  return text;
}

Status ModelRegistry::load(const std::vector<ModelSpec>& specs, const RegistrySettings& settings) {
  for (const ModelSpec& spec : specs)
    if (Status added = add(spec, settings); !added) return added;
  return Status::ok();
}

Status ModelRegistry::add(const ModelSpec& spec, const RegistrySettings& settings) {
  auto fail = [&](const std::string& message) {
    return Error{ErrorCode::kInvalidArgument, "--model " + spec.name + "=" + spec.path + ": " + message};
  };
  if (find(spec.name) != nullptr) return fail("the name " + spec.name + " is given twice");
  auto loaded = Model::load(spec.path);
  if (!loaded) return Error{loaded.error().code, "--model " + spec.name + ": " + loaded.error().message};
  auto served = std::make_unique<ServedModel>();
  served->name_ = spec.name;
  served->model_ = std::move(loaded.value());
  served->created_ = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
  const ModelInfo& info = served->model_->info();
  if (!info.has_text_tokenizer)
    return fail("the file carries no text tokenizer (petrel-serve takes and answers text)");

  if (info.decoder_only) {
    auto generator = Generator::create(served->model_, settings.session);
    if (!generator) return fail(generator.error().message);
    auto renderer = Generator::create(served->model_, TranslatorOptions{settings.session.isa, 1, settings.session.activation_scales});
    if (!renderer) return fail(renderer.error().message);
    served->renderer_.emplace(std::move(renderer.value()));
    served->generator_ = std::make_unique<LmScheduler>(std::move(generator.value()), settings.lm);
    models_.push_back(std::move(served));
    return Status::ok();
  }

  // A translation model: its languages, from the file when it records them, else its name.
  const std::vector<std::string>& codes = info.tokenizer.language_codes;
  const size_t dash = spec.name.find('-');
  const bool pair_name = dash != std::string::npos && dash > 0 && dash + 1 < spec.name.size() &&
                         spec.name.find('-', dash + 1) == std::string::npos;
  if (info.tokenizer.kind == "fairseq" && !codes.empty()) {  // NLLB, M2M100, mBART-50: any to any
    for (const std::string& code : codes) {
      const std::string client = client_language_code(code);
      served->sources_.emplace(client, code);
      served->targets_.emplace(client, code);
    }
  } else if (!codes.empty()) {  // opus-mt's >>xx<< tokens: one source, the target chosen in the text
    if (dash == std::string::npos || dash == 0)
      return fail("a model with target language tokens (" + codes.front() +
                  ", ...) is named SOURCE-ANYTHING, e.g. en-mul: its source language");
    served->sources_.emplace(spec.name.substr(0, dash), "");
    for (const std::string& code : codes) served->targets_.emplace(client_language_code(code), code);
    served->marian_language_tokens_ = true;
  } else {
    if (!pair_name)
      return fail("a translation model is named by its languages, SOURCE-TARGET (e.g. en-de), as LibreTranslate's "
                  "clients ask for them");
    served->sources_.emplace(spec.name.substr(0, dash), "");
    served->targets_.emplace(spec.name.substr(dash + 1), "");
  }
  // HTML translation puts markup back by the tokens' bytes, which only some tokenizers tell.
  auto probe = tokenize(*served->model_, "a");
  served->supports_html_ = probe && !probe.value().ids.empty() && probe.value().ranges.size() == probe.value().ids.size();
  auto translator = BatchTranslator::create(served->model_, settings.session, settings.workers);
  if (!translator) return fail(translator.error().message);
  served->translator_ = std::make_unique<TranslationScheduler>(std::move(translator.value()), settings.translation);
  models_.push_back(std::move(served));
  return Status::ok();
}

const ServedModel* ModelRegistry::find(const std::string& name) const {
  for (const auto& m : models_)
    if (m->name() == name) return m.get();
  return nullptr;
}

const ServedModel* ModelRegistry::translation_model(const std::string& source, const std::string& target) const {
  for (const auto& m : models_)
    if (!m->is_language_model() && m->sources().count(source) && m->targets().count(target)) return m.get();
  return nullptr;
}

std::map<std::string, std::vector<std::string>> ModelRegistry::language_pairs() const {
  std::map<std::string, std::set<std::string>> pairs;
  for (const auto& m : models_) {
    if (m->is_language_model()) continue;
    for (const auto& [source, code] : m->sources())
      for (const auto& [target, target_code] : m->targets())
        if (target != source) pairs[source].insert(target);
  }
  std::map<std::string, std::vector<std::string>> out;
  for (auto& [source, targets] : pairs) out[source].assign(targets.begin(), targets.end());
  return out;
}

void ModelRegistry::shutdown() {
  for (const auto& m : models_) {
    if (m->translator_) m->translator_->shutdown();
    if (m->generator_) m->generator_->shutdown();
  }
}

}  // namespace petrel::serve
