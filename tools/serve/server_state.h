// What every handler shares: the models, whether they are loaded, the API key, the
// per-request timeout, and the HTTP server (draining).
#pragma once

#include <atomic>
#include <cctype>
#include <chrono>
#include <string>

#include "serve/http_server.h"
#include "serve/model_registry.h"

namespace petrel::serve {

struct ServerState {
  HttpServer* http = nullptr;
  ModelRegistry registry;           // filled before `ready`
  std::atomic<bool> ready{false};   // every model is loaded
  std::string api_key;              // empty: none asked
  int timeout_seconds = 600;        // from a request's arrival to its last byte out

  std::chrono::steady_clock::time_point deadline() const {
    return std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  }
  // Whether `given` is the API key, compared in time independent of where they differ.
  bool key_matches(const std::string& given) const {
    unsigned char diff = given.size() == api_key.size() ? 0 : 1;
    for (size_t i = 0; i < given.size(); ++i)
      diff |= static_cast<unsigned char>(given[i] ^ api_key[i % (api_key.empty() ? 1 : api_key.size())]);
    return diff == 0 && !api_key.empty();
  }
  // The API key of an `Authorization: Bearer KEY` header, or empty.
  static std::string bearer_key(const httplib::Request& req) {
    const std::string header = req.get_header_value("Authorization");
    const std::string scheme = "Bearer ";
    if (header.size() <= scheme.size()) return {};
    for (size_t i = 0; i < scheme.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(header[i])) != std::tolower(static_cast<unsigned char>(scheme[i])))
        return {};
    return header.substr(scheme.size());
  }
};

}  // namespace petrel::serve
