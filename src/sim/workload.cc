// The workload: the scenario's flows (a QP pair each, a source pattern and
// a sink, messages posted as the window allows, progress from their
// completions) and the programmatic one (connect, reg_mr, post_send,
// post_recv; completions to the caller's handler).
#include <cstring>
#include <numeric>

#include "droce/cc/registry.h"
#include "droce/transport/requester.h"
#include "simulator_impl.h"

namespace droce::sim {

namespace {

// A QP's class marks: the DSCP, and where switches classify by PCP
// (`classifier = "pcp"`) a priority tag (802.1Q, VLAN 0) whose PCP is the
// same class, DSCP >> 3, as a RoCE NIC set to tag its traffic does.
// Untagged frames would all land in class 0 there, while the endpoint
// pauses and resumes the QP on its DSCP's priority.
void set_class_marks(wire::PathSpec& path, uint8_t dscp, bool pcp_tagged) {
  path.dscp = dscp;
  if (!pcp_tagged) return;
  path.vlan = true;
  path.vlan_id = 0;
  path.pcp = static_cast<uint8_t>(dscp >> 3);
}

// The source pattern of flow `f`: a deterministic byte stream.
void fill_pattern(std::span<uint8_t> mem, uint64_t f) {
  uint64_t s = mix(0xD0CE, f);
  for (size_t i = 0; i < mem.size(); i += 8) {
    s = mix(s, i);
    const size_t n = std::min<size_t>(8, mem.size() - i);
    std::memcpy(mem.data() + i, &s, n);
  }
}

constexpr uint32_t kAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

// Brings `qp` on host `h` to RTS toward `peer_qp` on `peer` and attaches it
// to h's endpoint with its own CC instance at `line_rate_bytes`: the one
// set-up of scenario flows and Simulator::connect, whose options (`o`: a
// FlowSpec or QpOptions) carry the same transport fields. Refusals throw
// ScenarioError naming `who`. Host is Simulator::Impl::Host, deduced.
template <class Host, class Options>
void bring_up(Host& h, const Host& peer, transport::QueuePair& qp,
              const transport::QueuePair& peer_qp, const Options& o, bool pcp_tagged,
              uint64_t line_rate_bytes, const std::string& who) {
  transport::QpAttr attr;
  attr.path.src_mac = h.mac;
  // Zero: the endpoint resolves the peer's IP (run.resolve_macs).
  attr.path.dst_mac = h.resolve_macs ? wire::MacAddress{} : peer.mac;
  attr.path.src_ip = h.ip;
  attr.path.dst_ip = peer.ip;
  set_class_marks(attr.path, o.dscp, pcp_tagged);
  attr.path.udp_src_port = wire::udp_src_port_entropy(qp.qpn(), peer_qp.qpn());
  attr.dest_qpn = peer_qp.qpn();
  attr.path_mtu = transport::mtu_code(o.mtu).value_or(IBV_MTU_4096);
  attr.recovery = o.recovery;
  attr.timeout = o.timeout;
  attr.retry_cnt = o.retry_cnt;
  attr.ack_every_n = o.ack_every_n;
  attr.entropy = o.entropy;
  attr.sr_reorder_tolerance_pkts = o.reorder_tolerance;
  attr.sr_reorder_window_ns = o.reorder_window_ns;
  attr.sr_reorder_window_min_ns = o.reorder_window_min_ns;
  attr.sr_tail_probe = o.tail_probe;
  attr.write_reth_every_packet = o.reth_every_packet;
  attr.sr_rto_low_ns = o.rto_low_ns;
  attr.sack_window = o.sack_window;
  attr.sr_rto_low_threshold_pkts = o.rto_low_threshold;
  std::unique_ptr<cc::Algorithm> algo;
  try {
    algo = cc::make_algorithm(o.cc, o.cc_params, line_rate_bytes);
  } catch (const droce::ConfigError& err) {
    throw ScenarioError(who + ": cc: " + err.what());
  }
  // The DCQCN notification point (this QP as a receiver) paces CNPs by the
  // algorithm's np_min_time_between_cnps; 0 keeps the QP default.
  if (const uint64_t np = algo->np_min_time_between_cnps_ns())
    attr.np_min_time_between_cnps_ns = np;
  if (qp.modify(transport::QpState::kInit, attr) || qp.modify(transport::QpState::kRtr, attr) ||
      qp.modify(transport::QpState::kRts, attr))
    throw ScenarioError(who + ": QP setup refused");
  h.ep->attach(qp, std::move(algo));
}

}  // namespace

// Flows: a QP pair each, memory on both hosts; then their start order.
void Simulator::Impl::build_flows() {
  for (size_t f = 0; f < sc.flows.size(); ++f) {
    const FlowSpec& fs = sc.flows[f];
    Flow fl;
    fl.spec = &fs;
    fl.src = static_cast<uint32_t>(sc.host_index(fs.src));
    fl.dst = static_cast<uint32_t>(sc.host_index(fs.dst));
    fl.initiator = fs.opcode == Opcode::kRead ? fl.dst : fl.src;
    fl.msg = fs.message_bytes ? std::min(fs.message_bytes, fs.bytes)
                              : std::min<uint64_t>(fs.bytes, transport::kMaxMessageBytes);
    // Unverified flows only need one message's worth of memory.
    const uint64_t full = (fs.bytes + fl.msg - 1) / fl.msg * fl.msg;
    const uint64_t window = !fs.verify             ? fl.msg
                            : full <= kVerifyWindow ? full
                                                    : std::max(fl.msg, kVerifyWindow / fl.msg * fl.msg);
    fl.slots = window / fl.msg;
    fl.whole = window >= fs.bytes;
    fl.src_mem = transport::ZeroedArray<uint8_t>(window);
    fl.dst_mem = transport::ZeroedArray<uint8_t>(window);
    if (!fs.virtual_payload()) {
      fill_pattern({fl.src_mem.data(), window}, f);
      fl.pattern_written = true;
    }
    auto& hs = *hosts[fl.src];
    auto& hd = *hosts[fl.dst];
    // Addresses on the wire from the flow's index, not from where the
    // memory happens to be: a partitioned run (partition.h) has the sink's
    // memory in another process, and frames do not depend on the heap.
    const uint64_t iova = (uint64_t{f} + 1) << 32;
    fl.src_mr = hs.device.reg_mr(hs.pd, fl.src_mem.data(), fl.src_mem.size(), kAccess, iova);
    fl.dst_mr = hd.device.reg_mr(hd.pd, fl.dst_mem.data(), fl.dst_mem.size(), kAccess, iova);
    if (!fl.src_mr || !fl.dst_mr)
      throw ScenarioError(sc.file + ": flow " + fs.name + ": cannot register memory");
    fl.src_mr->set_virtual_payload(fs.virtual_payload());
    fl.dst_mr->set_virtual_payload(fs.virtual_payload());
    transport::QpInitAttr init;
    init.caps.max_send_wr = fs.max_outstanding + 4;
    init.caps.max_recv_wr = fs.max_outstanding + 4;
    init.pd = hs.pd;
    init.send_cq = init.recv_cq = hs.cq;
    fl.src_qp = hs.device.create_qp(init);
    init.pd = hd.pd;
    init.send_cq = init.recv_cq = hd.cq;
    fl.dst_qp = hd.device.create_qp(init);
    struct End {
      Host* host;
      transport::QueuePair* qp;
      Host* peer;
      transport::QueuePair* peer_qp;
    };
    for (End e : {End{&hs, fl.src_qp, &hd, fl.dst_qp}, End{&hd, fl.dst_qp, &hs, fl.src_qp}}) {
      bring_up(*e.host, *e.peer, *e.qp, *e.peer_qp, fs, pcp_tagged,
               dirs[e.host->out_link]->rate_bps / 8, sc.file + ": flow " + fs.name);
      const uint32_t qpn = e.qp->qpn();
      if (e.host->qp_role.size() <= qpn) e.host->qp_role.resize(qpn + 1, -1);
      const bool initiator = e.host == hosts[fl.initiator].get();
      e.host->qp_role[qpn] = static_cast<int64_t>(f << 1 | (initiator ? 1 : 0));
    }
    flows.push_back(std::move(fl));
    FlowState st;
    st.messages = (fs.bytes + flows.back().msg - 1) / flows.back().msg;
    self.flows_.push_back(st);
  }
  start_order.resize(flows.size());
  std::iota(start_order.begin(), start_order.end(), size_t{0});
  std::stable_sort(start_order.begin(), start_order.end(), [&](size_t a, size_t b) {
    return sc.flows[a].start_ns < sc.flows[b].start_ns;
  });
}

void Simulator::Impl::post_more(size_t f) {
  FlowState& st = self.flows_[f];
  Flow& fl = flows[f];
  const FlowSpec& fs = *fl.spec;
  Host& host = *hosts[fl.initiator];
  while (st.posted < st.messages && st.posted - st.completed - st.failed < fs.max_outstanding) {
    const uint64_t i = st.posted;
    const uint64_t off = (i % fl.slots) * fl.msg;
    const uint32_t len = static_cast<uint32_t>(std::min(fl.msg, fs.bytes - i * fl.msg));
    transport::Sge sge;
    transport::SendWr wr;
    wr.wr_id = i;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (fs.opcode == Opcode::kRead) {
      sge = {fl.dst_mr->iova() + off, len, fl.dst_mr->lkey()};
      wr.opcode = IBV_WR_RDMA_READ;
      wr.remote_addr = fl.src_mr->iova() + off;
      wr.rkey = fl.src_mr->rkey();
    } else {
      sge = {fl.src_mr->iova() + off, len, fl.src_mr->lkey()};
      wr.opcode = fs.opcode == Opcode::kSend ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
      wr.remote_addr = fl.dst_mr->iova() + off;
      wr.rkey = fl.dst_mr->rkey();
    }
    wr.sg_list = {&sge, 1};
    transport::QueuePair& qp = fl.initiator == fl.src ? *fl.src_qp : *fl.dst_qp;
    if (host.ep->post_send(qp, wr) != 0) break;
    ++st.posted;
  }
}

// A SEND flow's sink keeps max_outstanding receive buffers posted ahead of
// the messages, in the order they will consume them: at the flow's start,
// then one more for each consumed. The initiator never has more messages
// out, so a SEND never finds the receive queue empty (no RNR), and the sink
// needs nothing from the initiator's host: the two may run in different
// partitions.
void Simulator::Impl::post_recvs(size_t f) {
  Flow& fl = flows[f];
  const FlowSpec& fs = *fl.spec;
  const uint64_t messages = self.flows_[f].messages;
  bool posted = false;
  while (fl.recvs_posted < messages && fl.recvs_posted - fl.recvs_done < fs.max_outstanding) {
    const uint64_t r = fl.recvs_posted;
    const uint64_t roff = (r % fl.slots) * fl.msg;
    transport::Sge rsge{fl.dst_mr->iova() + roff, static_cast<uint32_t>(fl.msg),
                        fl.dst_mr->lkey()};
    transport::RecvWr rwr;
    rwr.wr_id = r;
    rwr.sg_list = {&rsge, 1};
    if (fl.dst_qp->post_recv(rwr) != 0) break;
    ++fl.recvs_posted;
    posted = true;
  }
  if (posted) hosts[fl.dst]->ep->notify(fl.dst_qp->qpn());
}

void Simulator::Impl::on_flow_completion(size_t f, const transport::WorkCompletion& wc) {
  FlowState& st = self.flows_[f];
  const bool was_done = st.done();
  if (wc.status == IBV_WC_SUCCESS) {
    ++st.completed;
    const Flow& fl = flows[f];
    st.completed_bytes += std::min(fl.msg, fl.spec->bytes - wc.wr_id * fl.msg);
  } else {
    ++st.failed;
  }
  if (st.done() && !was_done) {
    st.finish_ns = self.now_;
    ++self.flows_done_;
  } else {
    post_more(f);
  }
}

void Simulator::Impl::watch_cq(Host& host, transport::CompletionQueue& cq) {
  cq.set_notifier([](void* flag, transport::CompletionQueue&) { *static_cast<bool*>(flag) = true; },
                  &host.completions);
  cq.arm(false);
}

void Simulator::Impl::poll_cq(uint32_t h) {
  Host& host = *hosts[h];
  if (!host.completions) return;
  // Armed before they are polled, as ibv_req_notify_cq asks: whatever is
  // pushed from here on (a handler's post may complete at once) raises
  // the flag again.
  host.completions = false;
  host.cq->arm(false);
  if (host.wcq) {
    host.wcq->arm(false);
    for (;;) {
      const size_t n = static_cast<size_t>(host.wcq->poll(wcs));
      for (size_t i = 0; i < n; ++i)
        if (self.on_completion_) self.on_completion_(h, wcs[i]);
      if (n < wcs.size()) break;
    }
    host.wcq->rewind_if_empty();
  }
  for (;;) {
    const size_t n = host.cq->poll(wcs);
    for (size_t i = 0; i < n; ++i) {
      const transport::WorkCompletion& wc = wcs[i];
      if (wc.qp_num >= host.qp_role.size() || host.qp_role[wc.qp_num] < 0) continue;
      const size_t f = static_cast<size_t>(host.qp_role[wc.qp_num] >> 1);
      const bool initiator = host.qp_role[wc.qp_num] & 1;
      if (!initiator) {
        // A SEND's receive buffer consumed (or flushed): the sink posts the
        // next one.
        if (wc.opcode == IBV_WC_RECV || wc.status != IBV_WC_SUCCESS) {
          ++flows[f].recvs_done;
          if (flows[f].spec->opcode == Opcode::kSend) post_recvs(f);
        }
        continue;
      }
      if (wc.opcode == IBV_WC_RECV || wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) continue;
      on_flow_completion(f, wc);
    }
    if (n < wcs.size()) break;
  }
  host.cq->rewind_if_empty();
}

uint64_t Simulator::Impl::flow_cc_rate_bps(size_t f) const {
  const Flow& fl = flows[f];
  const transport::QueuePair* qp = fl.initiator == fl.src ? fl.src_qp : fl.dst_qp;
  endpoint::CcBinding* b = hosts[fl.initiator]->ep->cc_of(qp->qpn());
  return b ? b->algorithm().rate_bytes_per_sec() * 8 : 0;
}

std::span<const uint8_t> Simulator::source_memory(size_t f) const {
  Impl::Flow& fl = impl_->flows.at(f);
  std::span<uint8_t> mem{fl.src_mem.data(), fl.src_mem.size()};
  if (!fl.pattern_written) {
    // A virtual-payload flow's pattern, which nothing on the wire read.
    fill_pattern(mem, f);
    fl.pattern_written = true;
  }
  return mem;
}
std::span<const uint8_t> Simulator::sink_memory(size_t f) const {
  const Impl::Flow& fl = impl_->flows.at(f);
  return {fl.dst_mem.data(), fl.dst_mem.size()};
}
const transport::QueuePair& Simulator::source_qp(size_t f) const {
  return *impl_->flows.at(f).src_qp;
}
const transport::QueuePair& Simulator::sink_qp(size_t f) const {
  return *impl_->flows.at(f).dst_qp;
}
uint64_t Simulator::flow_tx_bytes(size_t f) const {
  return impl_->flows.at(f).src_qp->counters().tx_bytes;
}
uint64_t Simulator::flow_cc_rate_bps(size_t f) const {
  impl_->flows.at(f);
  return impl_->flow_cc_rate_bps(f);
}

bool Simulator::verify(size_t f) const { return verification(f) == Verification::kMatched; }

Simulator::Verification Simulator::verification(size_t f) const {
  const Impl::Flow& fl = impl_->flows.at(f);
  if (!fl.spec->verify)
    return fl.spec->virtual_payload() ? Verification::kOffVirtual : Verification::kOff;
  if (!fl.whole) return Verification::kTooLarge;
  if (!flows_[f].done() || flows_[f].failed) return Verification::kNotDone;
  const bool same = impl_->merged ? impl_->merged->sink_matches[f] : impl_->sink_matches(f);
  return same ? Verification::kMatched : Verification::kCorrupt;
}

bool Simulator::Impl::sink_matches(size_t f) const {
  const Flow& fl = flows[f];
  return std::equal(fl.src_mem.data(), fl.src_mem.data() + fl.spec->bytes, fl.dst_mem.data());
}

QpPairRef Simulator::connect(size_t host_a, size_t host_b, const QpOptions& o) {
  Impl& m = *impl_;
  if (host_a >= m.hosts.size() || host_b >= m.hosts.size() || host_a == host_b)
    throw ScenarioError("connect: hosts " + std::to_string(host_a) + " and " +
                        std::to_string(host_b) + ": need two different hosts below " +
                        std::to_string(m.hosts.size()));
  Impl::Host* ends[2] = {m.hosts[host_a].get(), m.hosts[host_b].get()};
  transport::QueuePair* qps[2] = {nullptr, nullptr};
  for (int i = 0; i < 2; ++i) {
    Impl::Host& h = *ends[i];
    if (!h.wcq) {
      h.wcq = h.device.create_cq(std::max(o.cq_entries, o.max_send_wr + o.max_recv_wr));
      Impl::watch_cq(h, *h.wcq);
    }
    transport::QpInitAttr init;
    init.caps.max_send_wr = o.max_send_wr;
    init.caps.max_recv_wr = o.max_recv_wr;
    init.pd = h.pd;
    init.send_cq = init.recv_cq = h.wcq;
    qps[i] = h.device.create_qp(init);
    if (!qps[i]) throw ScenarioError("connect: the transport refused a QP");
    m.workload_qps.insert(qps[i]);
  }
  for (int i = 0; i < 2; ++i)
    bring_up(*ends[i], *ends[1 - i], *qps[i], *qps[1 - i], o, m.pcp_tagged,
             m.dirs[ends[i]->out_link]->rate_bps / 8, "connect");
  // Sample the queues of the class these QPs use.
  const uint8_t tc = static_cast<uint8_t>(o.dscp >> 3);
  if (std::find(m.tracked_tcs.begin(), m.tracked_tcs.end(), tc) == m.tracked_tcs.end()) {
    m.tracked_tcs.push_back(tc);
    std::sort(m.tracked_tcs.begin(), m.tracked_tcs.end());
  }
  return QpPairRef{qps[0], qps[1]};
}

void Simulator::disconnect(size_t host_a, size_t host_b, QpPairRef pair) {
  Impl& m = *impl_;
  Impl::Host* ends[2] = {m.hosts.at(host_a).get(), m.hosts.at(host_b).get()};
  transport::QueuePair* qps[2] = {pair.a, pair.b};
  // Each QP must be a live one of its host: a QPN alone would name another
  // QP on the wrong host.
  for (int i = 0; i < 2; ++i)
    if (!qps[i] || !m.workload_qps.count(qps[i]) ||
        ends[i]->device.find_qp(qps[i]->qpn()) != qps[i])
      throw ScenarioError("disconnect: not a connection of hosts " + std::to_string(host_a) +
                          " and " + std::to_string(host_b));
  for (int i = 0; i < 2; ++i) {
    m.workload_qps.erase(qps[i]);
    m.retired.add(qps[i]->counters());
    ends[i]->ep->detach(qps[i]->qpn());
    ends[i]->device.destroy_qp(qps[i]);
  }
  // Destroying flushed any outstanding WRs into the CQs: the hosts poll
  // them at their next step.
  for (size_t h : {host_a, host_b}) m.wake(static_cast<uint32_t>(h), now_);
}

transport::MemoryRegion* Simulator::reg_mr(size_t host, void* addr, size_t length,
                                           std::optional<uint64_t> iova) {
  Impl::Host& h = *impl_->hosts.at(host);
  return h.device.reg_mr(h.pd, addr, length, kAccess, iova);
}

int Simulator::dereg_mr(size_t host, transport::MemoryRegion* mr) {
  return impl_->hosts.at(host)->device.dereg_mr(mr);
}

int Simulator::post_send(size_t host, transport::QueuePair& qp, const transport::SendWr& wr) {
  Impl& m = *impl_;
  Impl::Host& h = *m.hosts.at(host);
  const int rc = h.ep->post_send(qp, wr);
  m.wake(static_cast<uint32_t>(host), std::max(h.ep->next_deadline(), now_));
  return rc;
}

int Simulator::post_recv(size_t host, transport::QueuePair& qp, const transport::RecvWr& wr) {
  Impl& m = *impl_;
  Impl::Host& h = *m.hosts.at(host);
  const int rc = qp.post_recv(wr);
  h.ep->notify(qp.qpn());
  m.wake(static_cast<uint32_t>(host), std::max(h.ep->next_deadline(), now_));
  return rc;
}

}  // namespace droce::sim
