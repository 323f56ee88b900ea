#include "droce/pktgen/report.h"

#include <fmt/format.h>

#include <stdexcept>

namespace droce::pktgen {

void IterationStats::record_iteration(uint64_t jct_ns) { jct_.record(jct_ns); }

void IterationStats::record_transfer(uint32_t step, uint64_t latency_ns) {
  all_steps_.record(latency_ns);
  steps_[step].record(latency_ns);
}

uint64_t IterationStats::step_p99(uint32_t step) const {
  const auto it = steps_.find(step);
  return it == steps_.end() ? 0 : it->second.percentile(0.99);
}

uint64_t IterationStats::worst_step_p99() const {
  uint64_t worst = 0;
  for (const auto& [step, h] : steps_) worst = std::max(worst, h.percentile(0.99));
  return worst;
}

CollectiveResult make_result(const ScheduleParams& p, const IterationStats& stats, int64_t wrong) {
  CollectiveResult r;
  r.pattern = p.pattern;
  r.ranks = p.ranks;
  r.bytes = p.bytes;
  r.count = p.bytes / 4;
  r.root = p.pattern == Pattern::kIncast ? static_cast<int32_t>(p.root) : -1;
  r.iterations = stats.jct().count();
  r.stalled_iterations = stats.stalled();
  r.time_us = stats.mean_time_us();
  const double seconds = r.time_us / 1e6;
  r.algbw_gbps = algbw_gbps(p.bytes, seconds);
  r.busbw_gbps = busbw_gbps(collective_of(p.pattern), p.ranks, p.bytes, seconds);
  r.wrong = wrong;
  r.jct_p50_ns = stats.jct().percentile(0.5);
  r.jct_p99_ns = stats.jct().percentile(0.99);
  r.jct_max_ns = stats.jct().max();
  r.step_p99_ns = stats.worst_step_p99();
  r.chunk_bytes = effective_chunk_bytes(p);
  return r;
}

namespace {

// Column widths of a row: size, count, type, redop, root; then the group
// time, algbw, busbw, #wrong.
constexpr int kGroupWidth = 2 + 7 + 2 + 6 + 2 + 6 + 2 + 5;
constexpr int kLeadWidth = 12 + 2 + 12 + 2 + 8 + 2 + 6 + 2 + 6;

std::string_view redop_of(Pattern p) {
  switch (collective_of(p)) {
    case Collective::kAllReduce:
    case Collective::kReduceScatter:
    case Collective::kReduce:
      return "sum";
    default:
      return "none";
  }
}

std::string format_time(double us) {
  // Keep the 7-character column for long runs.
  return us < 1e4 ? fmt::format("{:7.2f}", us) : us < 1e6 ? fmt::format("{:7.1f}", us)
                                                          : fmt::format("{:7.0f}", us);
}

}  // namespace

std::string table_header(std::string_view placement) {
  const int pad = (kGroupWidth - static_cast<int>(placement.size())) / 2;
  std::string out = "#\n";
  out += fmt::format("#{:{}}{:{}}{}\n", "", kLeadWidth - 1, "", std::max(pad, 0), placement);
  out += fmt::format("#{:>11}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6} {:>6}\n", "size",
                     "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong");
  out += fmt::format("#{:>11}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6} {:>6}\n", "(B)",
                     "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "");
  return out;
}

std::string table_row(const CollectiveResult& r) {
  const std::string wrong = r.wrong < 0 ? "N/A" : fmt::format("{}", r.wrong);
  std::string out;
  if (r.iterations == 0) {
    out = fmt::format("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>5}\n", r.bytes,
                      r.count, "float", redop_of(r.pattern), r.root, "N/A", "N/A", "N/A", wrong);
  } else {
    out = fmt::format("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}  {}  {:6.2f}  {:6.2f}  {:>5}\n", r.bytes,
                      r.count, "float", redop_of(r.pattern), r.root, format_time(r.time_us),
                      r.algbw_gbps, r.busbw_gbps, wrong);
  }
  if (r.stalled_iterations > 0) {
    out += fmt::format("#  {} B: {} iteration(s) stalled (did not finish), not in time, algbw and "
                       "busbw; {} finished\n",
                       r.bytes, r.stalled_iterations, r.iterations);
  }
  return out;
}

std::string latency_header() {
  std::string out;
  out += fmt::format("#{:>11}  {:>10}  {:>12}  {:>12}  {:>12}  {:>12}\n", "size", "iters", "jct_p50",
                     "jct_p99", "jct_max", "step_p99");
  out += fmt::format("#{:>11}  {:>10}  {:>12}  {:>12}  {:>12}  {:>12}\n", "(B)", "", "(us)", "(us)",
                     "(us)", "(us)");
  return out;
}

std::string latency_row(const CollectiveResult& r) {
  const auto us = [](uint64_t ns) { return static_cast<double>(ns) / 1e3; };
  return fmt::format("{:>12}  {:>10}  {:12.2f}  {:12.2f}  {:12.2f}  {:12.2f}\n", r.bytes,
                     r.iterations, us(r.jct_p50_ns), us(r.jct_p99_ns), us(r.jct_max_ns),
                     us(r.step_p99_ns));
}

namespace {
// Mean busbw over the sizes that have a timed iteration that finished.
double average_busbw(const std::vector<CollectiveResult>& rows) {
  double sum = 0;
  size_t timed = 0;
  for (const auto& r : rows) {
    if (r.iterations == 0) continue;
    sum += r.busbw_gbps;
    ++timed;
  }
  return timed == 0 ? 0.0 : sum / static_cast<double>(timed);
}
}  // namespace

std::string average_busbw_line(const std::vector<CollectiveResult>& rows) {
  return fmt::format("# Avg bus bandwidth    : {:.4f} \n", average_busbw(rows));
}

nlohmann::json to_json(const CollectiveResult& r) {
  nlohmann::json j;
  j["size"] = r.bytes;
  j["count"] = r.count;
  j["type"] = "float";
  j["redop"] = redop_of(r.pattern);
  j["root"] = r.root;
  j["iterations"] = r.iterations;
  j["stalled_iterations"] = r.stalled_iterations;
  // No finished iteration: no time, not a time of 0.
  const auto timed = [&](double v) { return r.iterations == 0 ? nlohmann::json(nullptr) : nlohmann::json(v); };
  j["time_us"] = timed(r.time_us);
  j["algbw_gbps"] = timed(r.algbw_gbps);
  j["busbw_gbps"] = timed(r.busbw_gbps);
  j["wrong"] = r.wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.wrong);
  j["jct_ns"] = {{"p50", r.jct_p50_ns}, {"p99", r.jct_p99_ns}, {"max", r.jct_max_ns}};
  j["step_p99_ns"] = r.step_p99_ns;
  j["chunk_bytes"] = r.chunk_bytes;
  return j;
}

nlohmann::json results_json(const ScheduleParams& p, uint32_t iterations, uint32_t warmup,
                            const std::vector<CollectiveResult>& rows) {
  nlohmann::json j;
  j["pattern"] = to_string(p.pattern);
  j["collective"] = to_string(collective_of(p.pattern));
  j["ranks"] = p.ranks;
  j["channels"] = p.channels;
  j["chunk_bytes"] = p.chunk_bytes;
  j["bus_factor"] = bus_factor(collective_of(p.pattern), p.ranks);
  if (p.pattern == Pattern::kIncast) j["root"] = p.root;
  if (p.pattern == Pattern::kPermutation) j["seed"] = p.seed;
  if (p.window) j["window"] = p.window;
  j["iterations"] = iterations;
  j["warmup_iterations"] = warmup;
  j["results"] = nlohmann::json::array();
  for (const auto& r : rows) j["results"].push_back(to_json(r));
  j["avg_busbw_gbps"] = average_busbw(rows);
  return j;
}

CsvWriter::CsvWriter(std::ostream& out, std::vector<std::string> columns)
    : out_(out), columns_(std::move(columns)) {
  for (size_t i = 0; i < columns_.size(); ++i) out_ << (i ? "," : "") << columns_[i];
  out_ << '\n';
}

namespace {
template <typename T>
void write_row(std::ostream& out, size_t columns, const std::vector<T>& values) {
  if (values.size() != columns) {
    throw std::invalid_argument(
        fmt::format("CSV row has {} values for {} columns", values.size(), columns));
  }
  for (size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << fmt::format("{}", values[i]);
  out << '\n';
}
}  // namespace

void CsvWriter::row(const std::vector<uint64_t>& values) { write_row(out_, columns_.size(), values); }
void CsvWriter::row(const std::vector<double>& values) { write_row(out_, columns_.size(), values); }

std::vector<std::string> iteration_csv_columns() { return {"iteration", "bytes", "jct_ns", "wrong"}; }

std::vector<std::string> stream_csv_columns() {
  return {"t_ns",      "stream_id", "tx_packets",     "tx_bytes",       "rx_packets",
          "rx_bytes",  "lost",      "duplicate",      "out_of_order",   "latency_p50_ns",
          "latency_p99_ns", "latency_p999_ns", "latency_max_ns"};
}

std::vector<uint64_t> to_csv_values(const StreamSample& s) {
  return {s.t_ns,         s.stream_id,      s.tx_packets,     s.tx_bytes,
          s.rx_packets,   s.rx_bytes,       s.lost,           s.duplicate,
          s.out_of_order, s.latency_p50_ns, s.latency_p99_ns, s.latency_p999_ns,
          s.latency_max_ns};
}

}  // namespace droce::pktgen
