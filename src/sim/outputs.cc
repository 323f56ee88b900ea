// What a run reports: the Summary (FCT percentiles, drops, marks, PFC,
// retransmissions, queues), summary.json and the CSV files of
// write_outputs (docs/SIM.md "Outputs").
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "droce/sim/output_file.h"
#include "simulator_impl.h"

namespace droce::sim {

namespace {

uint64_t percentile(std::vector<uint64_t> v, double p) {
  if (v.empty()) return 0;
  // Nearest rank: the smallest value with at least p of the samples <= it.
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  rank = std::clamp<size_t>(rank, 1, v.size());
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(rank - 1), v.end());
  return v[rank - 1];
}

}  // namespace

// In a partitioned run each process counts the components it runs; the
// merge adds them up (partitioned_run.cc). Sums and maxima only: the
// per-queue p99 is taken here, over the queue's own samples.
void Simulator::Impl::count_components(Summary& s) const {
  const uint64_t now = self.now_;
  QpTotals qps = retired;  // closed connections, then the live QPs
  for (size_t f = 0; f < flows.size(); ++f) {
    if (owns_host(flows[f].src)) qps.add(flows[f].src_qp->counters());
    if (owns_host(flows[f].dst)) qps.add(flows[f].dst_qp->counters());
  }
  for (const transport::QueuePair* qp : workload_qps) qps.add(qp->counters());
  s.retransmits = qps.retransmits;
  s.timeouts = qps.timeouts;
  s.cnps = qps.cnps;
  s.packet_events = self.events_;
  size_t qh = 0;
  for (size_t sw = 0; sw < sws.size(); ++sw) {
    const fabric::Switch& x = *sws[sw].sw;
    const size_t first = qh;
    qh += x.num_ports() * fabric::kNumClasses;
    if (!owns_switch(sw)) continue;
    for (uint16_t p = 0; p < x.num_ports(); ++p) {
      const fabric::PortCounters& pc = x.counters(p);
      s.xoff_sent += pc.tx_xoff;
      s.xon_sent += pc.tx_xon;
      s.pfc_rx_switches += pc.rx_pfc;
      for (uint8_t c = 0; c < fabric::kNumClasses; ++c) {
        const fabric::QueueCounters& q = pc.queues[c];
        s.switch_drops += q.drops + q.watchdog_drops;
        s.ecn_marks += q.ecn_marked;
        s.switch_paused_ns += x.paused_ns(p, c, now);
        s.max_queue_bytes = std::max(s.max_queue_bytes, q.max_bytes);
        if (q.enq_packets == 0 && q.drops == 0) continue;
        QueueSummary qs{static_cast<uint32_t>(sw),
                        p,
                        c,
                        q.max_bytes,
                        percentile(queue_len[first + p * fabric::kNumClasses + c].expand(
                                       static_cast<uint32_t>(sample_times.size())),
                                   0.99),
                        q.drops + q.watchdog_drops,
                        q.ecn_marked};
        s.p99_queue_bytes = std::max(s.p99_queue_bytes, qs.p99_bytes);
        s.queues.push_back(qs);
      }
      s.switch_drops += pc.down_drops + pc.no_route;
    }
  }
  for (size_t l = 0; l < dirs.size(); ++l) {
    if (!owns_dir(l)) continue;
    const auto& lc = dirs[l]->link.counters();
    s.link_losses += lc.lost_random + lc.lost_burst + lc.lost_down;
  }
  for (size_t h = 0; h < hosts.size(); ++h) {
    if (!owns_host(h)) continue;
    for (size_t p = 0; p < wire::kPfcPriorities; ++p)
      s.host_paused_ns += hosts[h]->ep->paused_ns(static_cast<uint8_t>(p), now);
    s.acks_without_int += hosts[h]->ep->counters().cc_acks_without_int;
  }
}

Summary Simulator::summary() const {
  const Impl& m = *impl_;
  Summary s;
  if (m.merged) {
    s = m.merged->components;
  } else {
    m.count_components(s);
  }
  s.end_ns = now_;
  s.all_done = all_done();
  std::vector<uint64_t> fcts;
  for (size_t f = 0; f < flows_.size(); ++f) {
    const FlowState& st = flows_[f];
    if (st.done() && st.failed == 0) {
      ++s.flows_completed;
      fcts.push_back(st.fct_ns());
    }
    if (st.failed) ++s.flows_failed;
    const Verification v = verification(f);
    if (v == Verification::kMatched) ++s.flows_verified;
    if (v == Verification::kCorrupt) ++s.flows_corrupt;
  }
  s.fct_p50_ns = percentile(fcts, 0.5);
  s.fct_p99_ns = percentile(fcts, 0.99);
  s.fct_max_ns = fcts.empty() ? 0 : *std::max_element(fcts.begin(), fcts.end());
  return s;
}

uint64_t Simulator::flow_retransmits(size_t f) const {
  const Impl& m = *impl_;
  if (m.merged) return m.merged->flow_retransmits.at(f);
  (void)m.flows.at(f);  // the range check
  return m.flow_retransmits(f);
}

std::string missing_int_warning(const Summary& s) {
  if (s.acks_without_int == 0) return {};
  return "warning: the congestion control steers by INT, but " +
         std::to_string(s.acks_without_int) +
         " ACK(s) carried no INT records (switch INT off: [switch] int.enabled); it ran on "
         "its initial window";
}

std::string Simulator::summary_json() const {
  const Impl& m = *impl_;
  const Summary s = summary();
  nlohmann::ordered_json j;
  j["scenario"] = m.sc.file;
  j["seed"] = m.sc.run.seed;
  j["end_ns"] = s.end_ns;
  j["all_done"] = s.all_done;
  j["packet_events"] = s.packet_events;
  j["flows_completed"] = s.flows_completed;
  j["flows_failed"] = s.flows_failed;
  j["flows_verified"] = s.flows_verified;
  j["flows_corrupt"] = s.flows_corrupt;
  j["fct_ns"] = {{"p50", s.fct_p50_ns}, {"p99", s.fct_p99_ns}, {"max", s.fct_max_ns}};
  j["drops"] = {{"switch", s.switch_drops}, {"link", s.link_losses}};
  j["ecn_marks"] = s.ecn_marks;
  j["pfc"] = {{"xoff_sent", s.xoff_sent},
              {"xon_sent", s.xon_sent},
              {"rx_by_switches", s.pfc_rx_switches},
              {"switch_paused_ns", s.switch_paused_ns},
              {"host_paused_ns", s.host_paused_ns}};
  j["retransmits"] = s.retransmits;
  j["timeouts"] = s.timeouts;
  j["cnps"] = s.cnps;
  j["queue_bytes"] = {{"max", s.max_queue_bytes}, {"p99", s.p99_queue_bytes}};
  auto& flows = j["flows"] = nlohmann::ordered_json::array();
  for (size_t f = 0; f < flows_.size(); ++f) {
    const FlowState& st = flows_[f];
    const FlowSpec& fs = *m.flows[f].spec;
    flows.push_back({{"name", fs.name},
                     {"src", fs.src},
                     {"dst", fs.dst},
                     {"opcode", std::string(to_string(fs.opcode))},
                     {"cc", fs.cc},
                     {"bytes", fs.bytes},
                     {"start_ns", st.start_ns},
                     {"finish_ns", st.finish_ns},
                     {"fct_ns", st.fct_ns()},
                     {"done", st.done()},
                     {"failed", st.failed},
                     {"verified", verify(f)},
                     {"retransmits", flow_retransmits(f)}});
  }
  auto& queues = j["queues"] = nlohmann::ordered_json::array();
  for (const QueueSummary& q : s.queues)
    queues.push_back({{"switch", m.sc.switches[q.sw].name},
                      {"port", q.port},
                      {"peer", m.sws[q.sw].peer[q.port]},
                      {"tc", q.tc},
                      {"max_bytes", q.max_bytes},
                      {"p99_bytes", q.p99_bytes},
                      {"drops", q.drops},
                      {"ecn_marked", q.ecn_marked}});
  return j.dump(2) + "\n";
}

void Simulator::write_outputs(const std::string& dir, OutputFiles files) const {
  const Impl& m = *impl_;
  std::filesystem::create_directories(dir);
  // The series straight from the changes the runner kept, one row at a
  // time: the row vectors of a long run would be gigabytes.
  if (files.flows) {
    OutputFile o(dir, "flows.csv");
    o.text("time_ns,flow,tx_bytes,tx_rate_bps,done_bytes,cc_rate_bps\n");
    each_flow_sample([&](const FlowSample& s) {
      o.row("{},{},{},{},{},{}", s.time_ns, m.flows[s.flow].spec->name, s.tx_bytes, s.tx_rate_bps,
            s.done_bytes, s.cc_rate_bps);
    });
    o.close();
  }
  {
    OutputFile o(dir, "queues.csv");
    o.text("time_ns,switch,port,peer,tc,bytes\n");
    each_queue_sample([&](const QueueSample& s) {
      o.row("{},{},{},{},{},{}", s.time_ns, m.sc.switches[s.sw].name, s.port,
            m.sws[s.sw].peer[s.port], s.tc, s.bytes);
    });
    o.close();
  }
  if (files.links) {
    OutputFile o(dir, "links.csv");
    o.text("time_ns,link,bytes,utilisation\n");
    each_link_sample([&](const LinkSample& s) {
      o.row("{},{},{},{:.6f}", s.time_ns, m.dirs[s.link]->name, s.bytes, s.utilisation);
    });
    o.close();
  }
  {
    OutputFile o(dir, "fct.csv");
    o.text("flow,src,dst,bytes,start_ns,finish_ns,fct_ns,status\n");
    for (size_t f = 0; f < flows_.size(); ++f) {
      const FlowState& st = flows_[f];
      const FlowSpec& fs = *m.flows[f].spec;
      o.row("{},{},{},{},{},{},{},{}", fs.name, fs.src, fs.dst, fs.bytes, st.start_ns, st.finish_ns,
            st.fct_ns(),
            st.failed   ? "failed"
            : st.done() ? "done"
                        : "running");
    }
    o.close();
  }
  OutputFile o(dir, "summary.json");
  o.text(summary_json());
  o.close();
}

}  // namespace droce::sim
