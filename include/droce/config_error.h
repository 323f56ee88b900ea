// The one error type for a mistake in what a user gave: a command-line
// option, a config file key, an environment variable, a congestion-control
// parameter. `option()` names it (empty when the message names it itself);
// what() is "<option>: <message>". Every app reports it the same way
// ("<app>: <what>") and exits with kExitConfig (docs/DESIGN.md "Error
// handling"). Derived from std::invalid_argument: the value is what is wrong,
// not the run.
#pragma once

#include <stdexcept>
#include <string>

namespace droce {

class ConfigError : public std::invalid_argument {
 public:
  explicit ConfigError(const std::string& message) : std::invalid_argument(message) {}
  ConfigError(std::string option, const std::string& message)
      : std::invalid_argument(option.empty() ? message : option + ": " + message),
        option_(std::move(option)) {}
  const std::string& option() const { return option_; }

 private:
  std::string option_;
};

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;  // the run failed (a peer vanished, a leak found)
constexpr int kExitConfig = 2;   // bad configuration or usage

}  // namespace droce
