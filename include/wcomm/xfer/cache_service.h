// The encoder-cache service (seed 003's producer / consumer): a consumer sets aside blocks of
// its shared region and asks a producer for an item by key; the producer writes the item
// straight into those blocks with its Agent and acknowledges on the control channel, a Comm.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "wcomm/errors.h"
#include "wcomm/xfer/agent.h"
#include "wcomm/xfer/shared_region.h"

namespace wcomm {
class Comm;
}

namespace wcomm::xfer {

inline constexpr const char* kConnectorVersion = "wcomm-ec/1";
inline constexpr std::uint32_t kCacheRequestTag = kFirstReservedTag + 16;
inline constexpr std::uint32_t kCacheAckTag = kFirstReservedTag + 17;

// What producer and consumer must agree on, or the bytes mean different things.
struct CacheCompat {
  std::string version = kConnectorVersion;
  std::string model_id;
  std::string dtype;
  std::uint64_t block_bytes = 0;
};
// Hex SHA-256 (OpenSSL libcrypto) over version, model id, dtype and block size, each field
// length-prefixed so no two field lists hash alike.
std::string compat_hash(const CacheCompat& compat);

struct CacheProducerConfig {
  // The control channel. Its peers are the consumers: those it lists, and any that join it
  // (CommConfig::accept_unknown_peers, with the cluster key or TLS) to ask for items.
  std::shared_ptr<Comm> comm;
  CacheCompat compat;
  AgentConfig agent;           // agent.comm is set to comm
  std::chrono::duration<double> transfer_timeout = std::chrono::seconds(30);
  // Test hooks, on the service thread: after an item's write is posted (its bytes may still be
  // moving), and after its bytes are written, before its ack.
  std::function<void(const std::string& key)> after_post = {};
  std::function<void(const std::string& key)> before_ack = {};
};

// Serves requests on its own thread. Thread-safe.
class CacheProducer {
 public:
  static std::unique_ptr<CacheProducer> create(CacheProducerConfig config);
  ~CacheProducer();
  // Copies the item into memory the agent has registered and serves every request parked on
  // the key. Publishing a key again replaces the item for later requests.
  void publish(const std::string& key, const void* data, std::size_t size);
  std::size_t parked_requests() const;
  Agent& agent();
  void close();

  struct Impl;
 private:
  explicit CacheProducer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

struct CacheConsumerConfig {
  std::shared_ptr<Comm> comm;              // the control channel; its peers include the producers
  CacheCompat compat;                      // block_bytes must equal the region's block size
  AgentConfig agent;                       // agent.comm is set to comm
  std::shared_ptr<SharedRegion> region;    // registered with the agent once, at create
  std::chrono::duration<double> request_timeout = std::chrono::seconds(30);
};

enum class Readiness { kUnknown, kInFlight, kReady, kFailed };
const char* readiness_name(Readiness r);  // "unknown", "in_flight", "ready", "failed"

struct ItemStatus {
  Readiness readiness = Readiness::kUnknown;
  std::string reason;                 // why it failed (kFailed)
  std::vector<std::uint32_t> blocks;  // where the item is (kInFlight, kReady)
  std::uint64_t bytes = 0;            // the item's size (kReady)
};

// Thread-safe. Acks are handled as they arrive (on the Comm's loop thread); timeouts are
// checked by probe(). The consumer watches the Comm's peer events (Comm::watch_peer_events),
// to fail at once the requests of a producer that went down.
class CacheConsumer {
 public:
  static std::unique_ptr<CacheConsumer> create(CacheConsumerConfig config);
  ~CacheConsumer();
  // Allocates enough blocks for `bytes` and sends the request. Errors: the key is already
  // requested, the region is exhausted, the producer is not a peer of the Comm.
  Status request(const std::string& key, const std::string& producer_node, std::uint64_t bytes);
  // ready / in flight / unknown (or failed, with why: refused, timed out, producer down,
  // transfer error). A failed request's blocks are already free; the failure is reported
  // once, then the key is unknown again.
  ItemStatus probe(const std::string& key);
  // Hands a ready item over: its blocks now belong to the caller (give them back with
  // region().free). InvalidArgument when the key is not ready.
  Result<ItemStatus> take(const std::string& key);
  SharedRegion& region();
  Agent& agent();
  void close();

  struct Impl;
 private:
  explicit CacheConsumer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

}  // namespace wcomm::xfer
