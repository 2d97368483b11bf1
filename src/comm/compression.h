// zstd compression of payload pieces for the "zstd" wire feature (docs/wire-format.md):
// a chunk's bytes, gathered from the message's own memory, become one zstd frame; the
// receiver decompresses such a frame straight into the destination tensor's memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <asio/buffer.hpp>

#include "wcomm/errors.h"

namespace wcomm {

// One compressor, reused (a zstd context is costly to create). Not thread-safe.
class ChunkCompressor {
 public:
  ChunkCompressor();
  ~ChunkCompressor();
  // Compresses the gathered bytes into one zstd frame (fast level). Returns an empty vector
  // when the result would not be smaller than the input.
  std::vector<std::uint8_t> compress(const std::vector<asio::const_buffer>& input, std::size_t input_bytes);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Decompresses one zstd frame into `out` (filled in order, across buffer boundaries) and
// returns how many bytes it produced. The frame must name its content size, at most what
// `out` holds, and decompress to exactly that: anything else (corrupt data, a wrong length,
// trailing bytes) is a ProtocolError, found before a byte past `out` could be written.
Result<std::size_t> decompress_chunk(const std::uint8_t* data, std::size_t size,
                                     const std::vector<asio::mutable_buffer>& out);

// Whether this build has zstd (WCOMM_WITH_ZSTD): without it, "zstd" is never offered.
bool compression_built();

// Why a send that asks for compression (CommOptions::compress = kOn) cannot have it here.
inline constexpr const char* kNoCompressionReason =
    "CommOptions::compress: this build of wcomm has no zstd compression (configured with WCOMM_WITH_ZSTD=OFF or "
    "without libzstd): install libzstd-dev and configure with -DWCOMM_WITH_ZSTD=ON";

}  // namespace wcomm
