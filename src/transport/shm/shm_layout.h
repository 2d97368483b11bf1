// The shared memory of one shm connection: per direction a single-producer single-consumer
// ring of records, and the flags that let an idle side sleep on an eventfd while a busy one
// never makes a system call (docs/thread-model.md, "The shm transport").
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace wcomm::transport::shm {

constexpr std::uint64_t kMagic = 0x31764d4853636d77ull;  // "wcmSHMv1"
constexpr std::uint32_t kVersion = 2;  // 2: remote records are claimed (RingControl::remote_taken)
constexpr std::size_t kHeaderBytes = 4096;               // the rings start on the next page

// One direction. The producer alone writes head, producer_sleeping (its own) and closed; the
// consumer side writes tail and consumer_sleepers; both change remote_taken, by CAS. Sleeping follows Dekker:
// count yourself in, fence, look again; the other side publishes, fences, then reads the
// count and rings the eventfd only if someone sleeps. The data doorbell is level-triggered,
// like a socket: it stays readable until a reader finds the ring empty (data_rung says a
// ring may be pending), so two threads watching one connection never take each other's
// wake-up.
struct alignas(64) RingControl {
  alignas(64) std::atomic<std::uint64_t> head{0};  // bytes published
  alignas(64) std::atomic<std::uint64_t> tail{0};  // bytes the consumer is done with
  alignas(64) std::atomic<std::uint32_t> consumer_sleepers{0};
  std::atomic<std::uint32_t> data_rung{0};
  alignas(64) std::atomic<std::uint32_t> producer_sleeping{0};
  std::atomic<std::uint32_t> closed{0};         // no more records after head
  std::atomic<std::uint32_t> consumer_reads_producer{0};  // cross-memory attach works this way
  // Who had a remote record's bytes: the consumer, once it has copied one, claims it by
  // storing the ring position after it; the producer, when it gives up its memory, sets
  // kRemoteVoid. One word changed by CAS, so exactly one of them wins each record: a record
  // claimed first was delivered (the producer counts it handed over, and any later give-up
  // leaves it be); one voided first is not (the consumer drops what it copied, which may
  // have been read from memory already gone). Two flags read crosswise let both win.
  std::atomic<std::uint64_t> remote_taken{0};
};
constexpr std::uint64_t kRemoteVoid = 1ull << 63;

static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

struct SharedHeader {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t reserved;
  std::uint64_t ring_bytes;
  RingControl ring[2];  // [0]: dialer to acceptor, [1]: acceptor to dialer
};
static_assert(sizeof(SharedHeader) <= kHeaderBytes);

// A record: inline bytes follow its header in the ring; a remote record is followed by the
// address of `length` bytes in the producer's memory, which the consumer reads itself
// (process_vm_readv) straight into its destination.
enum class RecordKind : std::uint32_t { kInline = 1, kRemote = 2 };
struct RecordHeader {
  RecordKind kind;
  std::uint32_t reserved;
  std::uint64_t length;
};
constexpr std::size_t kRecordHeaderBytes = sizeof(RecordHeader);
constexpr std::size_t kRemoteRecordBytes = kRecordHeaderBytes + sizeof(std::uint64_t);

// Copies between a ring of `size` bytes (a power of two) and linear memory, wrapping.
inline void ring_copy_in(std::uint8_t* ring, std::uint64_t size, std::uint64_t pos, const void* src, std::size_t n) {
  const std::uint64_t at = pos & (size - 1);
  const std::size_t first = static_cast<std::size_t>(std::min<std::uint64_t>(n, size - at));
  std::memcpy(ring + at, src, first);
  if (first < n) std::memcpy(ring, static_cast<const std::uint8_t*>(src) + first, n - first);
}
inline void ring_copy_out(const std::uint8_t* ring, std::uint64_t size, std::uint64_t pos, void* dst, std::size_t n) {
  const std::uint64_t at = pos & (size - 1);
  const std::size_t first = static_cast<std::size_t>(std::min<std::uint64_t>(n, size - at));
  std::memcpy(dst, ring + at, first);
  if (first < n) std::memcpy(static_cast<std::uint8_t*>(dst) + first, ring, n - first);
}

}  // namespace wcomm::transport::shm
