// What a user's mistake says: the message of the ConfigError `fn` throws,
// for tests that check messages name the option and the accepted form.
#pragma once

#include <string>

#include "droce/config_error.h"

namespace droce::testing {

// ConfigError's what(), or "(no error)" when `fn` returns.
inline std::string config_error_of(auto&& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace droce::testing
