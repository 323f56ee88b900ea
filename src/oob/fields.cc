#include "droce/oob/fields.h"

#include <fmt/format.h>

#include <sstream>

#include "droce/oob/channel.h"

namespace droce::oob {

Fields parse_fields(const std::string& line) {
  Fields out;
  std::istringstream in(line);
  std::string tok;
  while (in >> tok) {
    const auto eq = tok.find('=');
    if (eq != std::string::npos) out[tok.substr(0, eq)] = tok.substr(eq + 1);
  }
  return out;
}

const std::string& field(const Fields& f, const std::string& key) {
  const auto it = f.find(key);
  if (it == f.end()) throw Error(fmt::format("peer message lacks '{}'", key));
  return it->second;
}

uint64_t field_u64(const Fields& f, const std::string& key) {
  const std::string& text = field(f, key);
  size_t used = 0;
  uint64_t v = 0;
  try {
    v = std::stoull(text, &used, 0);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || text[0] == '-')
    throw Error(fmt::format("peer message: {}='{}' is not a number", key, text));
  return v;
}

}  // namespace droce::oob
