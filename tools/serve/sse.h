// Server-sent events: a stream of `data: ...` events produced on a scheduler's thread
// and written to the client by the connection's thread as they come (chunked), ending
// when the producer finishes, the client goes away or the request's time is up.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

namespace petrel::serve {

class EventStream {
 public:
  // Producer side (any thread).
  void send(const nlohmann::json& data);  // one event: "data: <json>\n\n"
  void send_done();                       // "data: [DONE]\n\n"
  void finish();                          // nothing follows
  void count_tokens(size_t tokens) { tokens_ += tokens; }

  // Consumer side. Waits up to `timeout` for an event or the end; true if there is either.
  bool wait(std::chrono::milliseconds timeout);
  bool has_events() const;
  bool finished() const;
  std::string take();  // every event waiting, in order
  size_t tokens() const { return tokens_; }

 private:
  void push(std::string frame);
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::string pending_;
  bool finished_ = false;
  std::atomic<size_t> tokens_{0};
};

// Answers with `events` (text/event-stream): writes them as they come until the stream
// finishes. `on_abort(timed_out)` is called once if the client goes away (writing stops)
// or `deadline` passes (writing goes on: the producer is expected to end the stream,
// saying why).
void respond_with_events(httplib::Response& res, std::shared_ptr<EventStream> events,
                         std::chrono::steady_clock::time_point deadline, std::function<void(bool timed_out)> on_abort);

}  // namespace petrel::serve
