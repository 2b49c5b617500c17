// Language-model requests for one model: a queue of sequences to generate in, each
// sequence's text out through its own callbacks as tokens are generated. A worker runs
// them with continuous batching (Generator::generate_continuously): before every step
// the queued sequences join the running ones, up to max_batch, and every running
// sequence gets its next token from one step for all of them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "petrel/generator.h"

namespace petrel::serve {

// One sequence to generate.
struct LmRequest {
  // The prompt text, encoded with the tokenizer's special tokens (generate_text's rules).
  std::string prompt;
  // Everything but on_token and stream_text, which the scheduler sets.
  GenerateOptions options;
  // TextRequest::special_tokens: false for a chat template's rendering.
  bool special_tokens = true;
  // Called on the scheduler's thread as the text grows (streaming only: null otherwise;
  // a delta is whole characters and never part of a stop string). Return false to stop.
  std::function<bool(std::string_view delta)> on_text;
  // Called once, on the scheduler's thread, with the result (kCancelled if it was cancelled
  // before it started). The scheduler lets go of both callbacks once the sequence is done
  // (they may hold what holds the request).
  std::function<void(Result<TextGeneration>&&)> on_done;
  // Set from any thread: the sequence stops after its current token.
  std::atomic<bool> cancelled{false};
};

struct LmSchedulerSettings {
  size_t queue_limit = 64;  // sequences waiting (more are refused)
  size_t max_batch = 32;    // sequences stepped together at most
};

struct LmStats {
  size_t sequences = 0, prompt_tokens = 0, generated_tokens = 0, refused = 0;
};

class LmScheduler {
 public:
  LmScheduler(Generator generator, LmSchedulerSettings settings);
  ~LmScheduler();

  // Queues all of `requests` or none (false: the queue has no room for them all, or the
  // scheduler is shutting down).
  bool submit(const std::vector<std::shared_ptr<LmRequest>>& requests);
  // Finishes the queued and running sequences, then stops the worker. New ones are refused.
  void shutdown();
  LmStats stats() const;
  size_t queue_limit() const { return settings_.queue_limit; }

 private:
  void run();

  Generator generator_;
  LmSchedulerSettings settings_;
  mutable std::mutex mutex_;
  std::condition_variable work_cv_;
  std::deque<std::shared_ptr<LmRequest>> queue_;
  bool stopping_ = false;
  LmStats stats_;
  std::thread worker_;
};

}  // namespace petrel::serve
