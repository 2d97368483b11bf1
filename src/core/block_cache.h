// A small cache of large, recently freed aligned blocks: a stream of same-sized tensors or
// byte strings reuses memory whose pages are already mapped, instead of paying page faults
// and kernel page zeroing for every message (which halves goodput at 1 MiB and up).
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

namespace wcomm {

class BlockCache {
 public:
  // Blocks below this size come from the allocator's own free lists; no need to cache.
  static constexpr std::size_t kMinBlockBytes = 256u << 10;

  // The process-wide cache. Its capacity is WCOMM_BLOCK_CACHE_BYTES (default 256 MiB; 0 turns
  // caching off), holding at most kMaxBlocks blocks.
  static BlockCache& instance();

  // A cached block of exactly `size` bytes, or nullptr.
  void* take(std::size_t size);
  // Keeps the block for reuse (evicting the oldest when full) or frees it.
  void give(void* block, std::size_t size);

  static void* allocate_block(std::size_t size);
  static void free_block(void* block, std::size_t size);  // size: as allocated

 private:
  explicit BlockCache(std::size_t capacity) : capacity_(capacity) {}
  static constexpr std::size_t kMaxBlocks = 8;
  struct Block {
    void* data;
    std::size_t size;
  };
  std::mutex mutex_;
  std::vector<Block> blocks_;  // oldest first
  std::size_t cached_bytes_ = 0;
  const std::size_t capacity_;
};

}  // namespace wcomm
