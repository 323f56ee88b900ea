// A scenario split into partitions (sim/partition.h) gives the same outputs
// as one process, byte for byte. The partitions run as threads here, with
// an in-memory PartitionComm; droce-sim carries the same exchange over MPI
// (tests/sim/mpi_test.py).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "droce/sim/collective.h"
#include "droce/sim/partition.h"
#include "droce/sim/scenario.h"
#include "droce/sim/simulator.h"
#include "droce/sim_mpi/mpi_comm.h"
#include "thread_comm.h"

namespace droce::sim {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every file of a run's outputs, by name.
std::map<std::string, std::string> outputs_of(const Simulator& s, const fs::path& dir) {
  s.write_outputs(dir.string());
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    files[e.path().filename().string()] = read_file(e.path());
  return files;
}

fs::path scratch(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / ("droce-partition-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  return d;
}

// A ThreadComm that counts the frame exchanges (one per window).
class CountingComm : public ThreadComm {
 public:
  CountingComm(Rendezvous& r, uint32_t index, uint64_t* exchanges)
      : ThreadComm(r, index), exchanges_(exchanges) {}
  std::span<const uint8_t> exchange(const std::vector<std::vector<uint8_t>>& out) override {
    if (exchanges_) ++*exchanges_;
    return ThreadComm::exchange(out);
  }

 private:
  uint64_t* exchanges_;
};

// Runs `sc` in one Simulator and split `k` ways, and expects the same
// outputs from both; returns the one process's summary. With `exchanges`,
// the first partition's exchanges are counted there.
Summary expect_same_outputs(const Scenario& sc, uint32_t k, const std::string& name,
                            uint64_t* exchanges = nullptr) {
  Simulator one(sc);
  one.run();
  const auto want = outputs_of(one, scratch(name + "-one"));

  Rendezvous r(k);
  std::vector<std::unique_ptr<Simulator>> sims;
  for (uint32_t p = 0; p < k; ++p) sims.push_back(std::make_unique<Simulator>(sc));
  std::vector<std::thread> threads;
  std::vector<uint64_t> ends(k);
  for (uint32_t p = 0; p < k; ++p)
    threads.emplace_back([&, p] {
      CountingComm comm(r, p, p == 0 ? exchanges : nullptr);
      ends[p] = sims[p]->run_partitioned(comm);
    });
  for (auto& t : threads) t.join();
  for (uint32_t p = 0; p < k; ++p) EXPECT_EQ(ends[p], one.now()) << "partition " << p;
  // Each partition ran a share of the events, not all of them.
  for (uint32_t p = 1; p < k; ++p) EXPECT_LT(sims[p]->packet_events(), one.packet_events());
  const auto got = outputs_of(*sims[0], scratch(name + "-split"));
  EXPECT_EQ(got.size(), want.size());
  for (const auto& [file, bytes] : want) {
    if (!got.count(file)) {
      ADD_FAILURE() << file << " missing";
      continue;
    }
    EXPECT_TRUE(got.at(file) == bytes)
        << name << " split " << k << " ways: " << file << " differs\n--- one process:\n"
        << bytes.substr(0, 1500) << "\n--- split:\n"
        << got.at(file).substr(0, 1500);
  }
  EXPECT_EQ(sims[0]->summary_json(), one.summary_json());
  EXPECT_EQ(sims[0]->packet_events(), one.packet_events());
  for (size_t f = 0; f < one.num_flows(); ++f) {
    EXPECT_EQ(sims[0]->flow_retransmits(f), one.flow_retransmits(f)) << f;
    EXPECT_EQ(sims[0]->verification(f), one.verification(f)) << f;
  }
  return one.summary();
}

// 4 leaves of 4 hosts, 2 spines; every host writes to the host 5 further
// on (crossing leaves) and reads from the one 6 further on; `run`
// (default: a 3 ms duration), `link` and `flow` go into those sections.
std::string leaf_spine(const std::string& run, const std::string& link, const std::string& flow) {
  std::string s = "[run]\ncsv_interval = \"2us\"\n" +
                  (run.empty() ? std::string("duration = \"3ms\"") : run) +
                  "\n[topology]\nkind = \"leaf_spine\"\nleaves = 4\nspines = 2\n"
                  "hosts_per_leaf = 4\ndelay = \"1us\"\n"
                  "[switch]\nbuffer = \"1MiB\"\nint = { enabled = true }\n"
                  "[link]\n" +
                  link + "\n[flow]\nbytes = \"96KiB\"\nmessage = \"32KiB\"\n" + flow + "\n";
  for (int h = 0; h < 16; ++h) {
    s += "[[flows]]\nname = \"w" + std::to_string(h) + "\"\nsrc = \"h" + std::to_string(h) +
         "\"\ndst = \"h" + std::to_string((h + 5) % 16) + "\"\n";
    s += "[[flows]]\nname = \"r" + std::to_string(h) + "\"\nsrc = \"h" + std::to_string(h) +
         "\"\ndst = \"h" + std::to_string((h + 6) % 16) + "\"\nopcode = \"read\"\nstart = \"" +
         std::to_string(h * 3) + "us\"\n";
  }
  return s;
}

// More [[flows]] for leaf_spine(): from every `step`th host to the host 9
// further on (another leaf), named `prefix` and the host's number, each
// with `keys`.
std::string flows_from_every(int step, const std::string& prefix, const std::string& keys) {
  std::string s;
  for (int h = 0; h < 16; h += step)
    s += "[[flows]]\nname = \"" + prefix + std::to_string(h) + "\"\nsrc = \"h" +
         std::to_string(h) + "\"\ndst = \"h" + std::to_string((h + 9) % 16) + "\"\n" + keys;
  return s;
}

TEST(SimPartition, ShippedLeafSpineAllToAllIsTheSameSplitTwoAndThreeWays) {
  const Scenario sc = load_scenario(DROCE_EXAMPLES_DIR "/cc/leaf-spine-a2a.toml");
  const Summary s = expect_same_outputs(sc, 2, "a2a2");
  EXPECT_EQ(s.flows_completed, 56u);
  EXPECT_GT(s.ecn_marks, 0u);
  expect_same_outputs(sc, 3, "a2a3");
}

TEST(SimPartition, WritesAndReadsWithCongestionAreTheSameSplitFourWays) {
  const Scenario sc = parse_scenario(leaf_spine("", "", "cc = \"dcqcn\"\nverify = true"));
  const Summary s = expect_same_outputs(sc, 2, "rw2");
  EXPECT_EQ(s.flows_verified, 32u);
  expect_same_outputs(sc, 4, "rw4");
}

// Unverified flows carry virtual payload (nothing gathers their bytes into
// the frames): split, the frames that cross still check and complete the
// flows as in one process.
TEST(SimPartition, VirtualPayloadIsTheSameSplit) {
  const Scenario sc = parse_scenario(
      leaf_spine("", "loss = 0.002", "cc = \"dcqcn\"\ntimeout = 8\nverify = false"));
  ASSERT_TRUE(sc.flows[0].virtual_payload());
  const Summary s = expect_same_outputs(sc, 2, "virtual2");
  EXPECT_EQ(s.flows_completed, 32u);
  EXPECT_GT(s.retransmits, 0u);
  expect_same_outputs(sc, 4, "virtual4");
}

TEST(SimPartition, LossJitterAndSelectiveRepeatAreTheSame) {
  const Scenario sc = parse_scenario(
      leaf_spine("", "loss = 0.01\njitter = \"300ns\"",
                 "cc = \"hpcc\"\nrecovery = \"selective_repeat\"\nentropy = \"spray\""));
  const Summary s = expect_same_outputs(sc, 2, "lossy2");
  // Some flows wait for the retransmit timeout (67 ms) past the 3 ms run.
  EXPECT_GT(s.flows_completed, 8u);
  EXPECT_FALSE(s.all_done);
  EXPECT_GT(s.link_losses, 0u);
  EXPECT_GT(s.retransmits, 0u);
  expect_same_outputs(sc, 4, "lossy4");
}

TEST(SimPartition, SendsBetweenPartitionsAreTheSame) {
  // SENDs from every host to one on another leaf: each sink keeps its
  // receive buffers posted itself, so the two ends may run apart.
  const Scenario sc =
      parse_scenario(leaf_spine("", "loss = 0.002", "timeout = 8\nverify = true") +
                     flows_from_every(2, "s", "opcode = \"send\"\nbytes = \"200KiB\"\n"
                                              "message = \"20000B\"\n"));
  const Summary s = expect_same_outputs(sc, 2, "send2");
  EXPECT_EQ(s.flows_verified, 40u);
  expect_same_outputs(sc, 4, "send4");
}

TEST(SimPartition, ARunToItsDurationAndAddressResolutionAreTheSame) {
  const Scenario sc = parse_scenario(leaf_spine(
      "stop_when_done = false\nduration = \"400us\"\nresolve_macs = true", "", "cc = \"timely\""));
  const Summary s = expect_same_outputs(sc, 3, "duration3");
  EXPECT_EQ(s.end_ns, 400'000u);
  EXPECT_EQ(s.flows_completed, 32u);
}

TEST(SimPartition, LinksThatGoDownAreTheSame) {
  // A spine uplink between partitions fails while frames are on it and
  // comes back, another fails for good, and a host's cable blinks; routes
  // reconverge 30 us after each change. Frames sent into another
  // partition's link before it went down are lost as in one process, and
  // those sent while it was down never draw from its impairments.
  const std::string outages =
      "[[outages]]\na = \"leaf0\"\nb = \"spine1\"\n"
      "down = [{ from = \"15us\", until = \"120us\" }, { from = \"400us\", until = \"410us\" }]\n"
      "[[outages]]\na = \"leaf3\"\nb = \"spine0\"\ndown = [{ from = \"60us\" }]\n"
      "[[outages]]\na = \"h5\"\nb = \"leaf1\"\ndown = [{ from = \"30us\", until = \"31us\" }]\n";
  const Scenario sc = parse_scenario(
      leaf_spine("duration = \"4ms\"\nreconverge = \"30us\"", "jitter = \"200ns\"",
                 "timeout = 8\nrecovery = \"selective_repeat\"\nentropy = \"spray\"") +
      outages);
  const PartitionPlan p = plan_partitions(sc, 2);
  ASSERT_NE(p.sw[static_cast<size_t>(sc.switch_index("leaf0"))],
            p.sw[static_cast<size_t>(sc.switch_index("spine1"))])
      << "the failing uplink must cross partitions";
  const Summary s = expect_same_outputs(sc, 2, "outage2");
  EXPECT_GT(s.link_losses, 0u) << "frames were lost to the outages";
  EXPECT_GT(s.flows_completed, 0u);
  expect_same_outputs(sc, 4, "outage4");
}

// Flows in two bursts 2 ms apart, sampled every 2 us: between them nothing
// happens anywhere, and the partitions sample that stretch's thousand
// instants without a window each (one exchange per window would be one
// per instant at least). The rows are the same as one process's.
TEST(SimPartition, AQuietStretchIsSampledWithoutWindows) {
  const Scenario sc = parse_scenario(leaf_spine("", "", "cc = \"dcqcn\"") +
                                     flows_from_every(4, "late", "start = \"2500us\"\n"));
  uint64_t exchanges = 0;
  const Summary s = expect_same_outputs(sc, 2, "quiet2", &exchanges);
  EXPECT_EQ(s.flows_completed, 36u);
  const uint64_t instants = s.end_ns / sc.run.csv_interval_ns;
  EXPECT_GT(instants, 1200u);
  EXPECT_LT(exchanges, instants / 2) << "windows in the quiet stretch";
}

// A [collective] in one Simulator and split `k` ways (as droce-sim runs
// it): the same collective.json and outputs.
void expect_same_collective(const Scenario& sc, uint32_t k, const std::string& name) {
  Simulator one(sc);
  const CollectiveResult want = run_collective(one, sc, *sc.collective);
  one.run();
  ASSERT_FALSE(want.stalled);
  const auto want_files = outputs_of(one, scratch(name + "-one"));
  const std::string want_json = collective_json(one, sc, *sc.collective, want);

  Rendezvous r(k);
  std::vector<std::unique_ptr<Simulator>> sims;
  for (uint32_t p = 0; p < k; ++p) sims.push_back(std::make_unique<Simulator>(sc));
  std::vector<CollectiveResult> got(k);
  std::vector<std::thread> threads;
  for (uint32_t p = 0; p < k; ++p)
    threads.emplace_back([&, p] {
      ThreadComm comm(r, p);
      Simulator& s = *sims[p];
      s.enter_partition(comm);
      got[p] = run_collective(s, sc, *sc.collective, &comm);
      s.run_partitioned_until(sc.run.duration_ns);
      s.merge_partitions();
    });
  for (auto& t : threads) t.join();
  for (uint32_t p = 0; p < k; ++p) EXPECT_EQ(got[p].jct_ns, want.jct_ns) << "partition " << p;
  EXPECT_EQ(collective_json(*sims[0], sc, *sc.collective, got[0]), want_json);
  const auto got_files = outputs_of(*sims[0], scratch(name + "-split"));
  for (const auto& [file, bytes] : want_files)
    EXPECT_TRUE(got_files.count(file) && got_files.at(file) == bytes) << name << ": " << file;
}

std::string collective_scenario(const std::string& collective, const std::string& link) {
  return "[run]\nduration = \"5ms\"\ncsv_interval = \"20us\"\n"
         "[topology]\nkind = \"leaf_spine\"\nleaves = 4\nspines = 2\nhosts_per_leaf = 4\n"
         "delay = \"1us\"\n[link]\n" +
         link +
         "\n[flow]\ncc = \"dcqcn\"\nrecovery = \"selective_repeat\"\ntimeout = 8\n"
         "[collective]\nbytes = \"256KiB\"\niterations = 2\n" +
         collective + "\n";
}

TEST(SimPartition, ReceiverTriggeredRingIsTheSameSplitTwoAndFourWays) {
  const Scenario sc = parse_scenario(
      collective_scenario("pattern = \"ring\"\ntrigger = \"receiver\"", "loss = 0.002"));
  expect_same_collective(sc, 2, "ring2");
  expect_same_collective(sc, 4, "ring4");
}

TEST(SimPartition, AllToAllIsTheSameSplitThreeWays) {
  const Scenario sc = parse_scenario(collective_scenario("pattern = \"all_to_all\"", ""));
  expect_same_collective(sc, 3, "a2a3");
}

TEST(SimPartition, FlowsBesideACollectiveAreTheSame) {
  // Flows crossing leaves next to a ring: the run stops where one process
  // stops it, after both (the flows end first, the ring later).
  std::string text = collective_scenario("pattern = \"ring\"\ntrigger = \"receiver\"", "");
  for (int h = 0; h < 16; h += 3)
    text += "[[flows]]\nsrc = \"h" + std::to_string(h) + "\"\ndst = \"h" +
            std::to_string((h + 7) % 16) + "\"\nbytes = \"32KiB\"\nstart = \"" +
            std::to_string(h) + "us\"\n";
  const Scenario sc = parse_scenario(text);
  expect_same_collective(sc, 2, "ringflows2");
  expect_same_collective(sc, 3, "ringflows3");
}

TEST(SimPartition, OneSwitchRunsInTheFirstPartitionAndTheOthersIdle) {
  const Scenario sc = load_scenario(DROCE_EXAMPLES_DIR "/sim/incast-2to1.toml");
  const PartitionPlan p = plan_partitions(sc, 2);
  EXPECT_EQ(p.lookahead_ns, UINT64_MAX) << "no link crosses";
  for (uint32_t h : p.host) EXPECT_EQ(h, 0u);
  expect_same_outputs(sc, 2, "incast2");
}

TEST(SimPartition, WhatCannotBeSplitIsRefusedByName) {
  const std::string base = leaf_spine("", "", "");
  EXPECT_NO_THROW(plan_partitions(parse_scenario(base), 4));
  const PartitionPlan p = plan_partitions(parse_scenario(base), 2);
  EXPECT_EQ(p.lookahead_ns, 1000u);
  // Leaves 0-1 and their hosts in partition 0, leaves 2-3 in partition 1.
  EXPECT_EQ(p.host[0], 0u);
  EXPECT_EQ(p.host[15], 1u);
  auto refused = [](const std::string& text, const std::string& what) {
    try {
      plan_partitions(parse_scenario(text), 2);
      ADD_FAILURE() << "not refused: " << what;
    } catch (const ScenarioError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  std::string no_delay = base;
  no_delay.replace(no_delay.find("delay = \"1us\""), 13, "delay = \"0ns\"");
  refused(no_delay, "needs a delay above 0");
  refused(collective_scenario("pattern = \"ring\"", ""),
          "collective.trigger: a ring split over processes needs trigger = \"receiver\"");
  refused(collective_scenario("pattern = \"all_to_all\"\nwindow = 2", ""),
          "collective.window: connections made during the run");
  // A partition run as one process would miss the others' frames.
  {
    Simulator s(parse_scenario(base));
    Rendezvous r(1);
    ThreadComm comm(r, 0);
    s.enter_partition(comm);
    EXPECT_THROW(s.run_until(1000), ScenarioError);
    EXPECT_THROW(s.enter_partition(comm), ScenarioError);
  }
}

// The PML asked for before MPI_Init: ob1 only for Open MPI with every
// process on this machine and no PML chosen.
TEST(SimPartition, OneMachineAsksOpenMpiForSharedMemoryUnlessAPmlWasChosen) {
  using Env = std::map<std::string, std::string>;
  auto pml = [](const Env& e) -> std::string {
    const char* p = sim_mpi::single_machine_pml([&](const char* v) -> const char* {
      const auto it = e.find(v);
      return it == e.end() ? nullptr : it->second.c_str();
    });
    return p ? p : "(Open MPI's choice)";
  };
  EXPECT_EQ(pml({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}), "ob1");
  EXPECT_EQ(pml({{"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}),
            "(Open MPI's choice)");  // two machines
  EXPECT_EQ(pml({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                 {"OMPI_MCA_pml", "ucx"}}),
            "(Open MPI's choice)");  // the user's
  EXPECT_EQ(pml({{"PMI_SIZE", "2"}}), "(Open MPI's choice)");  // another MPI
  EXPECT_EQ(pml({}), "(Open MPI's choice)");
}

}  // namespace
}  // namespace droce::sim
