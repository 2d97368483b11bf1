// zstd chunk compression (ChunkCompressor, decompress_chunk).
#include "comm/compression.h"

#include <zstd.h>

#include <string>

namespace wcomm {

struct ChunkCompressor::State {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ~State() { ZSTD_freeCCtx(cctx); }
};

ChunkCompressor::ChunkCompressor() : state_(std::make_unique<State>()) {
  // Level 1: the fastest standard level; the point is to beat a slow link, not to archive.
  ZSTD_CCtx_setParameter(state_->cctx, ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setParameter(state_->cctx, ZSTD_c_checksumFlag, 0);
}

ChunkCompressor::~ChunkCompressor() = default;

std::vector<std::uint8_t> ChunkCompressor::compress(const std::vector<asio::const_buffer>& input,
                                                    std::size_t input_bytes) {
  ZSTD_CCtx* cctx = state_->cctx;
  ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
  ZSTD_CCtx_setPledgedSrcSize(cctx, input_bytes);  // the frame then names its content size
  // Anything not smaller than the input is useless: the output stops there.
  std::vector<std::uint8_t> out(input_bytes);
  ZSTD_outBuffer dst{out.data(), out.size(), 0};
  for (std::size_t i = 0; i < input.size(); ++i) {
    ZSTD_inBuffer src{input[i].data(), input[i].size(), 0};
    const bool last = i + 1 == input.size();
    while (true) {
      const std::size_t left = ZSTD_compressStream2(cctx, &dst, &src, last ? ZSTD_e_end : ZSTD_e_continue);
      if (ZSTD_isError(left)) return {};
      if (last ? left == 0 : src.pos == src.size) break;
      if (dst.pos == dst.size) return {};  // not smaller
    }
  }
  if (input.empty()) return {};
  if (dst.pos >= input_bytes) return {};
  out.resize(dst.pos);
  return out;
}

Result<std::size_t> decompress_chunk(const std::uint8_t* data, std::size_t size,
                                     const std::vector<asio::mutable_buffer>& out) {
  std::size_t room = 0;
  for (const auto& b : out) room += b.size();
  struct DCtx {
    ZSTD_DCtx* d = ZSTD_createDCtx();
    ~DCtx() { ZSTD_freeDCtx(d); }
  };
  thread_local DCtx dctx;  // readers are the loop or a caller's thread: one context each
  ZSTD_DCtx_reset(dctx.d, ZSTD_reset_session_only);
  const unsigned long long declared = ZSTD_getFrameContentSize(data, size);
  if (declared >= ZSTD_CONTENTSIZE_ERROR || declared == 0 || declared > room)
    return Error{ErrorCode::kProtocol, "a compressed chunk declares " +
                                           (declared >= ZSTD_CONTENTSIZE_ERROR ? std::string("no valid length")
                                                                               : std::to_string(declared) + " bytes") +
                                           "; the message has " + std::to_string(room) + " bytes left"};
  const std::size_t expected = static_cast<std::size_t>(declared);
  ZSTD_inBuffer src{data, size, 0};
  std::size_t produced = 0;
  std::size_t last = 1;
  for (const auto& b : out) {
    if (produced == expected) break;
    const std::size_t want = std::min(b.size(), expected - produced);
    ZSTD_outBuffer dst{b.data(), want, 0};
    while (dst.pos < dst.size) {
      last = ZSTD_decompressStream(dctx.d, &dst, &src);
      if (ZSTD_isError(last))
        return Error{ErrorCode::kProtocol, std::string("a compressed chunk is corrupt: ") + ZSTD_getErrorName(last)};
      if (last == 0 || (src.pos == src.size && dst.pos < dst.size && last != 0)) break;
    }
    produced += dst.pos;
    if (dst.pos < dst.size) break;
  }
  if (produced != expected || last != 0 || src.pos != src.size)
    return Error{ErrorCode::kProtocol, "a compressed chunk decompressed to " + std::to_string(produced) +
                                           " bytes (expected " + std::to_string(expected) + ") or had trailing bytes"};
  return produced;
}

bool compression_built() { return true; }

}  // namespace wcomm
