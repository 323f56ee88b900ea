// Responder bookkeeping: the ordered queue of answers (ACK, NAK, RNR NAK,
// READ response stream, atomic ACK) and the atomic replay cache. The
// responder logic is QueuePair's receive half (src/transport/responder.cc
// and the files its steps live in, src/transport/responder_steps.h).
#pragma once

#include <cstdint>

#include "droce/transport/mr.h"

namespace droce::transport {

// What a step of the responder decides (src/transport/responder_steps.h).
enum class ResponderVerdict : uint8_t;

// One queued answer. Answers go out in PSN order (IBA 9.7.5.1: responses
// are returned in the order requests were received), so a cumulative ACK
// never overtakes the READ responses before it; consecutive ACKs coalesce.
struct Response {
  enum class Kind : uint8_t { kAck, kNak, kRead, kAtomicAck };
  Kind kind = Kind::kAck;
  uint8_t syndrome = 0;  // AETH syndrome for kAck / kNak
  uint32_t psn = 0;      // kRead: PSN of the next response packet
  uint32_t msn = 0;
  // kRead: remaining range to send, in the region the request was checked
  // against (its key and registration, looked up again per packet: the
  // region may be deregistered meanwhile).
  uint32_t rkey = 0;
  uint64_t registration = 0;
  uint64_t va = 0;
  uint32_t remaining = 0;
  uint32_t end_psn = 0;  // one past the last response PSN
  bool first = true;      // next packet is the first of the response
  // kRead: answers again a READ whose first answer has left (responder_read.cc)
  bool replay = false;
  bool zero_length = false;
  uint64_t atomic_original = 0;
  bool fatal = false;     // kNak: the QP enters ERR once it is sent
};

// Atomic replay cache (IBA 9.7.5.3.4 ... duplicate atomic requests return the
// saved result rather than executing again). Keyed by PSN.
struct AtomicCacheEntry {
  bool valid = false;
  uint32_t psn = 0;
  uint64_t original = 0;
};
constexpr uint32_t kAtomicCacheSize = 16;

// Selective repeat (responder): WRITE placement contexts learned from RETHs,
// so packets of a message can be placed by PSN distance from its first PSN.
struct WriteContext {
  bool valid = false;
  uint32_t first_psn = 0;
  uint32_t npkts = 0;
  uint64_t va = 0;
  uint32_t length = 0;
  uint32_t rkey = 0;
};
constexpr uint32_t kWriteContexts = 16;

// Selective repeat (responder): the immediate of a WRITE with immediate
// whose last packet was placed out of order, until the expected PSN
// reaches it and its receive WQE is consumed (qp.h "Loss recovery").
struct OooImmediate {
  bool valid = false;
  uint32_t psn = 0;
  uint32_t imm_data = 0;
  uint32_t length = 0;  // the message's, for the completion's byte_len
  bool solicited = false;
};
constexpr uint32_t kOooImmediates = 16;

}  // namespace droce::transport
