#include "droce/pktgen/report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

namespace droce::pktgen {
namespace {

uint64_t oracle(std::vector<uint64_t> v, double q) {
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::max<size_t>(rank, 1) - 1];
}

TEST(PktgenReport, PerStepAggregationMatchesSortedOracle) {
  IterationStats st;
  std::mt19937_64 rng(5);
  std::map<uint32_t, std::vector<uint64_t>> by_step;
  std::vector<uint64_t> all;
  for (int i = 0; i < 5000; ++i) {
    const uint32_t step = rng() % 7;
    const uint64_t v = rng() % 1000;  // exact range of the histogram
    by_step[step].push_back(v);
    all.push_back(v);
    st.record_transfer(step, v);
  }
  uint64_t worst = 0;
  for (const auto& [step, v] : by_step) {
    EXPECT_EQ(st.step_p99(step), oracle(v, 0.99)) << step;
    EXPECT_EQ(st.steps().at(step).count(), v.size());
    worst = std::max(worst, oracle(v, 0.99));
  }
  EXPECT_EQ(st.worst_step_p99(), worst);
  EXPECT_EQ(st.transfers().percentile(0.5), oracle(all, 0.5));
  EXPECT_EQ(st.step_p99(99), 0u);
}

TEST(PktgenReport, ResultArithmeticAndTable) {
  ScheduleParams p;
  p.pattern = Pattern::kRingAllReduce;
  p.ranks = 8;
  p.bytes = 1 << 20;
  IterationStats st;
  for (uint64_t jct : {100'000, 100'000, 100'000, 200'000}) st.record_iteration(jct);  // mean 125 us
  st.record_transfer(0, 900);
  const CollectiveResult r = make_result(p, st, 0);
  EXPECT_EQ(r.count, (1u << 20) / 4);
  EXPECT_DOUBLE_EQ(r.time_us, 125.0);
  EXPECT_NEAR(r.algbw_gbps, 1048576 / 125e-6 / 1e9, 1e-9);  // 8.389
  EXPECT_NEAR(r.busbw_gbps, r.algbw_gbps * 1.75, 1e-9);
  // Percentiles come from the log-linear histogram (within 0.2%); max is exact.
  EXPECT_EQ(r.jct_p50_ns, telemetry::LatencyHistogram::bucket_high(
                              telemetry::LatencyHistogram::bucket_of(100'000)));
  EXPECT_EQ(r.jct_max_ns, 200'000u);
  EXPECT_EQ(r.step_p99_ns, 900u);
  const std::string header = table_header();
  EXPECT_NE(header.find("#       size         count      type   redop    root     time   algbw   busbw #wrong"),
            std::string::npos)
      << header;
  EXPECT_NE(header.find("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"),
            std::string::npos)
      << header;
  const std::string row = table_row(r);
  EXPECT_EQ(row, "     1048576        262144     float     sum      -1   125.00    8.39   14.68      0\n");
  // Row columns line up under the header's.
  const auto names = header.substr(header.find("#       size"));
  EXPECT_EQ(names.find("#wrong") + 6, row.size() - 1);
  CollectiveResult unchecked = r;
  unchecked.wrong = -1;
  EXPECT_NE(table_row(unchecked).find("N/A"), std::string::npos);
  EXPECT_NE(latency_row(r).find("200.00"), std::string::npos) << latency_row(r);
  EXPECT_NE(average_busbw_line({r, r}).find("# Avg bus bandwidth    : 14.6801"), std::string::npos);
}

// A size whose iterations stalled: no time, algbw or busbw of 0 in the
// table, the JSON or the average; the count is reported instead.
TEST(PktgenReport, StalledSizesAreNotAveragedAsZero) {
  ScheduleParams p;
  p.pattern = Pattern::kRingAllReduce;
  p.ranks = 8;
  p.bytes = 1 << 20;
  IterationStats good;
  good.record_iteration(100'000);
  IterationStats dead;
  dead.record_stalled();
  const CollectiveResult a = make_result(p, good, -1), b = make_result(p, dead, -1);
  EXPECT_EQ(b.iterations, 0u);
  EXPECT_EQ(b.stalled_iterations, 1u);
  const std::string row = table_row(b);
  EXPECT_EQ(row.substr(0, row.find('\n') + 1),
            "     1048576        262144     float     sum      -1      N/A     N/A     N/A    N/A\n");
  EXPECT_NE(row.find("# "), std::string::npos);
  // The row lines up with a timed one.
  EXPECT_EQ(row.find('\n'), table_row(a).size() - 1);
  EXPECT_EQ(average_busbw_line({a, b}), average_busbw_line({a}));
  const auto j = results_json(p, 1, 0, {a, b});
  EXPECT_TRUE(j["results"][1]["busbw_gbps"].is_null());
  EXPECT_DOUBLE_EQ(j["avg_busbw_gbps"].get<double>(), a.busbw_gbps);
  EXPECT_EQ(table_row(a).find("stalled"), std::string::npos);
}

TEST(PktgenReport, JsonAndCsv) {
  ScheduleParams p;
  p.pattern = Pattern::kIncast;
  p.ranks = 4;
  p.bytes = 4096;
  p.root = 2;
  IterationStats st;
  st.record_iteration(1000);
  const auto r = make_result(p, st, 3);
  EXPECT_EQ(r.root, 2);
  const auto j = results_json(p, 1, 0, {r});
  EXPECT_EQ(j["pattern"], "incast");
  EXPECT_EQ(j["ranks"], 4);
  EXPECT_DOUBLE_EQ(j["bus_factor"].get<double>(), 3.0);
  ASSERT_EQ(j["results"].size(), 1u);
  EXPECT_EQ(j["results"][0]["size"], 4096);
  EXPECT_EQ(j["results"][0]["wrong"], 3);
  EXPECT_EQ(j["results"][0]["jct_ns"]["p50"], 1000);
  EXPECT_EQ(nlohmann::json::parse(j.dump()), j);

  std::ostringstream out;
  CsvWriter csv(out, stream_csv_columns());
  StreamSample s;
  s.t_ns = 1'000'000'000'000'000;  // no exponent notation for big counters
  s.lost = 2;
  csv.row(to_csv_values(s));
  EXPECT_THROW(csv.row(std::vector<uint64_t>{1, 2}), std::invalid_argument);
  const std::string text = out.str();
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "t_ns,stream_id,tx_packets,tx_bytes,rx_packets,rx_bytes,lost,duplicate,out_of_order,"
            "latency_p50_ns,latency_p99_ns,latency_p999_ns,latency_max_ns");
  EXPECT_NE(text.find("1000000000000000,0,0,0,0,0,2,0,0,0,0,0,0\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace droce::pktgen
