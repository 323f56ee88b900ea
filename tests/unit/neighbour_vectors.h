// Frames python3-scapy built (an independent implementation of RFC 826,
// RFC 792, RFC 4443 and RFC 4861): the scapy expression above each one.
// Shared by the wire and the interface tests.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "droce/wire/bytes.h"
#include "droce/wire/headers.h"
#include "droce/wire/packet.h"

namespace droce::wire::vectors {

inline std::vector<uint8_t> hex(const std::string& s) {
  std::vector<uint8_t> v;
  for (size_t i = 0; i + 1 < s.size(); i += 2) v.push_back(static_cast<uint8_t>(std::stoul(s.substr(i, 2), nullptr, 16)));
  return v;
}

inline IpAddress v6(std::initializer_list<uint16_t> words) {
  IpAddress a;
  a.v6 = true;
  size_t i = 0;
  for (uint16_t w : words) store_be16(a.bytes + 2 * i++, w);
  return a;
}

inline const MacAddress kA{2, 0, 0, 0, 0, 0x0a};
inline const MacAddress kB{2, 0, 0, 0, 0, 0x0b};

// Ether(dst=ff.., src=A)/ARP(op=1, hwsrc=A, psrc=10.0.0.1, pdst=10.0.0.2)
inline const char* kArpRequest =
    "ffffffffffff02000000000a0806000108000604000102000000000a0a0000010000000000000a0000020000"
    "00000000000000000000000000000000";
// Ether(dst=A, src=B)/ARP(op=2, hwsrc=B, psrc=10.0.0.2, hwdst=A, pdst=10.0.0.1)
inline const char* kArpReply =
    "02000000000a02000000000b0806000108000604000202000000000b0a00000202000000000a0a0000010000"
    "00000000000000000000000000000000";
// ... /Dot1Q(vlan=100, prio=3)/ARP(op=1, ...)
inline const char* kArpRequestVlan =
    "ffffffffffff02000000000a810060640806000108000604000102000000000a0a0000010000000000000a00"
    "00020000000000000000000000000000";


// Ether(dst=B, src=A)/IP(src=10.0.0.1, dst=10.0.0.2, id=7, flags=DF, ttl=64)
//   /ICMP(type=8, id=0x1234, seq=5)/b'droce-ping-data!'
inline const char* kEchoRequest =
    "02000000000b02000000000a08004500002c00074000400126c80a0000010a0000020800ddf8123400056472"
    "6f63652d70696e672d64617461210000";
// The reply scapy builds: addresses swapped, id 0, DF, TTL 64, type 0.
inline const char* kEchoReply =
    "02000000000a02000000000b08004500002c00004000400126cf0a0000020a0000010000e5f8123400056472"
    "6f63652d70696e672d64617461210000";
// Ether(dst=33:33:ff:00:00:02, src=A)/IPv6(src=2001:db8::1, dst=ff02::1:ff00:2, hlim=255)
//   /ICMPv6ND_NS(tgt=2001:db8::2)/ICMPv6NDOptSrcLLAddr(lladdr=A)
inline const char* kNs =
    "3333ff00000202000000000a86dd6000000000203aff20010db8000000000000000000000001ff0200000000"
    "000000000001ff00000287001c1e0000000020010db8000000000000000000000002010102000000000a";
// Ether(dst=A, src=B)/IPv6(src=2001:db8::2, dst=2001:db8::1, hlim=255)
//   /ICMPv6ND_NA(tgt=2001:db8::2, R=0, S=1, O=1)/ICMPv6NDOptDstLLAddr(lladdr=B)
inline const char* kNa =
    "02000000000a02000000000b86dd6000000000203aff20010db800000000000000000000000220010db80000"
    "0000000000000000000188008a686000000020010db8000000000000000000000002020102000000000b";
// ICMPv6EchoRequest(id=0x42, seq=9, data=b'abcdefgh') from ::1 to ::2, hlim 64,
// and the EchoReply scapy builds.
inline const char* kEcho6Request =
    "02000000000b02000000000a86dd6000000000103a4020010db800000000000000000000000120010db80000"
    "000000000000000000028000925f004200096162636465666768";
inline const char* kEcho6Reply =
    "02000000000a02000000000b86dd6000000000103a4020010db800000000000000000000000220010db80000"
    "000000000000000000018100915f004200096162636465666768";

}  // namespace droce::wire::vectors
