#include "droce/endpoint_config/completion_log.h"

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "droce/config_error.h"

namespace droce::endpoint_config {

const char* wc_status_name(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_LEN_ERR: return "loc_len_err";
    case IBV_WC_LOC_QP_OP_ERR: return "loc_qp_op_err";
    case IBV_WC_LOC_EEC_OP_ERR: return "loc_eec_op_err";
    case IBV_WC_LOC_PROT_ERR: return "loc_prot_err";
    case IBV_WC_WR_FLUSH_ERR: return "wr_flush_err";
    case IBV_WC_MW_BIND_ERR: return "mw_bind_err";
    case IBV_WC_BAD_RESP_ERR: return "bad_resp_err";
    case IBV_WC_LOC_ACCESS_ERR: return "loc_access_err";
    case IBV_WC_REM_INV_REQ_ERR: return "rem_inv_req_err";
    case IBV_WC_REM_ACCESS_ERR: return "rem_access_err";
    case IBV_WC_REM_OP_ERR: return "rem_op_err";
    case IBV_WC_RETRY_EXC_ERR: return "retry_exc_err";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "rnr_retry_exc_err";
    case IBV_WC_LOC_RDD_VIOL_ERR: return "loc_rdd_viol_err";
    case IBV_WC_REM_INV_RD_REQ_ERR: return "rem_inv_rd_req_err";
    case IBV_WC_REM_ABORT_ERR: return "rem_abort_err";
    case IBV_WC_INV_EECN_ERR: return "inv_eecn_err";
    case IBV_WC_INV_EEC_STATE_ERR: return "inv_eec_state_err";
    case IBV_WC_FATAL_ERR: return "fatal_err";
    case IBV_WC_RESP_TIMEOUT_ERR: return "resp_timeout_err";
    case IBV_WC_GENERAL_ERR: return "general_err";
    default: return "unknown";
  }
}

const char* wc_opcode_name(ibv_wc_opcode op) {
  switch (op) {
    case IBV_WC_SEND: return "send";
    case IBV_WC_RDMA_WRITE: return "rdma_write";
    case IBV_WC_RDMA_READ: return "rdma_read";
    case IBV_WC_COMP_SWAP: return "comp_swap";
    case IBV_WC_FETCH_ADD: return "fetch_add";
    case IBV_WC_BIND_MW: return "bind_mw";
    case IBV_WC_LOCAL_INV: return "local_inv";
    case IBV_WC_RECV: return "recv";
    case IBV_WC_RECV_RDMA_WITH_IMM: return "recv_rdma_with_imm";
    default: return "unknown";
  }
}

std::string completion_line(uint32_t port, const transport::WorkCompletion& wc, uint64_t ns) {
  std::string flags;
  for (auto [bit, name] : {std::pair{IBV_WC_GRH, "grh"}, {IBV_WC_WITH_IMM, "with_imm"},
                           {IBV_WC_IP_CSUM_OK, "ip_csum_ok"}, {IBV_WC_WITH_INV, "with_inv"}})
    if (wc.wc_flags & bit) flags += fmt::format("{}\"{}\"", flags.empty() ? "" : ",", name);
  std::string line = fmt::format(
      "{{\"time_ns\":{},\"port\":{},\"qpn\":{},\"wr_id\":{},\"status\":{},"
      "\"status_name\":\"{}\",\"opcode\":{},\"opcode_name\":\"{}\",\"byte_len\":{},",
      ns, port, wc.qp_num, wc.wr_id, static_cast<int>(wc.status), wc_status_name(wc.status),
      static_cast<int>(wc.opcode), wc_opcode_name(wc.opcode), wc.byte_len);
  if (wc.wc_flags & IBV_WC_WITH_IMM) line += fmt::format("\"imm_data\":{},", wc.imm_data);
  if (wc.wc_flags & IBV_WC_WITH_INV)
    line += fmt::format("\"invalidated_rkey\":{},", wc.invalidated_rkey);
  line += fmt::format("\"src_qp\":{},\"wc_flags\":{},\"flags\":[{}],\"vendor_err\":{}}}\n",
                      wc.src_qp, wc.wc_flags, flags, wc.vendor_err);
  return line;
}

CompletionLog::CompletionLog(const std::string& path) {
  if (path.empty()) return;
  f_ = std::fopen(path.c_str(), "w");
  if (!f_)
    throw ConfigError("--completions",
                      fmt::format("cannot write {}: {}", path, std::strerror(errno)));
}

CompletionLog::~CompletionLog() {
  if (f_) std::fclose(f_);
}

void CompletionLog::write(uint32_t port, const transport::WorkCompletion& wc) {
  if (!f_) return;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  std::fputs(completion_line(port, wc, static_cast<uint64_t>(ns)).c_str(), f_);
}

void CompletionLog::flush() {
  if (f_) std::fflush(f_);
}

}  // namespace droce::endpoint_config
