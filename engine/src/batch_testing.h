// A test seam of BatchTranslator (not installed): tests see how many batches start and
// make one fail the way a bug or a broken allocator would, by throwing.
#pragma once

#include <cstddef>
#include <functional>

namespace petrel::detail {

// Called on the translating thread before each batch, with the batch's unit count;
// whatever it throws becomes that batch's inputs' error. Empty: none (the default).
// Set it only while no BatchTranslator is translating.
void set_batch_observer(std::function<void(size_t units)> observer);

}  // namespace petrel::detail
