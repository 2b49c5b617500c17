// Translation requests for one model, batched: a worker thread takes every request
// waiting with the same options (html, languages, hypotheses) and hands all their texts to
// one BatchTranslator::translate_text call, which sorts them by length and packs them into
// batches; each request completes as soon as its last text is delivered. Requests that
// arrive meanwhile wait for the next call, so the busier the server, the larger the batches.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "petrel/batch_translator.h"

namespace petrel::serve {

// What one translate_text call shares: requests with equal options are batched together.
struct TranslationOptions {
  bool html = false;
  std::string source_language, target_language;  // the model's codes (empty: its defaults)
  size_t n_best = 1;
  bool operator==(const TranslationOptions& o) const {
    return html == o.html && source_language == o.source_language && target_language == o.target_language &&
           n_best == o.n_best;
  }
};

// One request: its texts in, a result per text out.
class TranslationJob {
 public:
  TranslationJob(std::vector<std::string> texts, TranslationOptions options)
      : texts_(std::move(texts)),
        options_(std::move(options)),
        results_(texts_.size(), Result<TextTranslation>(Error{ErrorCode::kInternal, "not translated"})) {}

  const std::vector<std::string>& texts() const { return texts_; }
  const TranslationOptions& options() const { return options_; }

  // Waits up to `timeout` for every result; true when they are all in.
  template <class Duration>
  bool wait_for(Duration timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return done_cv_.wait_for(lock, timeout, [&] { return done_; });
  }
  // Once done: a result per text, in order (an error for a text that failed).
  std::vector<Result<TextTranslation>>& results() { return results_; }

  // The client has gone or its time is up: its texts are dropped from the batch (the
  // translate_text call stops once none of its requests is live).
  void cancel();
  bool cancelled() const { return cancelled_; }

 private:
  friend class TranslationScheduler;
  struct Call;
  void deliver(size_t index, Result<TextTranslation>&& result);
  void fail_rest(const Error& error);

  std::vector<std::string> texts_;
  TranslationOptions options_;
  std::vector<Result<TextTranslation>> results_;
  size_t delivered_ = 0;
  std::atomic<bool> cancelled_{false};
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::shared_ptr<Call> call_;  // the running call it is part of (the scheduler's mutex)
};

struct TranslationSchedulerSettings {
  size_t queue_limit = 64;        // requests waiting (more are refused)
  size_t max_call_texts = 256;    // texts per translate_text call
  BatchOptions batching;          // max_batch_size, max_batch_tokens; window: the call's texts
};

struct TranslationStats {
  size_t requests = 0, texts = 0, calls = 0;  // calls: translate_text calls made
  size_t translated = 0;                      // texts translated (not failed or cancelled)
  size_t sentences = 0, source_tokens = 0, generated_tokens = 0;  // the calls' BatchTotals
  size_t refused = 0;    // the queue was full
  size_t cancelled = 0;  // requests whose client left or whose time ran out
};

class TranslationScheduler {
 public:
  TranslationScheduler(BatchTranslator translator, TranslationSchedulerSettings settings);
  ~TranslationScheduler();

  // Queues the job; false (nothing queued) when the queue is full or shutting down.
  bool submit(const std::shared_ptr<TranslationJob>& job);
  // Finishes the queued and running work, then stops the worker. New jobs are refused.
  void shutdown();
  TranslationStats stats() const;

 private:
  void run();
  void translate(std::vector<std::shared_ptr<TranslationJob>>& jobs);

  BatchTranslator translator_;
  TranslationSchedulerSettings settings_;
  mutable std::mutex mutex_;
  std::condition_variable work_cv_;
  std::deque<std::shared_ptr<TranslationJob>> queue_;
  bool stopping_ = false;
  TranslationStats stats_;
  std::thread worker_;
};

}  // namespace petrel::serve
