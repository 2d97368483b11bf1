// SharedRegion: a /dev/shm mapping of N blocks of B bytes that several processes map (one
// creator, any number of joiners) and an agent registers once; the owner hands out blocks.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "wcomm/errors.h"
#include "wcomm/xfer/types.h"

namespace wcomm::xfer {

class SharedRegion {
 public:
  // Creates /dev/shm/<name> (refused if it exists), sizes it, pre-faults its pages
  // (MADV_POPULATE_WRITE where the kernel has it, else by touching them) and marks it ready.
  // The creator removes the file when destroyed. Throws InvalidArgumentError for a bad name
  // or size, ConnectionFailedError (with errno's text) when the system refuses.
  static std::unique_ptr<SharedRegion> create(const std::string& name, std::size_t block_count, std::size_t block_bytes);
  // Maps an existing region, waiting up to timeout for the creator to make and size it
  // (OperationTimeoutError after that).
  static std::unique_ptr<SharedRegion> join(const std::string& name,
                                            std::chrono::duration<double> timeout = std::chrono::seconds(10));
  ~SharedRegion();
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  const std::string& name() const { return name_; }
  bool is_creator() const { return creator_; }
  std::size_t block_count() const { return block_count_; }
  std::size_t block_bytes() const { return block_bytes_; }
  std::uint8_t* data() const { return data_; }  // block i is at data() + i * block_bytes()
  std::size_t size() const { return block_count_ * block_bytes_; }
  std::uint8_t* block(std::uint32_t index) const;  // throws InvalidArgumentError when out of range

  // The block allocator belongs to this object (the one process that hands blocks out, as
  // the seed's scheduler does; it takes a lock, so threads may share it). n free blocks, or
  // an error naming how many are free when there are fewer.
  Result<std::vector<std::uint32_t>> alloc(std::size_t n);
  // Gives blocks back. Refused whole (nothing freed) for an index outside the region or a
  // block that is not allocated (a double free), naming the first such index.
  Status free(const std::vector<std::uint32_t>& indices);
  std::size_t free_blocks() const;

  // One descriptor per block, for posts and requests.
  DescList descs(const std::vector<std::uint32_t>& indices) const;

 private:
  SharedRegion() = default;
  std::string name_;
  bool creator_ = false;
  std::size_t block_count_ = 0, block_bytes_ = 0;
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  std::uint8_t* data_ = nullptr;
  struct Allocator;
  std::unique_ptr<Allocator> alloc_;
};

}  // namespace wcomm::xfer
