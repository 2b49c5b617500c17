#include "serve/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "serve/request_json.h"

namespace petrel::serve {
namespace {

using Clock = std::chrono::steady_clock;

// A client socket as cpp-httplib's Stream, read through a buffer. Each request is read
// under a deadline (from its first byte) and a byte budget; writes are non-blocking with
// a timeout on progress.
class SocketConnection final : public httplib::Stream, public Connection {
 public:
  SocketConnection(int fd, const HttpLimits& limits) : fd_(fd), limits_(limits) {}

  // Waits up to the keep-alive time for the next request's first byte; false when the
  // client closed, the time passed, or `stop()` became true (checked a few times a second)
  // on a connection that has had a request (a new one's first request is always waited
  // for: while draining it is answered 503, not dropped).
  bool wait_for_request(const std::function<bool()>& stop, bool first) {
    if (begin_ < end_) return true;  // pipelined
    const auto give_up = Clock::now() + std::chrono::seconds(limits_.keep_alive_seconds);
    for (;;) {
      // Stopping, a request that has already arrived is still answered (draining: with 503).
      const bool stopping = !first && stop();
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now()).count();
      pollfd p{fd_, POLLIN, 0};
      const int r = ::poll(&p, 1, stopping ? 0 : static_cast<int>(std::clamp<long long>(left, 0, 100)));
      if (r < 0 && errno != EINTR) return false;
      if (r > 0) return (p.revents & POLLIN) != 0 && fill(0) > 0;
      if (stopping || left <= 0) return false;
    }
  }

  void begin_request() {
    started_ = Clock::now();
    deadline_ = started_ + std::chrono::seconds(limits_.request_seconds);
    reading_ = true;
    timed_out_ = over_budget_ = false;
    consumed_ = 0;
    budget_ = limits_.max_head_bytes;
    close_ = false;
    tokens_ = 0;
  }
  Clock::time_point started() const { return started_; }
  size_t tokens() const { return tokens_; }
  bool closing() const { return close_; }
  bool reading() const { return reading_; }

  // Half-closes and reads (and drops) what the client still sends, until it closes or
  // for 2 seconds.
  void linger() {
    ::shutdown(fd_, SHUT_WR);
    const auto give_up = Clock::now() + std::chrono::seconds(2);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now()).count();
      if (left <= 0 || !wait(POLLIN, static_cast<int>(left))) return;
      const ssize_t n = ::recv(fd_, buffer_, sizeof buffer_, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) return;
    }
  }

  // Connection
  bool peer_closed() const override {
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) < 0) return false;
    if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return true;
    if (p.revents & POLLIN) {
      char c;
      const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
      return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    }
    return false;
  }
  void finish_reading() override { reading_ = false; }
  // The head is read and the handler reads the body: the body's budget (its bytes and
  // any chunked framing) replaces the head's.
  void begin_body() {
    consumed_ = 0;
    budget_ = 2 * limits_.max_body_bytes + 4096;
  }
  bool read_timed_out() const override { return timed_out_; }
  bool read_over_budget() const { return over_budget_; }
  void close_after_response() override { close_ = true; }
  void count_tokens(size_t tokens) override { tokens_ += tokens; }

  // httplib::Stream
  bool is_readable() const override { return begin_ < end_ || wait(POLLIN, remaining_ms()); }
  bool is_writable() const override { return !peer_closed(); }
  ssize_t read(char* ptr, size_t size) override {
    if (begin_ == end_) {
      const ssize_t n = fill(remaining_ms());
      if (n <= 0) return n;
    }
    size_t n = std::min(size, end_ - begin_);
    if (reading_) {  // the head (a GET's body too), then a POST's body, within their budgets
      if (consumed_ >= budget_) {
        over_budget_ = true;
        return -1;
      }
      n = std::min(n, budget_ - consumed_);
      consumed_ += n;
    }
    std::memcpy(ptr, buffer_ + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    for (;;) {
      const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      if (!wait(POLLOUT, limits_.write_seconds * 1000)) return -1;  // no progress: the client stopped reading
    }
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(false, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  // Milliseconds left to read the current request (while it is being read).
  int remaining_ms() const {
    if (!reading_) return limits_.request_seconds * 1000;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
    return static_cast<int>(std::max<long long>(left, 0));
  }
  bool wait(short events, int ms) const {
    pollfd p{fd_, events, 0};
    for (;;) {
      const int r = ::poll(&p, 1, ms);
      if (r < 0 && errno == EINTR) continue;
      return r > 0 && (p.revents & (events | POLLHUP | POLLERR)) != 0;
    }
  }
  // Reads what the socket has (waiting up to `ms`) into the empty buffer.
  ssize_t fill(int ms) {
    begin_ = end_ = 0;
    if (ms > 0 || reading_) {
      if (!wait(POLLIN, ms)) {
        if (reading_) timed_out_ = true;
        return -1;
      }
    }
    for (;;) {
      const ssize_t n = ::recv(fd_, buffer_, sizeof buffer_, MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return -1;
      end_ = static_cast<size_t>(n);
      return n;
    }
  }
  void address(bool remote, std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    const int r = remote ? ::getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len)
                         : ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    ip.clear();
    port = -1;
    if (r != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
      ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
      port = ntohs(v4->sin_port);
    } else if (a.ss_family == AF_INET6) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
      ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
      port = ntohs(v6->sin6_port);
    }
    ip = text;
  }

  int fd_;
  const HttpLimits& limits_;
  char buffer_[4096];
  size_t begin_ = 0, end_ = 0;
  Clock::time_point started_{}, deadline_{};
  bool reading_ = false, timed_out_ = false, over_budget_ = false, close_ = false;
  size_t consumed_ = 0, budget_ = 0, tokens_ = 0;
};

thread_local SocketConnection* current_connection = nullptr;

// The body of an error cpp-httplib answers itself (no route, a malformed request line, a
// header too long): the error shape of the API the path belongs to.
std::string error_body(const std::string& path, int status) {
  std::string message = status == 404 ? "no route for this method and path"
                        : status == 413 ? "the request body is too large"
                        : status == 414 ? "the request URI is too long"
                        : status == 408 ? "the request did not arrive in time"
                        : status == 431 ? "the request's head (its line and headers) is too large"
                                        : "bad request (HTTP status " + std::to_string(status) + ")";
  if (path.rfind("/v1/", 0) == 0) {
    const char* type = status == 404 ? "not_found_error" : status >= 500 ? "server_error" : "invalid_request_error";
    return json_text({{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}}}});
  }
  return json_text({{"error", message}});
}

}  // namespace

Connection* Connection::current() { return current_connection; }

WaitEnd wait_for_work(const std::function<bool(std::chrono::milliseconds)>& wait_step, Clock::time_point deadline) {
  const Connection* connection = Connection::current();
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (wait_step(std::clamp(left, std::chrono::milliseconds(0), std::chrono::milliseconds(100)))) return WaitEnd::kDone;
    if (Clock::now() >= deadline) return WaitEnd::kTimedOut;
    if (connection != nullptr && connection->peer_closed()) return WaitEnd::kClientGone;
  }
}

HttpServer::HttpServer(const HttpLimits& limits) : limits_(limits) {
  set_payload_max_length(limits_.max_body_bytes);
  set_keep_alive_max_count(limits_.keep_alive_requests);
  set_keep_alive_timeout(limits_.keep_alive_seconds);
  set_read_timeout(limits_.request_seconds);
  set_write_timeout(limits_.write_seconds);
  const size_t threads = limits_.threads;
  new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    SocketConnection* connection = current_connection;
    if (connection != nullptr && connection->reading()) {
      // The request was not read whole (its head was malformed, too large or too slow):
      // what follows on the connection cannot be trusted to start a request.
      connection->close_after_response();
      res.set_header("Connection", "close");
      if (res.body.empty() && connection->read_timed_out()) res.status = 408;
      if (res.body.empty() && connection->read_over_budget()) res.status = 431;
    }
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    res.set_content(error_body(req.path, res.status), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
    res.status = 500;
    res.set_content(error_body(req.path, 500), "application/json");
  });
  // One line per request on standard error, once its response is written.
  set_logger([](const httplib::Request& req, const httplib::Response& res) {
    double ms = 0;
    size_t tokens = 0;
    if (const SocketConnection* c = current_connection) {
      ms = std::chrono::duration<double, std::milli>(Clock::now() - c->started()).count();
      tokens = c->tokens();
    }
    std::fprintf(stderr, "petrel-serve: %s %s %d %.1f ms %zu tokens\n", req.method.empty() ? "-" : req.method.c_str(),
                 req.path.empty() ? "-" : req.path.c_str(), res.status, ms, tokens);
  });
}

int HttpServer::bind(const std::string& host, int port) {
  const int bound = port == 0 ? bind_to_any_port(host) : (bind_to_port(host, port) ? port : -1);
  // cpp-httplib listens with a queue of 5: many clients connecting at once would wait for
  // SYN retries. listen() again sets the queue's length.
  if (bound >= 0) ::listen(svr_sock_, limits_.backlog);
  return bound;
}

void HttpServer::get(const std::string& path, httplib::Server::Handler handler) {
  Get(path, [handler](const httplib::Request& req, httplib::Response& res) {
    if (current_connection) current_connection->finish_reading();
    handler(req, res);
  });
}

void HttpServer::post(const std::string& path, BodyHandler handler) {
  const size_t max_body = limits_.max_body_bytes;
  Post(path, [handler, max_body](const httplib::Request& req, httplib::Response& res,
                                 const httplib::ContentReader& reader) {
    SocketConnection* connection = current_connection;
    auto refuse = [&](int status, const std::string& message) {
      // The rest of the body is not read: the connection cannot carry another request.
      if (connection) connection->close_after_response();
      res.status = status;
      res.set_content(req.path.rfind("/v1/", 0) == 0
                          ? json_text({{"error",
                                        {{"message", message},
                                         {"type", "invalid_request_error"},
                                         {"param", nullptr},
                                         {"code", status == 413 ? "request_too_large" : nullptr}}}})
                          : json_text({{"error", message}}),
                      "application/json");
    };
    const std::string length = req.get_header_value("Content-Length");
    if (!length.empty()) {
      char* end = nullptr;
      errno = 0;
      const unsigned long long declared = std::strtoull(length.c_str(), &end, 10);
      if (*end != '\0' || errno != 0 || length[0] == '-')
        return refuse(400, "Content-Length '" + length + "' is not a number");
      if (declared > max_body)
        return refuse(413, "the request body is " + length + " bytes, more than the " + std::to_string(max_body) +
                               " this server takes");
    }
    if (connection) connection->begin_body();
    std::string body;
    bool too_large = false;
    const bool read = reader([&](const char* data, size_t size) {
      if (body.size() + size > max_body) {
        too_large = true;
        return false;
      }
      body.append(data, size);
      return true;
    });
    if (too_large || (connection && connection->read_over_budget()))
      return refuse(413, "the request body is more than the " + std::to_string(max_body) + " bytes this server takes");
    if (!read) {
      if (connection && connection->read_timed_out())
        return refuse(408, "the request body did not arrive within the time allowed");
      return refuse(400, "the request body ended before its declared length (or its encoding is broken)");
    }
    if (connection) connection->finish_reading();
    handler(req, body, res);
  });
  // A POST without a body (no Content-Length, not chunked) is routed here.
  Post(path, [handler](const httplib::Request& req, httplib::Response& res) {
    if (current_connection) current_connection->finish_reading();
    handler(req, std::string(), res);
  });
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  SocketConnection connection(sock, limits_);
  current_connection = &connection;
  bool ok = true;
  auto stop = [this] { return draining_.load() || svr_sock_ == INVALID_SOCKET; };
  for (size_t served = 0; served < limits_.keep_alive_requests; ++served) {
    if (!connection.wait_for_request(stop, served == 0)) break;
    connection.begin_request();
    ++in_progress_;
    const bool last = served + 1 == limits_.keep_alive_requests || draining_;
    bool closed_by_client = false;
    ok = process_request(connection, last, closed_by_client, nullptr);
    --in_progress_;
    if (!ok || closed_by_client || connection.closing() || last) break;
  }
  current_connection = nullptr;
  // A request whose body was not read leaves bytes behind: closing on them would reset the
  // connection, and the client could lose the answer (a 413). Lingering: stop sending, then
  // take what the client still sends, for a moment, before closing.
  if (connection.reading()) connection.linger();
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace petrel::serve
