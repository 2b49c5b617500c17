#include "serve/lm_scheduler.h"

#include <unordered_map>
#include <utility>

namespace petrel::serve {

LmScheduler::LmScheduler(Generator generator, LmSchedulerSettings settings)
    : generator_(std::move(generator)), settings_(settings) {
  worker_ = std::thread([this] { run(); });
}

LmScheduler::~LmScheduler() { shutdown(); }

bool LmScheduler::submit(const std::vector<std::shared_ptr<LmRequest>>& requests) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || queue_.size() + requests.size() > settings_.queue_limit) {
      ++stats_.refused;
      return false;
    }
    queue_.insert(queue_.end(), requests.begin(), requests.end());
  }
  work_cv_.notify_one();
  return true;
}

void LmScheduler::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

LmStats LmScheduler::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void LmScheduler::run() {
  std::unordered_map<size_t, std::shared_ptr<LmRequest>> running;  // by the id the engine was given
  size_t next_id = 0;
  // The callbacks are let go of once used: they may own what owns the request.
  auto finish = [](LmRequest& request, Result<TextGeneration>&& result) {
    std::function<void(Result<TextGeneration>&&)> on_done = std::move(request.on_done);
    request.on_done = nullptr;
    request.on_text = nullptr;
    on_done(std::move(result));
  };
  const BatchSource next_requests = [&](bool idle) {
    std::vector<std::pair<size_t, TextRequest>> joining;
    std::vector<std::shared_ptr<LmRequest>> cancelled;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (idle) work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      while (!queue_.empty() && running.size() < settings_.max_batch) {
        std::shared_ptr<LmRequest> request = std::move(queue_.front());
        queue_.pop_front();
        if (request->cancelled) {
          cancelled.push_back(std::move(request));
          continue;
        }
        LmRequest* r = request.get();
        TextRequest t;
        t.prompt = r->prompt;
        t.options = r->options;
        t.special_tokens = r->special_tokens;
        t.options.stream_text = static_cast<bool>(r->on_text);
        t.options.on_token = [r](const TokenEvent& event) {
          if (r->on_text && !event.text_delta.empty() && !r->on_text(event.text_delta)) return false;
          return !r->cancelled.load();
        };
        joining.emplace_back(next_id, std::move(t));
        running.emplace(next_id++, std::move(request));
      }
    }
    for (const auto& request : cancelled) finish(*request, Error{ErrorCode::kCancelled, "cancelled"});
    return joining;  // none while idle: stopping with nothing queued, the engine returns
  };
  const BatchSink on_result = [&](size_t id, Result<TextGeneration>&& result) {
    auto it = running.find(id);
    if (it == running.end()) return;
    std::shared_ptr<LmRequest> request = std::move(it->second);
    running.erase(it);
    if (result) {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.sequences;
      stats_.prompt_tokens += result.value().prompt_tokens;
      stats_.generated_tokens += result.value().ids.size();
    }
    finish(*request, std::move(result));
  };
  // Returns at once only if the Generator is busy elsewhere, which this one never is.
  (void)generator_.generate_continuously(next_requests, on_result);
}

}  // namespace petrel::serve
