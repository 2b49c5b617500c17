#include "serve/translation_scheduler.h"

#include <utility>

namespace petrel::serve {

// A translate_text call in progress: it is cancelled once none of its jobs is live.
struct TranslationJob::Call {
  std::atomic<bool> cancel{false};
  std::atomic<size_t> live{0};
};

void TranslationJob::cancel() {
  if (cancelled_.exchange(true)) return;
  std::shared_ptr<Call> call;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    call = call_;
  }
  if (call && call->live.fetch_sub(1) == 1) call->cancel = true;
}

void TranslationJob::deliver(size_t index, Result<TextTranslation>&& result) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_ || index >= results_.size()) return;
  results_[index] = std::move(result);
  if (++delivered_ == results_.size()) {
    done_ = true;
    call_.reset();
    done_cv_.notify_all();
  }
}

void TranslationJob::fail_rest(const Error& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_) return;
  for (size_t i = delivered_; i < results_.size(); ++i) results_[i] = error;
  delivered_ = results_.size();
  done_ = true;
  call_.reset();
  done_cv_.notify_all();
}

TranslationScheduler::TranslationScheduler(BatchTranslator translator, TranslationSchedulerSettings settings)
    : translator_(std::move(translator)), settings_(std::move(settings)) {
  worker_ = std::thread([this] { run(); });
}

TranslationScheduler::~TranslationScheduler() { shutdown(); }

bool TranslationScheduler::submit(const std::shared_ptr<TranslationJob>& job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || queue_.size() >= settings_.queue_limit) {
      ++stats_.refused;
      return false;
    }
    queue_.push_back(job);
    ++stats_.requests;
    stats_.texts += job->texts().size();
  }
  work_cv_.notify_one();
  return true;
}

void TranslationScheduler::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

TranslationStats TranslationScheduler::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void TranslationScheduler::run() {
  for (;;) {
    std::vector<std::shared_ptr<TranslationJob>> jobs;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing is left
      // The oldest job's options decide the call; every waiting job with the same options
      // joins it, up to the call's limit of texts (the first job always fits).
      const TranslationOptions options = queue_.front()->options();
      size_t texts = 0;
      for (auto it = queue_.begin(); it != queue_.end();) {
        const size_t n = (*it)->texts().size();
        if ((*it)->options() == options && (jobs.empty() || texts + n <= settings_.max_call_texts)) {
          texts += n;
          jobs.push_back(std::move(*it));
          it = queue_.erase(it);
        } else {
          ++it;
        }
      }
    }
    translate(jobs);
  }
}

void TranslationScheduler::translate(std::vector<std::shared_ptr<TranslationJob>>& jobs) {
  auto call = std::make_shared<TranslationJob::Call>();
  std::vector<std::string> texts;
  std::vector<std::pair<TranslationJob*, size_t>> owners;  // each text's job and index there
  for (const auto& job : jobs) {
    {
      std::lock_guard<std::mutex> lock(job->mutex_);
      if (!job->cancelled_) {
        job->call_ = call;
        ++call->live;
      }
    }
    if (job->cancelled()) {
      job->fail_rest({ErrorCode::kCancelled, "cancelled"});
      continue;
    }
    for (size_t i = 0; i < job->texts().size(); ++i) {
      texts.push_back(job->texts()[i]);
      owners.emplace_back(job.get(), i);
    }
  }
  if (!texts.empty()) {
    const TranslationOptions& asked = jobs.front()->options();
    TranslateOptions options;
    options.html = asked.html;
    options.source_language = asked.source_language;
    options.target_language = asked.target_language;
    options.n_best = asked.n_best;
    if (asked.n_best > 1) options.beam_size = asked.n_best;
    BatchOptions batching = settings_.batching;
    batching.window = texts.size();
    batching.cancel = &call->cancel;
    batching.split_sentences = true;
    // As petrel-run's --html (bergamot): a text's sentences are limited by its longest one
    // and decode over the union of their shortlists.
    batching.limit_by_longest_sentence = asked.html;
    batching.shortlist_of_input = asked.html;
    const Status status = translator_.translate_text(
        texts, options, batching, [&](size_t index, Result<TextTranslation>&& result) {
          owners[index].first->deliver(owners[index].second, std::move(result));
        });
    if (!status)
      for (const auto& job : jobs) job->fail_rest(status.error());
  }
  for (const auto& job : jobs) job->fail_rest({ErrorCode::kInternal, "no translation was delivered"});
  const BatchTotals totals = translator_.last_totals();
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& job : jobs) {
    stats_.cancelled += job->cancelled() ? 1 : 0;
    for (const auto& result : job->results()) stats_.translated += result.has_value() ? 1 : 0;
  }
  if (!texts.empty()) {
    ++stats_.calls;
    stats_.sentences += totals.sentences;
    stats_.source_tokens += totals.source_tokens;
    stats_.generated_tokens += totals.generated_tokens;
  }
}

}  // namespace petrel::serve
