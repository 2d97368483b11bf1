// Fuzzes the manifest decoders: a header (the input's first 37 bytes) and a manifest (the
// rest). DATA manifests go through decode_data_manifest with small limits, so allocation stays
// bounded; control frames through decode_control. An error is fine; a crash, a leak or an
// allocation past the limits is not.
#include <cstring>

#include "wcomm/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < wcomm::kHeaderSize) return 0;
  wcomm::CommConfig limits;
  limits.max_message_bytes = 1 << 20;  // allocations the decoder makes stay small
  limits.max_manifest_bytes = 64 << 10;
  auto header = wcomm::parse_header(data, limits);
  if (!header) return 0;
  std::span<const std::uint8_t> manifest(data + wcomm::kHeaderSize,
                                         std::min<std::size_t>(size - wcomm::kHeaderSize, header.value().manifest_size));
  if (header.value().kind == wcomm::FrameKind::kData) {
    wcomm::CodecOptions options;
    options.limits = &limits;
    auto decoded = wcomm::decode_data_manifest(header.value(), manifest, options);
    if (decoded) {
      std::uint64_t total = 0;
      for (const auto& segment : decoded.value().segments) total += segment.size();
      if (total > limits.max_message_bytes) __builtin_trap();  // storage past the limit
    }
  } else {
    (void)wcomm::decode_control(header.value(), manifest);
  }
  return 0;
}
