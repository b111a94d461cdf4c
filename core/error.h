// Error types shared by the core library and its adapters.
#pragma once

#include <stdexcept>
#include <string>

namespace dl {

// Bad user input (an option value, a config key, a trace row). The message is
// complete and meant to be shown to the user as is, e.g.
// "--dl-gpus=abc: expected a whole number from 1 to 64".
class InputError : public std::invalid_argument {
 public:
  explicit InputError(const std::string& message) : std::invalid_argument(message) {}
};

// A failure of the system or of a foreign library, with enough context to act on.
class SystemError : public std::runtime_error {
 public:
  explicit SystemError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace dl
