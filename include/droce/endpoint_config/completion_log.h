// droce-endpoint's --completions file: every work completion as one JSON
// object per line (JSON Lines), with every field of the ibv_wc a verbs
// application would have polled, names as libibverbs spells its enumerators
// (without IBV_WC_, lower case).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "droce/transport/wqe.h"

namespace droce::endpoint_config {

const char* wc_status_name(ibv_wc_status s);
const char* wc_opcode_name(ibv_wc_opcode op);
// One line (with its newline): `time_ns` is the wall clock when it was taken.
std::string completion_line(uint32_t port, const transport::WorkCompletion& wc, uint64_t time_ns);

// The file; flushed after each batch so it can be followed while the
// endpoint runs. An empty path writes nothing.
class CompletionLog {
 public:
  // ConfigError("--completions") when the file cannot be written.
  explicit CompletionLog(const std::string& path);
  ~CompletionLog();
  CompletionLog(const CompletionLog&) = delete;
  CompletionLog& operator=(const CompletionLog&) = delete;

  void write(uint32_t port, const transport::WorkCompletion& wc);
  void flush();

 private:
  std::FILE* f_ = nullptr;
};

}  // namespace droce::endpoint_config
