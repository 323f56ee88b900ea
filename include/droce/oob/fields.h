// The fields of an out-of-band message: "WORD key=value key=value ...".
// A peer's words are input like any other: a missing key or a malformed
// number is an oob::Error naming it, never a bare std::stoull exception.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace droce::oob {

using Fields = std::map<std::string, std::string>;

// The key=value tokens of a line; tokens without '=' (the message's
// leading word) are skipped.
Fields parse_fields(const std::string& line);
const std::string& field(const Fields& f, const std::string& key);
// Decimal, or hexadecimal with 0x.
uint64_t field_u64(const Fields& f, const std::string& key);

}  // namespace droce::oob
