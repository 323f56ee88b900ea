// Input format and fixed bench of responder_fuzz (shared with its seed
// generator responder_corpus_gen.cc).
//
// An input is one setup byte, then records until the bytes run out:
//   [ctrl:1][word:2, big-endian][frame: word & kLenMask bytes]
// A truncated last record is fed as far as it goes. Each frame is parsed
// leniently (no IP checksum / ICRC check) to find its headers, patched as
// ctrl asks, and then parsed again — strictly, after refresh_checksums, when
// kCtrlStrict is set — and given to the QP named by its BTH dest QPN.
#pragma once

#include <cstdint>

namespace droce::fuzz {

// Setup byte.
constexpr uint8_t kSetupMtuMask = 0x03;   // path MTU 256 / 1024 / 2048 / 4096
constexpr uint8_t kSetupAckEveryN = 0x04; // responder ACKs every 3rd packet
constexpr uint8_t kSetupOneRdAtomic = 0x08;  // max_dest_rd_atomic = 1
constexpr uint8_t kSetupHonourCredits = 0x10;  // requesters honour AETH credits

// ctrl byte.
constexpr uint8_t kCtrlQpMask = 0x03;     // target: index into the QP table
constexpr uint8_t kCtrlPatchQpn = 0x04;   // BTH dest QPN := target's QPN (and
                                          // UD: DETH Q_Key := kQkey); a QP of
                                          // the opcode's transport is chosen
constexpr uint8_t kCtrlPatchPsn = 0x08;   // BTH PSN := target's expected PSN
constexpr uint8_t kCtrlKeyShift = 4;      // 2 bits: rkey in RETH/AtomicETH/IETH
constexpr uint8_t kCtrlKeyMask = 0x30;    //   0 as is, 1 MR A, 2 MR B, 3 stale
constexpr uint8_t kCtrlStrict = 0x40;     // fix checksums, parse with checks on
constexpr uint8_t kCtrlTimeJump = 0x80;   // +200 ms, then fire due timers

// word.
constexpr uint16_t kLenMask = 0x0FFF;
constexpr uint16_t kWordPatchVa = 0x2000;  // VA := iova(MR) + VA % length(MR)
constexpr uint16_t kWordPostSend = 0x4000; // post a send WR on the target
constexpr uint16_t kWordNoRecv = 0x8000;   // skip the receive-queue refill

// The QP table, in creation order (QPNs are assigned from 2).
enum QpIndex : uint8_t { kRcGbn = 0, kRcSr = 1, kUc = 2, kUd = 3 };
constexpr uint32_t kQpnBase = 2;
constexpr uint32_t kPeerQpn = 0x123456;
constexpr uint32_t kQkey = 0x11111111;
// Expected request PSN of each QP after setup (RC go-back-N near the wrap).
constexpr uint32_t kRqPsn[4] = {0xFFFFF0, 0x500, 0x10, 0};
constexpr uint32_t kSqPsn = 0x100;

// Memory: [guard][MR A][MR B][guard]; A is read/write/atomic, B remote-read
// only. Nothing outside A may ever change.
constexpr uint64_t kGuard = 4096;
constexpr uint64_t kLenA = 12288;
constexpr uint64_t kLenB = 4096;
constexpr uint64_t kIovaA = 0x10000;
constexpr uint64_t kIovaB = 0x40000;
// Local buffers inside A used by the bench's own WRs.
constexpr uint64_t kRecvOff = 4096;   // 4 x 1024 receive buffers
constexpr uint64_t kSendOff = 8192;   // local side of posted send WRs

}  // namespace droce::fuzz
