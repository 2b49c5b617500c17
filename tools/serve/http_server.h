// The HTTP layer: cpp-httplib's server with connections handled here, so that a slow or
// hostile client cannot hold a thread or memory for long: a request's head and body must
// arrive within a deadline from its first byte and within a byte budget (cpp-httplib
// 0.11.4 bounds neither the number of header lines nor a chunked body), writes that make
// no progress time out, and handlers can ask whether their client has gone (0.11.4's
// Request has no is_connection_closed). Also: the per-request log line, and draining for
// a graceful shutdown.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

namespace petrel::serve {

struct HttpLimits {
  size_t max_body_bytes = size_t{4} << 20;
  size_t max_head_bytes = size_t{64} << 10;  // request line and headers together
  int request_seconds = 10;                  // a request's head and body arrive within this of its first byte
  int write_seconds = 10;                    // a response write that makes no progress for this long fails
  int keep_alive_seconds = 5;                // an idle connection is closed after this
  size_t keep_alive_requests = 1000;         // requests per connection
  size_t threads = 64;                       // connections served at once (more wait to be accepted)
  int backlog = 512;                         // the listening socket's queue of connections
};

// The connection a request arrived on, as its handler sees it (the calling thread's).
class Connection {
 public:
  // The connection of the request this thread is handling; null outside one.
  static Connection* current();
  // The client closed the connection (or it failed): work for it can stop.
  virtual bool peer_closed() const = 0;
  // The request is read: its arrival deadline and byte budget no longer apply.
  virtual void finish_reading() = 0;
  // The request did not arrive within its deadline (its body, when read fails).
  virtual bool read_timed_out() const = 0;
  // Close the connection once the response is written (a body that was not read).
  virtual void close_after_response() = 0;
  // Tokens generated for the request (the log line's).
  virtual void count_tokens(size_t tokens) = 0;

 protected:
  ~Connection() = default;
};

// How waiting for a request's work ended.
enum class WaitEnd { kDone, kClientGone, kTimedOut };
// Waits for work done on another thread: `wait_step(timeout)` waits up to `timeout` and
// says whether the work is done; between steps the client's connection and `deadline`
// are checked.
WaitEnd wait_for_work(const std::function<bool(std::chrono::milliseconds)>& wait_step,
                      std::chrono::steady_clock::time_point deadline);

class HttpServer : public httplib::Server {
 public:
  explicit HttpServer(const HttpLimits& limits);

  // Binds `host`:`port` (0: any free port). The port, or -1.
  int bind(const std::string& host, int port);

  // A POST route whose handler gets the body read within the limits (413 past
  // max_body_bytes, 408 past the deadline, 400 when it ends early).
  using BodyHandler = std::function<void(const httplib::Request&, const std::string& body, httplib::Response&)>;
  void post(const std::string& path, BodyHandler handler);
  void get(const std::string& path, httplib::Server::Handler handler);

  // From now on every connection closes after its current request and idle ones close.
  void begin_draining() { draining_ = true; }
  bool draining() const { return draining_; }
  // Requests being read, handled or answered.
  size_t requests_in_progress() const { return in_progress_; }
  const HttpLimits& limits() const { return limits_; }

 private:
  bool process_and_close_socket(socket_t sock) override;

  HttpLimits limits_;
  std::atomic<bool> draining_{false};
  std::atomic<size_t> in_progress_{0};
};

}  // namespace petrel::serve
