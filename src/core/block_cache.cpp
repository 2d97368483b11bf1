// BlockCache: reuse of large aligned blocks across messages (see block_cache.h).
#include "core/block_cache.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>
#include <string_view>

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

namespace {
// Blocks of a huge page and more are aligned to one and advised for transparent huge pages:
// 512x fewer page faults on first touch, and cross-memory attach (the shm transport's large
// payloads) pins a huge page at a time instead of 512 small ones. WCOMM_HUGE_PAGES=0 turns the
// advice off (where the kernel's compaction for huge pages stalls more than it saves).
constexpr std::size_t kHugePageBytes = 2u << 20;
std::align_val_t block_alignment(std::size_t size) {
  return std::align_val_t{size >= kHugePageBytes ? kHugePageBytes : kBufferAlignment};
}
bool huge_pages_wanted() {
  static const bool wanted = [] {
    const char* env = std::getenv("WCOMM_HUGE_PAGES");
    return !env || std::string_view(env) != "0";
  }();
  return wanted;
}
}  // namespace

void* BlockCache::allocate_block(std::size_t size) {
  void* p = ::operator new(size, block_alignment(size));
  if (size >= kHugePageBytes && huge_pages_wanted())
    (void)::madvise(p, size & ~(kHugePageBytes - 1), MADV_HUGEPAGE);  // a hint: may be refused
  return p;
}

void BlockCache::free_block(void* block, std::size_t size) { ::operator delete(block, block_alignment(size)); }

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
  std::vector<Block> evicted;
  {
    std::lock_guard lock(mutex_);
    if (size > capacity_) {
      evicted.push_back({block, size});
    } else {
      while (!blocks_.empty() && (cached_bytes_ + size > capacity_ || blocks_.size() >= kMaxBlocks)) {
        evicted.push_back(blocks_.front());
        cached_bytes_ -= blocks_.front().size;
        blocks_.erase(blocks_.begin());
      }
      blocks_.push_back({block, size});
      cached_bytes_ += size;
    }
  }
  for (const Block& b : evicted) free_block(b.data, b.size);  // outside the lock: munmap can be slow
}

}  // namespace wcomm
