// Fuzzes the COMM v1 frame header parser: any 37 bytes are either a header within the
// limits or a ProtocolError, never a crash; a parsed header writes back to the same bytes.
#include <cstring>

#include "wcomm/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::uint8_t bytes[wcomm::kHeaderSize] = {};
  std::memcpy(bytes, data, std::min(size, sizeof bytes));
  const wcomm::CommConfig limits;
  auto header = wcomm::parse_header(bytes, limits);
  if (!header) return 0;
  if (header.value().manifest_size > limits.max_manifest_bytes) __builtin_trap();  // a limit let through
  std::uint8_t again[wcomm::kHeaderSize];
  wcomm::write_header(header.value(), again);
  auto reparsed = wcomm::parse_header(again, limits);
  if (!reparsed || reparsed.value().frame_bytes() != header.value().frame_bytes()) __builtin_trap();
  return 0;
}
