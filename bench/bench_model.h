// The model file a language-model benchmark runs: PETREL_BENCH_MODEL, loaded once.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "petrel/model.h"

namespace petrel::bench {

// Null when PETREL_BENCH_MODEL is unset or does not load (the reason printed, prefixed
// with `program`).
inline std::shared_ptr<const Model> env_model(const char* program) {
  static std::shared_ptr<const Model> model = [program] {
    const char* path = std::getenv("PETREL_BENCH_MODEL");
    if (path == nullptr) return std::shared_ptr<const Model>();
    auto loaded = Model::load(path);
    if (!loaded) {
      std::fprintf(stderr, "%s: %s\n", program, loaded.error().message.c_str());
      return std::shared_ptr<const Model>();
    }
    return loaded.value();
  }();
  return model;
}

}  // namespace petrel::bench
