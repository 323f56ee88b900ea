// End-to-end (message level) flow control, IBA 9.7.7.2: a responder tells
// the requester, in the AETH of its acknowledgements, how many receive
// WQEs it has available beyond the message the ACK's MSN names; the
// requester then knows the last message number (the limit) it may send
// that consumes one (SEND, RDMA WRITE with immediate).
//
// The credit field is the AETH syndrome's low five bits (IBA 9.3.5, with
// bits 6..5 = 00, an ACK). It does not carry the count but a code
// (IBA table 46): 0..30 stand for counts growing roughly by half each
// step up to 32768, and 31 (0x1F) is "invalid": the responder does not
// count its receive WQEs (it has a shared receive queue, or does not do
// end-to-end flow control), and the requester sends without limit.
#pragma once

#include <cstdint>
#include <optional>

#include "droce/wire/headers.h"

namespace droce::transport {

constexpr uint8_t kCreditCodeCount = 31;      // codes 0..30 carry a count
constexpr uint8_t kCreditCodeInvalid = wire::kAethCreditsInvalid;  // 0x1F: no count

// The count a credit code stands for (IBA table 46); nullopt for 0x1F and
// for anything that is not a five-bit code.
std::optional<uint32_t> credits_of_code(uint8_t code);

// The code a responder advertises for `available` receive WQEs: the
// largest whose count does not exceed them, so the requester never
// believes in a WQE that is not there (a count between two codes is
// rounded down; more than 32768 is advertised as 32768).
uint8_t credit_code_for(uint64_t available);

// The requester's side: what the ACKs have told it. Message numbers are
// 24 bits, as the AETH MSN (IBA 9.7.5.1.2), and compare modulo 2^24.
class CreditLimit {
 public:
  enum class Update : uint8_t {
    kApplied,    // the limit (or the unlimited state) follows the ACK
    kMalformed,  // the field cannot be believed: ignored (see on_ack)
  };

  // An acknowledgement's MSN and credit code. `newest_ssn`: the number of
  // the newest message sent. Malformed, and ignored: an MSN beyond
  // newest_ssn (it acknowledges a message never sent, so the limit it
  // implies means nothing), a code that is not five bits, or a responder
  // that switches between counting (0..30) and not counting (0x1F): its
  // receive queue is either its own or shared for the connection's life.
  // A limit behind the one known already (an older ACK overtaken, or a
  // count rounded down to its code) leaves the known one.
  Update on_ack(uint32_t msn, uint8_t code, uint32_t newest_ssn);

  // May the message numbered `ssn`, the next to start, consume a receive
  // WQE? Yes when a credit covers it (ssn <= the limit), when the
  // responder does not count, and when no message is outstanding (`idle`):
  // without credits the requester may still send one message at a time,
  // whose answer (an ACK with credits, or an RNR NAK and its retry) tells
  // it more (IBA 9.7.7.2). That also lets the first message of a
  // connection go before any ACK.
  bool allows(uint32_t ssn, bool idle) const;

  bool unlimited() const { return mode_ == Mode::kUnlimited; }
  uint32_t acked_msn() const { return msn_; }
  uint32_t limit() const { return lsn_; }

 private:
  enum class Mode : uint8_t { kUnknown, kCounted, kUnlimited };
  Mode mode_ = Mode::kUnknown;
  uint32_t msn_ = 0;  // the newest MSN acknowledged
  uint32_t lsn_ = 0;  // the limit: the last message a credit covers
};

}  // namespace droce::transport
