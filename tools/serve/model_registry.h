// The models a server serves, by name: each loaded file with its scheduler (translation
// models: batched translation; language models: the LM scheduler), the languages each
// translation model serves, and a language model's chat template.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "petrel/generator.h"
#include "petrel/model.h"
#include "serve/lm_scheduler.h"
#include "serve/translation_scheduler.h"

namespace petrel::serve {

// `--model NAME=FILE`.
struct ModelSpec {
  std::string name, path;
};

struct RegistrySettings {
  TranslatorOptions session;  // kernel path and intra-op threads of every session
  size_t workers = 1;         // BatchTranslator sessions per translation model
  TranslationSchedulerSettings translation;
  LmSchedulerSettings lm;
};

class ServedModel {
 public:
  const std::string& name() const { return name_; }
  const Model& model() const { return *model_; }
  bool is_language_model() const { return model_->info().decoder_only; }
  int64_t created() const { return created_; }  // when it was loaded, Unix seconds

  // Translation models:
  TranslationScheduler* translator() const { return translator_.get(); }
  bool supports_html() const { return supports_html_; }
  // The languages it translates from and into, client code -> the model's code (empty:
  // none to give, a bilingual model).
  const std::map<std::string, std::string>& sources() const { return sources_; }
  const std::map<std::string, std::string>& targets() const { return targets_; }
  // Text put before each input to choose the target (opus-mt's ">>fra<< "); empty: none.
  std::string target_prefix(const std::string& target_code) const;

  // Language models:
  LmScheduler* generator() const { return generator_.get(); }
  bool has_chat_template() const { return !model_->info().lm.chat_template.empty(); }
  // `messages` through the model's chat template, the assistant's turn opened: a prompt
  // for LmRequest with special_tokens false (the template writes its own BOS). Errors as
  // Generator::apply_chat_template's.
  Result<std::string> chat_prompt(const std::vector<ChatMessage>& messages) const;

 private:
  friend class ModelRegistry;
  std::string name_;
  std::shared_ptr<const Model> model_;
  int64_t created_ = 0;
  std::unique_ptr<TranslationScheduler> translator_;
  bool supports_html_ = false;
  bool marian_language_tokens_ = false;
  std::map<std::string, std::string> sources_, targets_;
  std::unique_ptr<LmScheduler> generator_;
  mutable std::mutex render_mutex_;
  std::optional<Generator> renderer_;  // renders chat templates (its own: the scheduler's generates)
};

class ModelRegistry {
 public:
  // Loads every model and starts its scheduler; an error names the model and file.
  Status load(const std::vector<ModelSpec>& specs, const RegistrySettings& settings);
  const ServedModel* find(const std::string& name) const;
  const std::vector<std::unique_ptr<ServedModel>>& models() const { return models_; }

  // The translation model serving `source` -> `target` (client codes), or null.
  const ServedModel* translation_model(const std::string& source, const std::string& target) const;
  // Every source language served, with the targets reachable from it.
  std::map<std::string, std::vector<std::string>> language_pairs() const;

  // Finishes the queued work of every scheduler and stops them.
  void shutdown();

 private:
  Status add(const ModelSpec& spec, const RegistrySettings& settings);
  std::vector<std::unique_ptr<ServedModel>> models_;
};

}  // namespace petrel::serve
