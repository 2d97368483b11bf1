// SharedRegion: a header page (magic, sizes, a ready word the creator sets last and wakes
// joiners on with a futex) followed by the blocks; plus the owner's block allocator.
#include "wcomm/xfer/shared_region.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels answer EINVAL and we touch pages
#endif

namespace wcomm::xfer {

namespace {

constexpr std::uint64_t kMagic = 0x31'4e'4f'49'47'45'52'57ull;  // "WREGION1"
constexpr std::size_t kHeaderBytes = 4096;

struct Header {
  std::uint64_t magic;
  std::uint64_t block_count;
  std::uint64_t block_bytes;
  std::uint32_t ready;  // 0 until the creator has sized and pre-faulted the region
};

std::atomic_ref<std::uint32_t> ready_word(Header* h) { return std::atomic_ref<std::uint32_t>(h->ready); }

std::string shm_path(const std::string& name) { return "/" + name; }

[[noreturn]] void fail_sys(const std::string& what) { throw ConnectionFailedError(what + ": " + std::strerror(errno)); }

void check_name(const std::string& name) {
  if (name.empty() || name.size() > 200 || name.find('/') != std::string::npos)
    throw InvalidArgumentError("shared region name '" + name + "' must be 1-200 characters without '/'");
}

}  // namespace

struct SharedRegion::Allocator {
  mutable std::mutex mu;
  std::vector<bool> used;
  std::vector<std::uint32_t> free_list;  // a stack: recently freed blocks (warm) go out first
};

std::unique_ptr<SharedRegion> SharedRegion::create(const std::string& name, std::size_t block_count, std::size_t block_bytes) {
  check_name(name);
  if (block_count == 0 || block_bytes == 0 || block_count > UINT32_MAX)
    throw InvalidArgumentError("shared region '" + name + "': need 1 to 2^32-1 blocks of at least one byte (got " +
                               std::to_string(block_count) + " x " + std::to_string(block_bytes) + ")");
  if (block_bytes > (SIZE_MAX - kHeaderBytes) / block_count)
    throw InvalidArgumentError("shared region '" + name + "': " + std::to_string(block_count) + " x " +
                               std::to_string(block_bytes) + " bytes overflows");
  const int fd = ::shm_open(shm_path(name).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) fail_sys("shared region '" + name + "': shm_open");
  std::unique_ptr<SharedRegion> r(new SharedRegion());
  r->name_ = name;
  r->creator_ = true;
  r->block_count_ = block_count;
  r->block_bytes_ = block_bytes;
  r->map_bytes_ = kHeaderBytes + block_count * block_bytes;
  if (::ftruncate(fd, static_cast<off_t>(r->map_bytes_)) != 0) {
    const int err = errno;
    ::close(fd);
    ::shm_unlink(shm_path(name).c_str());
    errno = err;
    fail_sys("shared region '" + name + "': ftruncate to " + std::to_string(r->map_bytes_) + " bytes");
  }
  r->map_ = ::mmap(nullptr, r->map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (r->map_ == MAP_FAILED) {
    r->map_ = nullptr;
    ::shm_unlink(shm_path(name).c_str());
    fail_sys("shared region '" + name + "': mmap");
  }
  r->data_ = static_cast<std::uint8_t*>(r->map_) + kHeaderBytes;
  // Pre-fault now so the first transfer into a block does not pay for page faults.
  if (::madvise(r->data_, block_count * block_bytes, MADV_POPULATE_WRITE) != 0) {
    const long page = ::sysconf(_SC_PAGESIZE);
    for (std::size_t off = 0; off < block_count * block_bytes; off += static_cast<std::size_t>(page))
      r->data_[off] = 0;
  }
  auto* h = static_cast<Header*>(r->map_);
  h->magic = kMagic;
  h->block_count = block_count;
  h->block_bytes = block_bytes;
  ready_word(h).store(1, std::memory_order_release);
  ::syscall(SYS_futex, &h->ready, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
  r->alloc_ = std::make_unique<Allocator>();
  r->alloc_->used.assign(block_count, false);
  for (std::size_t i = block_count; i-- > 0;) r->alloc_->free_list.push_back(static_cast<std::uint32_t>(i));
  return r;
}

std::unique_ptr<SharedRegion> SharedRegion::join(const std::string& name, std::chrono::duration<double> timeout) {
  check_name(name);
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout);
  auto timed_out = [&](const std::string& what) {
    throw OperationTimeoutError("shared region '" + name + "': " + what + " within " + std::to_string(timeout.count()) + " s");
  };
  int fd = -1;
  struct stat st {};
  // The file may not exist yet, or exist but not be sized: both are a creator still at work.
  for (;;) {
    fd = ::shm_open(shm_path(name).c_str(), O_RDWR, 0);
    if (fd >= 0 && ::fstat(fd, &st) == 0 && static_cast<std::size_t>(st.st_size) >= kHeaderBytes) break;
    if (fd < 0 && errno != ENOENT) fail_sys("shared region '" + name + "': shm_open");
    if (fd >= 0) ::close(fd);
    if (Clock::now() >= deadline) timed_out("no creator made it");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::unique_ptr<SharedRegion> r(new SharedRegion());
  r->name_ = name;
  r->map_bytes_ = static_cast<std::size_t>(st.st_size);
  r->map_ = ::mmap(nullptr, r->map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (r->map_ == MAP_FAILED) {
    r->map_ = nullptr;
    fail_sys("shared region '" + name + "': mmap");
  }
  auto* h = static_cast<Header*>(r->map_);
  while (ready_word(h).load(std::memory_order_acquire) == 0) {
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) timed_out("the creator did not finish setting it up");
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    ::syscall(SYS_futex, &h->ready, FUTEX_WAIT, 0, &ts, nullptr, 0);
  }
  if (h->magic != kMagic) throw InvalidArgumentError("shared region '" + name + "' is not a wcomm shared region");
  r->block_count_ = h->block_count;
  r->block_bytes_ = h->block_bytes;
  if (kHeaderBytes + r->block_count_ * r->block_bytes_ > r->map_bytes_)
    throw InvalidArgumentError("shared region '" + name + "' is smaller than its header says");
  r->data_ = static_cast<std::uint8_t*>(r->map_) + kHeaderBytes;
  r->alloc_ = std::make_unique<Allocator>();
  r->alloc_->used.assign(r->block_count_, false);
  for (std::size_t i = r->block_count_; i-- > 0;) r->alloc_->free_list.push_back(static_cast<std::uint32_t>(i));
  return r;
}

SharedRegion::~SharedRegion() {
  if (map_) ::munmap(map_, map_bytes_);
  if (creator_) ::shm_unlink(shm_path(name_).c_str());
}

std::uint8_t* SharedRegion::block(std::uint32_t index) const {
  if (index >= block_count_)
    throw InvalidArgumentError("block " + std::to_string(index) + " is not in shared region '" + name_ + "' (it has " +
                               std::to_string(block_count_) + " blocks)");
  return data_ + static_cast<std::size_t>(index) * block_bytes_;
}

Result<std::vector<std::uint32_t>> SharedRegion::alloc(std::size_t n) {
  std::lock_guard lock(alloc_->mu);
  if (n == 0) return Error{ErrorCode::kInvalidArgument, "alloc(0): ask for at least one block"};
  if (n > alloc_->free_list.size())
    return Error{ErrorCode::kBackpressure, "shared region '" + name_ + "' is exhausted: " + std::to_string(n) +
                                               " blocks asked for, " + std::to_string(alloc_->free_list.size()) + " of " +
                                               std::to_string(block_count_) + " free"};
  std::vector<std::uint32_t> out(alloc_->free_list.end() - static_cast<std::ptrdiff_t>(n), alloc_->free_list.end());
  alloc_->free_list.resize(alloc_->free_list.size() - n);
  for (std::uint32_t i : out) alloc_->used[i] = true;
  return out;
}

Status SharedRegion::free(const std::vector<std::uint32_t>& indices) {
  std::lock_guard lock(alloc_->mu);
  std::vector<bool> seen(block_count_, false);
  for (std::uint32_t i : indices) {
    if (i >= block_count_)
      return Error{ErrorCode::kInvalidArgument, "free: block " + std::to_string(i) + " is not in shared region '" + name_ +
                                                    "' (it has " + std::to_string(block_count_) + " blocks; nothing was freed)"};
    if (!alloc_->used[i] || seen[i])
      return Error{ErrorCode::kInvalidArgument, "free: block " + std::to_string(i) + " of shared region '" + name_ +
                                                    "' is not allocated (a double free?; nothing was freed)"};
    seen[i] = true;
  }
  for (std::uint32_t i : indices) {
    alloc_->used[i] = false;
    alloc_->free_list.push_back(i);
  }
  return Ok{};
}

std::size_t SharedRegion::free_blocks() const {
  std::lock_guard lock(alloc_->mu);
  return alloc_->free_list.size();
}

DescList SharedRegion::descs(const std::vector<std::uint32_t>& indices) const {
  DescList out;
  out.reserve(indices.size());
  for (std::uint32_t i : indices) out.push_back({reinterpret_cast<std::uint64_t>(block(i)), block_bytes_, 0});
  return out;
}

}  // namespace wcomm::xfer
