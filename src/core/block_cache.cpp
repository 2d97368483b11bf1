// BlockCache: reuse of large aligned blocks across messages (see block_cache.h).
#include "core/block_cache.h"

#include <cstdlib>
#include <new>

#include "wcomm/tensor.h"

namespace wcomm {

BlockCache& BlockCache::instance() {
  static BlockCache* cache = [] {
    std::size_t capacity = 256u << 20;
    if (const char* env = std::getenv("WCOMM_BLOCK_CACHE_BYTES")) capacity = std::strtoull(env, nullptr, 10);
    return new BlockCache(capacity);  // never destroyed: buffers may die after static teardown
  }();
  return *cache;
}

void* BlockCache::allocate_block(std::size_t size) { return ::operator new(size, std::align_val_t{kBufferAlignment}); }

void BlockCache::free_block(void* block) { ::operator delete(block, std::align_val_t{kBufferAlignment}); }

void* BlockCache::take(std::size_t size) {
  std::lock_guard lock(mutex_);
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) {
    if (it->size != size) continue;
    void* data = it->data;
    cached_bytes_ -= size;
    blocks_.erase(std::next(it).base());
    return data;
  }
  return nullptr;
}

void BlockCache::give(void* block, std::size_t size) {
  std::vector<void*> evicted;
  {
    std::lock_guard lock(mutex_);
    if (size > capacity_) {
      evicted.push_back(block);
    } else {
      while (!blocks_.empty() && (cached_bytes_ + size > capacity_ || blocks_.size() >= kMaxBlocks)) {
        evicted.push_back(blocks_.front().data);
        cached_bytes_ -= blocks_.front().size;
        blocks_.erase(blocks_.begin());
      }
      blocks_.push_back({block, size});
      cached_bytes_ += size;
    }
  }
  for (void* p : evicted) free_block(p);  // outside the lock: munmap can be slow
}

}  // namespace wcomm
