// The arguments of a DPDK device (the text after the name in --vdev,
// "net_memif0,role=server,bsize=8192"), read for the limits they set.
// DPDK-free: the engine hands over the text its EAL parsed.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace droce::options {

// The value of `key` in a comma-separated key=value list; nullopt when the
// key is absent. The first key=value wins, as DPDK's kvargs hand it out.
std::optional<std::string_view> device_arg(std::string_view args, std::string_view key);

// The bytes one net_memif descriptor slot holds: its `bsize` argument, or
// the PMD's default of 2048 (DPDK's memif guide) when absent or not a
// number. A frame longer than that spans slots.
uint32_t memif_slot_bytes(std::string_view args);

}  // namespace droce::options
