// The verbs <-> droce translation of libdroce-verbs: what the attributes,
// flags and structures of libibverbs mean for droce's transport, and what
// droce reports back in verbs' terms. DPDK-free (unit tests run it without
// EAL); the provider (src/verbs/provider.cc) only moves the results between
// the application and the engine.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "droce/transport/qp.h"
#include "droce/transport/wqe.h"
#include "droce/verbs/config.h"
#include "droce/wire/build.h"

namespace droce::verbs {

// ---- identity and GIDs

// The modified EUI-64 of a MAC (RFC 4291 appendix A: ff:fe in the middle,
// the universal/local bit flipped), as the 8 bytes of an interface
// identifier.
std::array<uint8_t, 8> eui64(const wire::MacAddress& mac);
// The node GUID: the EUI-64 in network order (what ibv_get_device_guid
// returns, a __be64).
uint64_t node_guid_be(const wire::MacAddress& mac);

// The port's GID table, as RoCE NICs fill it: index 0 the IPv6 link-local
// address fe80::<EUI-64 of the MAC>, then one GID per configured address
// (an IPv4 address as ::ffff:a.b.c.d, RFC 4291 2.5.5.2). Every entry is a
// RoCE v2 GID (IBA annex A17: the GID is the packet's IP address).
std::vector<ibv_gid> gid_table(const wire::MacAddress& mac,
                               std::span<const wire::IpAddress> addresses);
ibv_gid gid_of(const wire::IpAddress& ip);
// A GID's IP address: ::ffff:a.b.c.d is IPv4, anything else IPv6.
wire::IpAddress ip_of(const ibv_gid& gid);
// The MAC a link-local GID was made from (fe80::/64 with an EUI-64 whose
// middle is ff:fe); none for any other GID.
std::optional<wire::MacAddress> mac_of_link_local(const ibv_gid& gid);

// ---- device and port

// What droce reports of itself. vendor_part_id is outside every table of
// Mellanox part ids (perftest switches to the ibv_wr_* API for those).
constexpr uint32_t kVendorId = 0;
constexpr uint32_t kVendorPartId = 0xd0ce;
constexpr int kMaxQpWr = 32768;
constexpr int kMaxCqe = 1 << 20;
constexpr int kMaxSrqWr = 32768;
constexpr int kGidTableLen = 16;
constexpr int kMaxRdAtomic = 16;
void fill_device_attr(ibv_device_attr& a, const wire::MacAddress& mac);
// `link_up`: the port's link; `mtu`: its active MTU in bytes; `rate_gbps`:
// the emulated link rate (0 = unlimited, reported as 100 Gb/s).
void fill_port_attr(ibv_port_attr& a, uint32_t mtu, bool link_up, double rate_gbps);

// ---- memory regions

// ibv_reg_mr's access flags: the transport's access in `out`, or EINVAL
// for bits verbs does not define and EOPNOTSUPP for those droce cannot
// honour (on-demand paging, memory windows, zero-based, flush). Relaxed
// ordering is a hint that a software NIC meets by construction.
int mr_access(unsigned access, uint32_t& out);

// ---- queue pairs

// RC, UC and UD; EOPNOTSUPP for XRC, raw packet and driver QPs.
int qp_type(ibv_qp_type t, transport::QpType& out);
transport::QpState qp_state(ibv_qp_state s);
ibv_qp_state to_ibv_state(transport::QpState s);

// The attribute mask bits droce does not implement (alternate paths,
// migration, SQD notification, rate limits): EOPNOTSUPP when any is set.
// IBV_QP_CAP is EINVAL, as from a kernel provider: resizing a QP's queues
// is an optional feature (IBV_DEVICE_RESIZE_MAX_WR) droce does not offer,
// and Linux's table of the attributes each transition allows
// (ib_modify_qp_is_ok) has the queue sizes in none. IBV_QP_CUR_STATE is
// accepted and ignored.
int check_qp_mask(int mask);
// The attributes IBA 11.2.4.2 (Table 94 of ibv_modify_qp) requires for a
// transition: EINVAL when one is missing. Transitions to RESET or ERR
// need only the state.
int check_required_attrs(transport::QpType type, transport::QpState from,
                         transport::QpState to, int mask);
// Folds the attributes `mask` names into `stored` (what ibv_query_qp
// reports afterwards).
void merge_qp_attr(ibv_qp_attr& stored, const ibv_qp_attr& in, int mask);

// What the transport needs to turn an address vector into a path: the
// port's MAC and GID table, the peers the configuration knows, the DSCP
// and active MTU.
struct PathContext {
  wire::MacAddress mac{};
  std::span<const ibv_gid> gids;
  std::span<const Neighbour> neighbours;
  uint8_t dscp = 0;
};
// An address vector (its GRH: a RoCE v2 address always has one) as a
// path: source IP from sgid_index, destination from dgid, DSCP from the
// traffic class (or the configured one), hop limit, flow label, and the
// peer's MAC from the neighbours or a link-local GID's EUI-64 (else zero:
// the engine resolves it by ARP / ND). EINVAL for no GRH, a GID index
// outside the table, or GIDs of two IP versions.
int path_from_ah(const ibv_ah_attr& ah, const PathContext& ctx, wire::PathSpec& out);
// The transport's attributes from everything set so far (`stored`, merged),
// the path already made from its address vector. path_mtu is capped at the
// port's active MTU; timeout 0 (infinite in IBA 9.7.6.1.3) becomes the
// largest.
transport::QpAttr to_transport_attr(const ibv_qp_attr& stored, uint32_t port_mtu,
                                    const wire::PathSpec& path);

// ---- work requests and completions

// A send WR into droce's form, its SGEs copied into `sges` (at most
// transport::kMaxSge; EINVAL beyond). EOPNOTSUPP for an opcode droce does
// not implement (memory windows, local invalidate, TSO, atomic write,
// driver opcodes). The UD destination is the caller's (the AH).
int to_send_wr(const ibv_send_wr& wr, std::span<transport::Sge> sges, transport::SendWr& out);
int to_recv_wr(const ibv_recv_wr& wr, std::span<transport::Sge> sges, transport::RecvWr& out);
// A completion as ibv_poll_cq reports it (imm_data back to network order).
void to_ibv_wc(const transport::WorkCompletion& in, ibv_wc& out);

// The GRH (40 bytes) at the start of a UD receive buffer: RoCE v2 over
// IPv4 puts the IPv4 header in its last 20 bytes (as the responder writes
// it). The source and destination as GIDs; false when neither an IPv6
// header nor an IPv4 one is there.
bool gids_of_grh(std::span<const uint8_t, 40> grh, ibv_gid& sgid, ibv_gid& dgid,
                 uint8_t& traffic_class, uint8_t& hop_limit, uint32_t& flow_label);

}  // namespace droce::verbs
