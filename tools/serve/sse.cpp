#include "serve/sse.h"

#include <utility>

#include "serve/http_server.h"
#include "serve/request_json.h"

namespace petrel::serve {

void EventStream::push(std::string frame) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finished_) return;
    pending_ += frame;
  }
  cv_.notify_all();
}

void EventStream::send(const nlohmann::json& data) { push("data: " + json_text(data) + "\n\n"); }
void EventStream::send_done() { push("data: [DONE]\n\n"); }

void EventStream::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
  }
  cv_.notify_all();
}

bool EventStream::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return cv_.wait_for(lock, timeout, [&] { return finished_ || !pending_.empty(); });
}

bool EventStream::has_events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !pending_.empty();
}

bool EventStream::finished() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return finished_;
}

std::string EventStream::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(pending_, std::string());
}

void respond_with_events(httplib::Response& res, std::shared_ptr<EventStream> events,
                         std::chrono::steady_clock::time_point deadline, std::function<void(bool timed_out)> on_abort) {
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  auto aborted = std::make_shared<bool>(false);
  res.set_chunked_content_provider(
      "text/event-stream",
      [events, deadline, on_abort, aborted](size_t, httplib::DataSink& sink) {
        auto abort = [&](bool timed_out) {
          if (!*aborted) on_abort(timed_out);
          *aborted = true;
        };
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline) abort(true);
        if (now >= deadline + std::chrono::seconds(5)) return false;  // the producer did not end the stream
        if (events->wait(std::chrono::milliseconds(100))) {
          const std::string frames = events->take();
          // An empty write would end cpp-httplib's chunked stream: only events are written.
          if (!frames.empty() && !sink.write(frames.data(), frames.size())) {
            abort(false);
            return false;
          }
          if (events->finished() && !events->has_events()) {
            if (Connection* c = Connection::current()) c->count_tokens(events->tokens());
            sink.done();
          }
          return true;
        }
        if (!sink.is_writable()) {
          abort(false);
          return false;
        }
        return true;
      });
}

}  // namespace petrel::serve
