// The stand-in for zstd compression in a build without it (WCOMM_WITH_ZSTD=OFF, or
// libzstd-dev missing): nothing is compressed, the "zstd" feature is not offered (so no peer
// sends a compressed chunk), and a send that asks for compression is refused (comm.cpp).
#include "comm/compression.h"

namespace wcomm {

struct ChunkCompressor::State {};

ChunkCompressor::ChunkCompressor() = default;
ChunkCompressor::~ChunkCompressor() = default;

std::vector<std::uint8_t> ChunkCompressor::compress(const std::vector<asio::const_buffer>&, std::size_t) {
  return {};  // "would not be smaller": the chunk goes as it is
}

Result<std::size_t> decompress_chunk(const std::uint8_t*, std::size_t, const std::vector<asio::mutable_buffer>&) {
  return Error{ErrorCode::kProtocol, "a compressed chunk came, but this build of wcomm has no zstd and did not offer it"};
}

bool compression_built() { return false; }

}  // namespace wcomm
