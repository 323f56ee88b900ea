#include "droce/options/device_args.h"

#include <charconv>

namespace droce::options {

std::optional<std::string_view> device_arg(std::string_view args, std::string_view key) {
  while (!args.empty()) {
    const size_t comma = args.find(',');
    const std::string_view item = args.substr(0, comma);
    const size_t eq = item.find('=');
    if (eq != std::string_view::npos && item.substr(0, eq) == key) return item.substr(eq + 1);
    if (comma == std::string_view::npos) break;
    args.remove_prefix(comma + 1);
  }
  return std::nullopt;
}

uint32_t memif_slot_bytes(std::string_view args) {
  constexpr uint32_t kMemifDefaultBufferSize = 2048;
  const auto text = device_arg(args, "bsize");
  if (!text) return kMemifDefaultBufferSize;
  uint32_t v = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size() || v == 0)
    return kMemifDefaultBufferSize;
  return v;
}

}  // namespace droce::options
