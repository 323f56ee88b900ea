// The virtual-time runner on small scenarios: 2-to-1 incast with PFC
// (lossless: pauses, no drops) and without (drops, retransmissions, data
// still byte-exact), every opcode, a leaf-spine with ECMP, and determinism.
#include "droce/sim/simulator.h"
#include "sim_test_util.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace droce::sim {
namespace {

std::string incast(int senders, bool pfc, const std::string& buffer,
                   const std::string& cc = "none") {
  std::ostringstream s;
  s << "[run]\nduration = \"100ms\"\ncsv_interval = \"5us\"\n"
    << "[topology]\nkind = \"incast\"\nsenders = " << senders
    << "\nrate = \"100G\"\ndelay = \"1us\"\nflow_bytes = \"512KiB\"\n"
    << "[switch]\nbuffer = \"" << buffer << "\"\n"
    << "pfc = { enabled = " << (pfc ? "true" : "false")
    << ", priorities = [3], xoff = \"48KiB\", xon = \"24KiB\" }\n"
    << "[flow]\ncc = \"" << cc << "\"\ntimeout = 8\n";
  return s.str();
}

void expect_all_verified(const Simulator& s) {
  for (size_t f = 0; f < s.num_flows(); ++f) {
    EXPECT_TRUE(s.flow(f).done()) << s.flow_spec(f).name;
    EXPECT_EQ(s.flow(f).failed, 0u) << s.flow_spec(f).name;
    EXPECT_TRUE(s.verify(f)) << s.flow_spec(f).name << ": destination memory differs";
  }
}

TEST(SimRunner, TwoToOneWithPfcPausesAndNeverDrops) {
  Simulator s(parse_scenario(incast(2, true, "1MiB")));
  s.run();
  const Summary sum = s.summary();
  ASSERT_TRUE(sum.all_done);
  expect_all_verified(s);
  EXPECT_GT(sum.xoff_sent, 0u);
  EXPECT_EQ(sum.switch_drops, 0u);
  EXPECT_EQ(sum.retransmits, 0u);
  // 1 MiB through one 100 G port takes ~84 us; with 2 senders it is the
  // bottleneck, so the FCT is at least that and not much more.
  EXPECT_GE(sum.fct_max_ns, 84'000u);
  EXPECT_LE(sum.fct_max_ns, 120'000u);
  // Lossless only works if the senders honoured the pauses: the queue never
  // grows past XOFF per ingress plus what is in flight.
  EXPECT_LT(sum.max_queue_bytes, 1u << 20);
}

TEST(SimRunner, TwoToOneWithoutPfcDropsRetransmitsAndStaysByteExact) {
  Simulator s(parse_scenario(incast(2, false, "64KiB")));
  s.run();
  const Summary sum = s.summary();
  ASSERT_TRUE(sum.all_done) << s.now();
  EXPECT_GT(sum.switch_drops, 0u);
  EXPECT_GT(sum.retransmits, 0u);
  EXPECT_EQ(sum.xoff_sent, 0u);
  expect_all_verified(s);
  EXPECT_EQ(sum.flows_verified, 2u);
}

TEST(SimRunner, SendReadAndSelectiveRepeatAreByteExact) {
  Simulator s(parse_scenario(R"(
[run]
duration = "50ms"
[topology]
kind = "incast"
senders = 3
delay = "500ns"
[switch]
buffer = "48KiB"
[[flows]]
src = "h1"
dst = "h0"
bytes = "300KiB"
message = "20000B"
opcode = "send"
timeout = 8
[[flows]]
src = "h2"
dst = "h0"
bytes = "256KiB"
message = "64KiB"
opcode = "read"
timeout = 8
[[flows]]
src = "h3"
dst = "h0"
bytes = "512KiB"
recovery = "sr"
timeout = 8
)"));
  s.run();
  ASSERT_TRUE(s.all_done());
  expect_all_verified(s);
  EXPECT_EQ(s.flow(0).messages, 16u);  // 15 x 20000 + 7200
}

TEST(SimRunner, ReadsRecoverFromLossWithGoBackN) {
  // Sixteen READs of five packets in flight over a link that loses 1-3 %:
  // every loss makes the requester ask again for all of them, and the
  // responder answer again READs it had answered. Those second answers
  // must not count as new outstanding READs (which refused the next new
  // READ as an invalid request and ended the connection) and must go out
  // in PSN order, so the flow completes byte-exact on every seed.
  for (const char* loss : {"0.01", "0.03"}) {
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      Scenario sc = parse_scenario(std::string(R"(
[run]
duration = "300ms"
[topology]
kind = "incast"
senders = 1
delay = "1us"
[link]
loss = )") + loss + R"(
[flow]
opcode = "read"
mtu = 1024
message = 5000
timeout = 8
[[flows]]
src = "h1"
dst = "h0"
bytes = "1MiB"
)");
      sc.run.seed = seed;
      Simulator s(std::move(sc));
      s.run();
      ASSERT_TRUE(s.all_done()) << "loss " << loss << " seed " << seed << " at " << s.now();
      expect_all_verified(s);
    }
  }
}

TEST(SimRunner, DcqcnPacesReadResponsesAsItPacesWrites) {
  // Two hosts' data READ by h0 and one host WRITING to h0, under DCQCN:
  // the READ responses are the responders' data and their CNPs slow them
  // as they slow a writer. Unpaced, they took the link from the writer
  // (READs done in 0.4 ms, the WRITE starved to 11.9 ms).
  auto scenario = [](const char* first_two) {
    std::string text = R"(
[run]
duration = "50ms"
[topology]
kind = "incast"
senders = 3
delay = "1us"
[flow]
cc = "dcqcn"
bytes = "2MiB"
)";
    for (int h = 1; h <= 3; ++h)
      text += "[[flows]]\nsrc = \"h" + std::to_string(h) + "\"\ndst = \"h0\"\nopcode = \"" +
              (h < 3 ? first_two : "write") + "\"\n";
    return parse_scenario(text);
  };
  Simulator reads(scenario("read"));
  reads.run();
  Simulator writes(scenario("write"));
  writes.run();
  ASSERT_TRUE(reads.all_done());
  ASSERT_TRUE(writes.all_done());
  expect_all_verified(reads);
  const uint64_t read_max = std::max(reads.flow(0).fct_ns(), reads.flow(1).fct_ns());
  EXPECT_LT(reads.flow(2).fct_ns(), read_max * 3 / 2) << "the writer is not starved";
  const Summary r = reads.summary(), w = writes.summary();
  EXPECT_GT(r.cnps, 0u);
  // The same load, so about the same completion, as with three writers.
  EXPECT_LT(r.fct_max_ns, w.fct_max_ns * 11 / 10);
  EXPECT_GT(r.fct_max_ns, w.fct_max_ns * 9 / 10);
}

TEST(SimRunner, LeafSpineWithEcmpUsesBothSpines) {
  std::string text = R"(
[run]
duration = "20ms"
[topology]
kind = "leaf_spine"
leaves = 2
spines = 2
hosts_per_leaf = 4
host_rate = "100G"
oversubscription = 2
[switch]
pfc = { enabled = true }
)";
  for (int i = 0; i < 4; ++i)
    text += "[[flows]]\nsrc = \"h" + std::to_string(i) + "\"\ndst = \"h" + std::to_string(i + 4) +
            "\"\nbytes = \"256KiB\"\n";
  Simulator s(parse_scenario(text));
  s.run();
  ASSERT_TRUE(s.all_done());
  expect_all_verified(s);
  // Leaf 0's two uplinks (ports 4 and 5) both carried data.
  EXPECT_GT(s.switch_at(0).counters(4).tx_bytes, 100'000u);
  EXPECT_GT(s.switch_at(0).counters(5).tx_bytes, 100'000u);
  EXPECT_EQ(s.port_peer(0, 4), "spine0");
}

TEST(SimRunner, SameScenarioTwiceGivesIdenticalOutputs) {
  // Randomness everywhere it can matter: lossy links, RED marking, DCQCN.
  const std::string text = incast(4, false, "128KiB", "dcqcn") +
                           "[link]\nloss = 0.001\njitter = \"100ns\"\n";
  const auto dir = std::filesystem::temp_directory_path() /
                   ("sim_determinism_" + std::to_string(::getpid()));
  const auto first = testing::run_outputs(parse_scenario(text, "det.toml"), dir / "0");
  const auto second = testing::run_outputs(parse_scenario(text, "det.toml"), dir / "1");
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_GT(first[i].size(), 40u) << testing::kOutputFiles[i];
    EXPECT_TRUE(first[i] == second[i]) << testing::kOutputFiles[i] << " differs between runs";
  }
  // A different seed changes the run.
  Scenario sc = parse_scenario(text, "det.toml");
  sc.run.seed = 2;
  EXPECT_NE(testing::run_outputs(sc, dir / "seed2")[0], first[0]);
  std::filesystem::remove_all(dir);
}

// The summary's queue figures against a known queue and against the
// queues.csv the same run writes. One sender at 100 Gb/s into a 50 Gb/s
// port: the queue grows at 50 Gb/s while it sends 2 MiB (~170 us), then
// drains at 50 Gb/s, a triangle peaking at half the frames' bytes. Sampled
// every 1 us (more than a frame's worth of change per sample), the values
// near the top are distinct, so the p99 is told apart from its neighbours.
TEST(SimRunner, SummaryQueueMaxAndP99MatchAKnownQueue) {
  Simulator s(parse_scenario(R"(
[run]
duration = "5ms"
csv_interval = "1us"
[[hosts]]
name = "h0"
[[hosts]]
name = "h1"
[[switches]]
name = "s0"
[[links]]
a = "h0"
b = "s0"
rate = "50G"
[[links]]
a = "h1"
b = "s0"
rate = "100G"
[[flows]]
src = "h1"
dst = "h0"
bytes = "2MiB"
)", "q.toml"));
  s.run();
  ASSERT_TRUE(s.all_done());
  const Summary sum = s.summary();
  const auto dir = std::filesystem::temp_directory_path() /
                   ("sim_queue_p99_" + std::to_string(::getpid()));
  s.write_outputs(dir.string());
  // queues.csv: time_ns,switch,port,peer,tc,bytes
  std::map<std::pair<uint32_t, uint32_t>, std::vector<uint64_t>> samples;  // (port, tc)
  std::istringstream csv(testing::slurp(dir / "queues.csv"));
  std::string line;
  std::getline(csv, line);
  ASSERT_EQ(line, "time_ns,switch,port,peer,tc,bytes");
  while (std::getline(csv, line)) {
    std::vector<std::string> f;
    std::istringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
    ASSERT_EQ(f.size(), 6u) << line;
    ASSERT_EQ(f[1], "s0");
    samples[{std::stoul(f[2]), std::stoul(f[4])}].push_back(std::stoull(f[5]));
  }
  std::filesystem::remove_all(dir);

  // The queue to h0 (port 0, class 3).
  ASSERT_EQ(s.port_peer(0, 0), "h0");
  std::vector<uint64_t> v = samples[{0, 3}];
  ASSERT_GT(v.size(), 300u);
  std::sort(v.begin(), v.end());
  const size_t rank = (v.size() * 99 + 99) / 100;  // ceil(0.99 n), 1-based nearest rank
  ASSERT_LT(v[rank - 2], v[rank - 1]);
  ASSERT_LT(v[rank - 1], v[rank]);
  const QueueSummary* q0 = nullptr;
  for (const QueueSummary& q : sum.queues)
    if (q.port == 0 && q.tc == 3) q0 = &q;
  ASSERT_NE(q0, nullptr);
  EXPECT_EQ(q0->p99_bytes, v[rank - 1]);
  EXPECT_EQ(sum.p99_queue_bytes, v[rank - 1]);  // the largest p99 of all queues
  // The high-water mark is exact (the switch's counter), at or above every
  // sample; the peak of the triangle is half of the data frames' bytes.
  const uint64_t frames = 512, frame_bytes = s.switch_at(0).counters(0).queues[3].enq_bytes / frames;
  EXPECT_EQ(s.switch_at(0).counters(0).queues[3].enq_packets, frames);
  EXPECT_EQ(q0->max_bytes, s.switch_at(0).counters(0).queues[3].max_bytes);
  EXPECT_EQ(sum.max_queue_bytes, q0->max_bytes);
  EXPECT_GE(q0->max_bytes, v.back());
  EXPECT_NEAR(static_cast<double>(q0->max_bytes), frames * frame_bytes / 2.0, 2.0 * frame_bytes);
  // A symmetric triangle spends 1 % of its time above 99 % of its peak.
  EXPECT_NEAR(static_cast<double>(q0->p99_bytes), 0.99 * static_cast<double>(q0->max_bytes),
              2.0 * frame_bytes);
  // Every other queue in the CSV: the same nearest-rank p99 in the summary.
  size_t checked = 0;
  for (const QueueSummary& q : sum.queues) {
    auto it = samples.find({q.port, q.tc});
    if (it == samples.end()) continue;  // a class queues.csv does not track
    std::vector<uint64_t> w = it->second;
    std::sort(w.begin(), w.end());
    EXPECT_EQ(q.p99_bytes, w[(w.size() * 99 + 99) / 100 - 1]) << "port " << q.port;
    EXPECT_GE(q.max_bytes, w.back()) << "port " << q.port;
    ++checked;
  }
  EXPECT_EQ(checked, 2u);  // h0's and h1's ports (h1's carries the ACKs)
}

TEST(SimRunner, SamplesAreProgrammaticallyReadable) {
  Simulator s(parse_scenario(incast(2, true, "1MiB")));
  uint64_t hooks = 0;
  s.set_sample_hook([&](uint64_t) { ++hooks; });
  s.run();
  EXPECT_EQ(hooks, s.flow_samples().size() / 2);
  ASSERT_FALSE(s.flow_samples().empty());
  // Each sender gets about half of the bottleneck in the middle of the run.
  uint64_t peak_queue = 0;
  for (const auto& q : s.queue_samples()) peak_queue = std::max(peak_queue, q.bytes);
  EXPECT_GT(peak_queue, 0u);
  // Utilisation is serialisation time per interval: never above 1 (it once
  // counted whole frames at arrival and read up to a frame per interval
  // over), and the bottleneck is near 1 while both senders are busy.
  double util_max = 0;
  for (const auto& l : s.link_samples()) {
    EXPECT_GE(l.utilisation, 0.0);
    EXPECT_LE(l.utilisation, 1.0 + 1e-9) << "link " << l.link << " at " << l.time_ns;
    util_max = std::max(util_max, l.utilisation);
  }
  EXPECT_GT(util_max, 0.97);
}

// A frame of at most 320 bytes (an ACK here) travels in a small buffer,
// not in the 4.5 KiB one a whole data frame needs: a fabric with
// thousands of connections has as many ACKs in flight.
TEST(SimRunner, SmallFramesTravelInSmallBuffers) {
  Simulator s(parse_scenario(incast(2, false, "64KiB")));
  size_t small = 0, large = 0;
  for (uint64_t t = 2'000; t <= 60'000; t += 100) {
    s.run_until(t);
    for (size_t l = 0; l < s.num_links(); ++l) {
      const fabric::Packet* p = s.link_at(l).next_arrival();
      if (!p) continue;
      if (p->size() > 320) {
        ++large;
        continue;
      }
      ++small;
      EXPECT_LT(p->bytes.capacity(), 4096u) << "a " << p->size() << "-byte frame at " << t;
    }
  }
  EXPECT_GT(small, 10u);
  EXPECT_GT(large, 10u);
}

// The rows visited one at a time (what the CSV files are written from)
// are the rows the vectors hold, whether or not the vectors were rebuilt
// part way through the run.
TEST(SimRunner, VisitedSamplesAreTheRows) {
  Simulator s(parse_scenario(incast(2, false, "64KiB")));
  s.run_until(200'000);
  const size_t part = s.flow_samples().size();  // rebuilt up to here
  s.run();
  ASSERT_GT(s.flow_samples().size(), part);
  ASSERT_GT(part, 0u);
  std::vector<FlowSample> flows;
  std::vector<QueueSample> queues;
  std::vector<LinkSample> links;
  s.each_flow_sample([&](const FlowSample& x) { flows.push_back(x); });
  s.each_queue_sample([&](const QueueSample& x) { queues.push_back(x); });
  s.each_link_sample([&](const LinkSample& x) { links.push_back(x); });
  EXPECT_EQ(flows, s.flow_samples());
  EXPECT_EQ(queues, s.queue_samples());
  EXPECT_EQ(links, s.link_samples());
  EXPECT_TRUE(std::any_of(queues.begin(), queues.end(), [](auto& q) { return q.bytes > 0; }));
  // Visiting again gives the same rows: nothing is consumed.
  size_t again = 0;
  s.each_link_sample([&](const LinkSample& x) { EXPECT_EQ(x, links.at(again++)); });
  EXPECT_EQ(again, links.size());
}

}  // namespace
}  // namespace droce::sim
