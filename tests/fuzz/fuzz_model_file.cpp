// Fuzz target: a model file (.petrel) from untrusted bytes. The loader (verify +
// bind, from memory) must refuse a bad file with a message; whatever it accepts must
// keep the loader's promises and run (exercise_model.h) without a crash, a leak or a
// sanitizer report.
#include <cstdint>

#include "exercise_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto loaded = petrel::Model::load_from_memory(data, size, "fuzz.petrel");
  if (!loaded) {
    petrel::fuzz::require(!loaded.error().message.empty(), "a refused file gets a message");
    return 0;
  }
  petrel::fuzz::exercise(loaded.value());
  return 0;
}
