// End-to-end credits (credits.h, IBA 9.7.7.2).
#include "droce/transport/credits.h"

#include <algorithm>
#include <array>

#include "droce/wire/psn.h"

namespace droce::transport {

namespace {

// IBA table 46: the AETH credit codes 0..30 and the receive WQEs each
// stands for.
constexpr std::array<uint32_t, kCreditCodeCount> kCreditCounts = {
    0,    1,    2,    3,    4,    6,    8,     12,    16,    24,    32,
    48,   64,   96,   128,  192,  256,  384,   512,   768,   1024,  1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768};

}  // namespace

std::optional<uint32_t> credits_of_code(uint8_t code) {
  if (code >= kCreditCodeCount) return std::nullopt;
  return kCreditCounts[code];
}

// Per ACK sent: a binary search over the table (the count of code 0 is 0,
// so some code always fits).
uint8_t credit_code_for(uint64_t available) {
  const auto above = std::upper_bound(kCreditCounts.begin(), kCreditCounts.end(), available);
  return static_cast<uint8_t>(above - kCreditCounts.begin() - 1);
}

CreditLimit::Update CreditLimit::on_ack(uint32_t msn, uint8_t code, uint32_t newest_ssn) {
  msn &= wire::kPsnMask;
  if (code > kCreditCodeInvalid || wire::psn_gt(msn, newest_ssn)) return Update::kMalformed;
  const bool counted = code != kCreditCodeInvalid;
  if ((counted && mode_ == Mode::kUnlimited) || (!counted && mode_ == Mode::kCounted))
    return Update::kMalformed;
  mode_ = counted ? Mode::kCounted : Mode::kUnlimited;
  if (wire::psn_gt(msn, msn_)) msn_ = msn;
  if (counted) {
    const uint32_t lsn = wire::psn_add(msn, kCreditCounts[code]);
    if (wire::psn_gt(lsn, lsn_)) lsn_ = lsn;
  }
  return Update::kApplied;
}

bool CreditLimit::allows(uint32_t ssn, bool idle) const {
  return idle || mode_ == Mode::kUnlimited || wire::psn_le(ssn, lsn_);
}

}  // namespace droce::transport
