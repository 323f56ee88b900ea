// Protection domain (IBA 10.2.3): the scope in which a QP may use an MR.
#pragma once

#include <cstdint>

namespace droce::transport {

class ProtectionDomain {
 public:
  explicit ProtectionDomain(uint32_t handle) : handle_(handle) {}
  uint32_t handle() const { return handle_; }

 private:
  uint32_t handle_;
};

}  // namespace droce::transport
