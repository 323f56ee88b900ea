// Stats: each worker fills its shards' part of a snapshot on its own
// lcore; the parts of a port are summed.
#include <rte_ethdev.h>
#include <rte_mempool.h>

#include <algorithm>

#include "droce/options/values.h"
#include "engine_impl.h"

namespace droce::engine {

void Engine::Impl::fill_snapshot(Worker& w, std::vector<PortSnapshot>& parts,
                                 std::vector<QpSnapshot>& qps) {
  for (Shard* sh : w.shards) {
    PortState* p = sh->port;
    // One part per shard; stats_now() merges the parts of a port.
    PortSnapshot ps;
    ps.index = p->index;
    ps.port_id = p->port_id;
    ps.name = p->name;
    ps.lcore = p->lcore();
    ps.endpoint = sh->ep->counters();
    ps.port = sh->counters;
    ShardSnapshot ss;
    ss.index = sh->index;
    ss.lcore = w.lcore;
    ss.tx_queue = sh->tx_queue;
    ss.rx_queue = sh->rx_queue;
    ss.rate_bytes_per_sec = sh->rate;
    ss.endpoint = ps.endpoint;
    ss.port = ps.port;
    if (sh->index == 0) {
      if (!p->closed) {
        rte_eth_stats st{};
        if (rte_eth_stats_get(p->port_id, &st) == 0) {
          ps.eth_ipackets = st.ipackets;
          ps.eth_opackets = st.opackets;
          ps.eth_ibytes = st.ibytes;
          ps.eth_obytes = st.obytes;
          ps.eth_imissed = st.imissed;
          ps.eth_ierrors = st.ierrors;
          ps.eth_oerrors = st.oerrors;
          ps.eth_rx_nombuf = st.rx_nombuf;
        }
      }
      ps.mempool_size = p->pool->size;
      ps.mempool_avail = rte_mempool_avail_count(p->pool);
      ps.link_up = sh->link_up;
      ps.neighbours.clear();
      sh->ep->interface().neighbours().for_each([&](const endpoint::Neighbour& n) {
        ps.neighbours.push_back({options::format_ip(n.ip), options::format_mac(n.mac), endpoint::to_string(n.state)});
      });
    }
    ps.next_deadline_ns = sh->ep->next_deadline();
    // Completions of this worker's QPs that did not fit the port's CQ.
    if (EngineCq* c = cq(p->cq)) {
      std::lock_guard lock(c->poll_lock);
      if (w.index < c->rings.size() && c->rings[w.index])
        ps.port.cq_overflows = c->rings[w.index]->overflow_count();
    }
    ss.port.cq_overflows = ps.port.cq_overflows;
    sh->device->for_each_qp([&](transport::QueuePair& qp) {
      QpSnapshot q;
      q.port = p->index;
      q.qpn = qp.qpn();
      q.type = qp.type();
      q.state = qp.state();
      q.dest_qpn = qp.attr().dest_qpn;
      q.next_send_psn = qp.next_send_psn();
      q.expected_psn = qp.expected_psn();
      q.send_queue_depth = qp.send_queue_depth();
      q.recv_queue_depth = qp.recv_queue_depth();
      if (auto it = sh->qp_cc.find(qp.qpn()); it != sh->qp_cc.end()) q.cc = it->second;
      if (endpoint::CcBinding* b = sh->ep->cc_of(qp.qpn()))
        q.cc_rate_bytes_per_sec = b->algorithm().rate_bytes_per_sec();
      q.lcore = w.lcore;
      q.counters = qp.counters();
      qps.push_back(std::move(q));
      ++ss.qps;
    });
    ps.shards.push_back(std::move(ss));
    parts.push_back(std::move(ps));
  }
}

Snapshot Engine::stats_now() {
  Impl& im = *impl_;
  Snapshot s;
  std::vector<PortSnapshot> parts;
  for (auto& w : im.workers) {
    std::vector<PortSnapshot> wp;
    std::vector<QpSnapshot> wq;
    im.run_on(*w, [&] { im.fill_snapshot(*w, wp, wq); });
    for (auto& p : wp) parts.push_back(std::move(p));
    for (auto& q : wq) s.qps.push_back(std::move(q));
  }
  // A port's shards, summed: counters add up, the port-wide figures (eth_*,
  // mempool) come from shard 0's part alone.
  std::sort(parts.begin(), parts.end(), [](const PortSnapshot& a, const PortSnapshot& b) {
    return a.index != b.index ? a.index < b.index
                              : a.shards.front().index < b.shards.front().index;
  });
  for (PortSnapshot& part : parts) {
    if (s.ports.empty() || s.ports.back().index != part.index) {
      s.ports.push_back(std::move(part));
      continue;
    }
    PortSnapshot& ps = s.ports.back();
    ps.endpoint += part.endpoint;
    ps.port += part.port;
    ps.next_deadline_ns = std::min(ps.next_deadline_ns, part.next_deadline_ns);
    for (auto& sh : part.shards) ps.shards.push_back(std::move(sh));
  }
  std::sort(s.qps.begin(), s.qps.end(), [](const QpSnapshot& a, const QpSnapshot& b) {
    return a.port != b.port ? a.port < b.port : a.qpn < b.qpn;
  });
  s.taken_ns = now_ns();
  {
    std::lock_guard lock(im.latest_mu);
    im.latest = s;
    im.have_latest = true;
  }
  return s;
}

Snapshot Engine::stats() {
  Impl& im = *impl_;
  {
    std::lock_guard lock(im.latest_mu);
    if (im.have_latest && im.started && now_ns() - im.latest.taken_ns < im.cfg.stats_period_ns)
      return im.latest;
  }
  return stats_now();
}

}  // namespace droce::engine
