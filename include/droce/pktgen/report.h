// Reports: nccl-tests' table (same columns and header layout), per-iteration
// job completion time and per-step latency tails, a JSON result object and
// CSV time series.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "droce/pktgen/busbw.h"
#include "droce/pktgen/schedule.h"
#include "droce/telemetry/latency_histogram.h"

namespace droce::pktgen {

// What an executor measures while running one size: one JCT per timed
// iteration (post of the first transfer to completion of the last) and one
// latency per transfer (post to completion), grouped by Transfer::step.
// An iteration that stalled (did not finish: a link down, a QP in the
// error state) is not timed: it is only counted (record_stalled), so it
// cannot show up as a JCT or, with no finished iteration, as busbw 0.
class IterationStats {
 public:
  void record_iteration(uint64_t jct_ns);
  void record_transfer(uint32_t step, uint64_t latency_ns);
  void record_stalled() { ++stalled_; }
  uint64_t stalled() const { return stalled_; }

  const telemetry::LatencyHistogram& jct() const { return jct_; }
  // All transfers of all steps together.
  const telemetry::LatencyHistogram& transfers() const { return all_steps_; }
  // One histogram per step that saw a transfer (about 0.5 MiB each).
  const std::map<uint32_t, telemetry::LatencyHistogram>& steps() const { return steps_; }
  // p99 of the step's transfers; 0 for a step without any.
  uint64_t step_p99(uint32_t step) const;
  // The slowest step by its p99 (the step that bounds the collective).
  uint64_t worst_step_p99() const;
  // Mean JCT in microseconds (nccl-tests' "time" column).
  double mean_time_us() const { return jct_.mean() / 1e3; }

 private:
  telemetry::LatencyHistogram jct_;
  telemetry::LatencyHistogram all_steps_;
  std::map<uint32_t, telemetry::LatencyHistogram> steps_;
  uint64_t stalled_ = 0;
};

struct CollectiveResult {
  Pattern pattern = Pattern::kRingAllReduce;
  uint32_t ranks = 0;
  uint64_t bytes = 0;
  uint64_t count = 0;       // float32 elements: bytes / 4
  int32_t root = -1;        // incast root, else -1 (nccl-tests prints -1)
  uint64_t iterations = 0;  // finished timed iterations
  uint64_t stalled_iterations = 0;  // not finished: not in any figure below
  double time_us = 0;       // mean JCT (0 and printed N/A when none finished)
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  int64_t wrong = -1;       // -1: not checked (printed N/A)
  uint64_t jct_p50_ns = 0, jct_p99_ns = 0, jct_max_ns = 0;
  uint64_t step_p99_ns = 0;  // worst step's p99
  uint64_t chunk_bytes = 0;  // the pipelining unit used at this size (0: whole step)
};

CollectiveResult make_result(const ScheduleParams& params, const IterationStats& stats,
                             int64_t wrong);

// nccl-tests' layout: a group label line, the column names, the units, then
// one row per size. `placement` is the group label ("in-place"). A size
// without a finished iteration prints N/A for time, algbw and busbw; one
// with stalled iterations gets a comment line with their count after it.
std::string table_header(std::string_view placement = "in-place");
std::string table_row(const CollectiveResult& r);
// The tail latencies, a second table in the same style.
std::string latency_header();
std::string latency_row(const CollectiveResult& r);
// nccl-tests' closing line: "# Avg bus bandwidth    : x.xxxx", over the
// sizes with a finished iteration.
std::string average_busbw_line(const std::vector<CollectiveResult>& rows);

nlohmann::json to_json(const CollectiveResult& r);
// The --json object: the schedule parameters and one entry per size.
nlohmann::json results_json(const ScheduleParams& params, uint32_t iterations, uint32_t warmup,
                            const std::vector<CollectiveResult>& rows);

// CSV with a fixed header, one row per sample.
class CsvWriter {
 public:
  CsvWriter(std::ostream& out, std::vector<std::string> columns);
  // Exactly one value per column; throws std::invalid_argument otherwise.
  void row(const std::vector<uint64_t>& values);
  void row(const std::vector<double>& values);  // shortest round-trip form
  size_t columns() const { return columns_.size(); }

 private:
  std::ostream& out_;
  std::vector<std::string> columns_;
};

// The time series columns: collectives (one row per iteration) and streams
// (one row per interval).
std::vector<std::string> iteration_csv_columns();  // iteration,bytes,jct_ns,wrong
std::vector<std::string> stream_csv_columns();
struct StreamSample {
  uint64_t t_ns = 0;
  uint32_t stream_id = 0;
  uint64_t tx_packets = 0, tx_bytes = 0;
  uint64_t rx_packets = 0, rx_bytes = 0;
  uint64_t lost = 0, duplicate = 0, out_of_order = 0;
  uint64_t latency_p50_ns = 0, latency_p99_ns = 0, latency_p999_ns = 0, latency_max_ns = 0;
};
std::vector<uint64_t> to_csv_values(const StreamSample& s);

}  // namespace droce::pktgen
