// Packets as the fabric model moves them: an owned byte buffer (the Ethernet
// frame without FCS) plus the metadata a switch attaches on ingress.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <span>
#include <utility>
#include <vector>

#include "droce/memory/huge_page_pool.h"
#include "droce/wire/headers.h"
#include "droce/wire/icrc.h"

namespace droce::fabric {

constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
constexpr size_t kNumClasses = 8;  // IEEE 802.1Q traffic classes / priorities

// An allocator that leaves bytes added by resize() uninitialised. Frame
// buffers are always written before they are read; the simulator recycles
// buffers of a few KiB per frame, and zero-filling them on every resize was
// a tenth of its run time.
template <class T>
struct UninitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  UninitAllocator() = default;
  template <class U>
  UninitAllocator(const UninitAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  // Frame buffers of a kilobyte or more live in huge pages
  // (memory/huge_page_pool.h).
  T* allocate(size_t n) { return static_cast<T*>(memory::huge_page_allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { memory::huge_page_deallocate(p, n * sizeof(T)); }
};
using FrameBytes = std::vector<uint8_t, UninitAllocator<uint8_t>>;

struct Packet {
  FrameBytes bytes;
  // Set by the switch on ingress.
  uint16_t ingress_port = 0;
  uint8_t tc = 0;            // traffic class = PFC priority (identity map)
  uint8_t ip_version = 0;    // 0: not IP, 4 or 6
  uint16_t l3_offset = 0;
  uint32_t accounted = 0;    // bytes charged to the buffer at enqueue
  uint64_t enqueue_time = 0;
  // Free for the caller (flow id, sequence number for tracing).
  uint64_t tag = 0;
  // Payload the frame carries as a length only (wire/icrc.h): its bytes in
  // the buffer are unspecified and nothing reads them.
  wire::UnheldPayload unheld{};
  // Bytes of the unheld payload that `bytes` leaves out: 0, or unheld.len
  // for an elided frame (elide below), whose buffer holds only what is
  // before and after its payload. Header fields, and size(), still count
  // the payload: the frame is as long on the wire either way.
  uint16_t elided = 0;

  // The frame's length on the wire (without FCS).
  size_t size() const { return bytes.size() + elided; }
  // Where the unheld payload is in the frame, in wire offsets
  // (wire::unheld_range); in `bytes` too unless the frame is elided.
  std::pair<size_t, size_t> unheld_range() const { return wire::unheld_range(size(), unheld); }
  // Where the frame's byte at wire offset `at` (not in the unheld payload)
  // is in `bytes`.
  size_t held_offset(size_t at) const {
    return elided && at >= unheld_range().second ? at - elided : at;
  }
};

// Elided frames: a frame whose payload is all unheld needs a buffer for
// its headers and ICRC only, where the whole frame takes kilobytes. The
// simulator keeps tens of thousands of frames in flight, and their
// buffers' first touch (the kernel zeroing their pages) was a tenth of a
// 1024-host run. Switches and links work on elided frames as they are;
// an endpoint receives the whole frame (restore).
//
// Puts `frame` (a whole frame whose unheld payload is `unheld`) into `out`
// elided, or whole when its unheld payload does not lie in it.
void elide(std::span<const uint8_t> frame, wire::UnheldPayload unheld, Packet& out);
// The whole frame of `p` in `room` (at least p.size() bytes): its held
// bytes where they belong; the bytes of the unheld payload are left as
// they were (unspecified, as nothing reads them).
std::span<const uint8_t> restore(const Packet& p, std::span<uint8_t> room);

// A packet leaving a switch port or a link.
struct Departure {
  uint16_t port = 0;
  uint64_t start_time = 0;  // first bit on the wire
  uint64_t time = 0;        // last bit on the wire (store-and-forward view)
  Packet packet;
};

// Header fields a switch looks at; filled by classify_frame().
struct FrameInfo {
  bool vlan = false;
  uint8_t pcp = 0;
  uint16_t ether_type = 0;  // after any VLAN tag
  uint8_t ip_version = 0;   // 0 when neither IPv4 nor IPv6
  uint16_t l3_offset = 0;
  uint8_t dscp = 0;
  wire::Ecn ecn = wire::Ecn::kNotEct;
  uint8_t protocol = 0;
  uint8_t src_ip[16] = {};  // IPv4 in the first 4 bytes
  uint8_t dst_ip[16] = {};
  bool has_ports = false;   // UDP and long enough for its header
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
};

// Light, unchecked header walk (no checksums: switches forward corrupted
// packets and the endpoint's ICRC check catches them). False if the frame is
// too short for its Ethernet/IP headers.
bool classify_frame(std::span<const uint8_t> frame, FrameInfo& out);

enum class MarkResult : uint8_t { kMarked, kAlreadyCe, kNotEct, kNotIp };

// Sets the ECN field to CE (RFC 3168 section 5) if the packet is ECT(0) or
// ECT(1). The IPv4 header checksum is patched incrementally (RFC 1624 eqn. 3);
// the ICRC masks TOS / traffic class, so it stays valid.
MarkResult mark_ce(std::span<uint8_t> frame, uint16_t l3_offset, uint8_t ip_version);

}  // namespace droce::fabric
