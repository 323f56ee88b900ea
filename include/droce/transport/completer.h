// Completer rules: mapping AETH NAK codes to completion statuses
// (IBA 9.7.5.1.1 table 42 and 11.6.2 table 139). The completer itself is
// QueuePair's ACK/response half (src/transport/completer.cc).
#pragma once

#include <infiniband/verbs.h>

#include "droce/wire/headers.h"

namespace droce::transport {

constexpr ibv_wc_status wc_status_for_nak(wire::NakCode code) {
  switch (code) {
    case wire::NakCode::kInvalidRequest: return IBV_WC_REM_INV_REQ_ERR;
    case wire::NakCode::kRemoteAccessError: return IBV_WC_REM_ACCESS_ERR;
    case wire::NakCode::kRemoteOperationalError: return IBV_WC_REM_OP_ERR;
    case wire::NakCode::kInvalidRdRequest: return IBV_WC_REM_INV_RD_REQ_ERR;
    default: return IBV_WC_BAD_RESP_ERR;
  }
}

}  // namespace droce::transport
