#pragma once

#include <stdexcept>
#include <string>

namespace petrel::convert {

// The converter is a tool, not the engine: it reports problems by throwing this,
// and the CLI turns it into a message and a non-zero exit.
class ConvertError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace petrel::convert
