// The encoder-cache consumer: allocates blocks, sends requests, turns acks into ready items,
// and frees the blocks of any request that is refused, times out or loses its producer.
#include <map>
#include <mutex>

#include "transfer/cache_messages.h"
#include "transfer/tag_listener.h"
#include "wcomm/comm.h"
#include "wcomm/xfer/cache_service.h"

namespace wcomm::xfer {

namespace {
using Clock = std::chrono::steady_clock;

struct Entry {
  std::uint64_t request_id = 0;
  std::string producer;
  std::vector<std::uint32_t> blocks;
  Readiness readiness = Readiness::kInFlight;
  std::string reason;
  std::uint64_t bytes = 0;
  Clock::time_point deadline;
};
}  // namespace

const char* readiness_name(Readiness r) {
  switch (r) {
    case Readiness::kUnknown: return "unknown";
    case Readiness::kInFlight: return "in_flight";
    case Readiness::kReady: return "ready";
    case Readiness::kFailed: return "failed";
  }
  return "?";
}

struct CacheConsumer::Impl : std::enable_shared_from_this<CacheConsumer::Impl> {
  CacheConsumerConfig config;
  std::string hash;
  std::unique_ptr<Agent> agent;
  std::mutex mu;
  bool closed = false;
  std::map<std::string, Entry> entries;
  std::uint64_t next_request_id = 1;
  std::shared_ptr<TagListener> listener;  // acks from every peer
  std::uint64_t watch = 0;                 // the Comm's peer events: a producer that went down

  // Under mu. Frees the blocks and records why; probe() reports it once.
  void fail(Entry& e, std::string why) {
    if (e.readiness != Readiness::kInFlight) return;
    (void)config.region->free(e.blocks);
    e.blocks.clear();
    e.readiness = Readiness::kFailed;
    e.reason = std::move(why);
  }


  void on_ack(const std::string& node, const Value& v) {
    std::string why;
    std::optional<CacheAck> ack = ack_from(v, why);
    if (!ack) return;  // nothing to match it to; a well-formed ack for the request may follow
    std::lock_guard lock(mu);
    auto it = entries.find(ack->key);
    // An ack for a request we gave up on (timed out, retried) is stale: ignore it.
    if (it == entries.end() || it->second.request_id != ack->request_id || it->second.producer != node ||
        it->second.readiness != Readiness::kInFlight)
      return;
    Entry& e = it->second;
    if (ack->ok) {
      e.readiness = Readiness::kReady;
      e.bytes = ack->bytes;
    } else {
      fail(e, "producer '" + node + "' refused: " + ack->reason);
    }
  }

  void on_peer_event(const PeerEvent& ev) {
    if (ev.kind != PeerEvent::Kind::kDown && ev.kind != PeerEvent::Kind::kRestarted) return;
    std::lock_guard lock(mu);
    for (auto& [key, e] : entries)
      if (e.producer == ev.node_id)
        fail(e, "producer '" + ev.node_id + "' went down before acknowledging (" + peer_event_name(ev.kind) +
                    (ev.reason.empty() ? "" : ": " + ev.reason) + ")");
  }
};

std::unique_ptr<CacheConsumer> CacheConsumer::create(CacheConsumerConfig config) {
  if (!config.comm) throw InvalidArgumentError("CacheConsumerConfig.comm is not set (the control channel)");
  if (!config.region) throw InvalidArgumentError("CacheConsumerConfig.region is not set");
  if (config.region->block_bytes() != config.compat.block_bytes)
    throw InvalidArgumentError("CacheConsumerConfig: compat.block_bytes " + std::to_string(config.compat.block_bytes) +
                               " differs from the region's block size " + std::to_string(config.region->block_bytes()));
  auto impl = std::make_shared<Impl>();
  config.agent.comm = config.comm;
  impl->hash = compat_hash(config.compat);
  impl->agent = Agent::create(config.agent);
  if (Status s = impl->agent->register_memory(config.region->data(), config.region->size()); !s) throw_error(s.error());
  impl->config = std::move(config);
  std::weak_ptr<Impl> weak = impl;
  impl->watch = impl->config.comm->watch_peer_events([weak](const PeerEvent& ev) {
    if (auto self = weak.lock()) self->on_peer_event(ev);
  });
  std::weak_ptr<Impl> listening = impl;
  impl->listener = TagListener::start(impl->config.comm, kCacheAckTag, [listening](const std::string& node, const Value& v) {
    if (auto self = listening.lock()) self->on_ack(node, v);
  });
  return std::unique_ptr<CacheConsumer>(new CacheConsumer(std::move(impl)));
}

CacheConsumer::~CacheConsumer() { close(); }

Status CacheConsumer::request(const std::string& key, const std::string& producer_node, std::uint64_t bytes) {
  Impl& s = *impl_;
  const Peer* peer = nullptr;
  try {
    peer = &s.config.comm->peer(producer_node);
  } catch (const std::out_of_range&) {
    return Error{ErrorCode::kInvalidArgument, "request('" + key + "'): producer '" + producer_node + "' is not a peer of the Comm"};
  }
  if (bytes == 0) return Error{ErrorCode::kInvalidArgument, "request('" + key + "'): the item size is 0"};
  const std::uint64_t b = s.config.region->block_bytes();
  CacheRequest r;
  {
    std::lock_guard lock(s.mu);
    if (s.closed) return Error{ErrorCode::kClosed, "the consumer is closed"};
    auto it = s.entries.find(key);
    if (it != s.entries.end() && it->second.readiness != Readiness::kFailed)
      return Error{ErrorCode::kInvalidArgument, "request('" + key + "'): already " + readiness_name(it->second.readiness)};
    Result<std::vector<std::uint32_t>> blocks = s.config.region->alloc((bytes + b - 1) / b);
    if (!blocks) return blocks.error();
    Entry e;
    e.request_id = s.next_request_id++;
    e.producer = producer_node;
    e.blocks = std::move(blocks).value();
    e.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(s.config.request_timeout);
    r.request_id = e.request_id;
    r.key = key;
    r.blocks = s.config.region->descs(e.blocks);
    r.version = s.config.compat.version;
    r.compat_hash = s.hash;
    r.timeout_s = s.config.request_timeout.count();
    s.entries[key] = std::move(e);
  }
  r.agent_metadata = s.agent->metadata();
  std::weak_ptr<Impl> weak = impl_;
  s.config.comm->send(to_value(r), *peer, {}, {.tag = kCacheRequestTag})
      .then([weak, key, id = r.request_id](Result<SendResult> sent) {
        auto self = weak.lock();
        if (!self || sent) return;
        std::lock_guard lock(self->mu);
        auto it = self->entries.find(key);
        if (it != self->entries.end() && it->second.request_id == id)
          self->fail(it->second, "the request could not be sent: " + sent.error().message);
      });
  return Ok{};
}

ItemStatus CacheConsumer::probe(const std::string& key) {
  Impl& s = *impl_;
  std::lock_guard lock(s.mu);
  auto it = s.entries.find(key);
  if (it == s.entries.end()) return {};
  Entry& e = it->second;
  if (e.readiness == Readiness::kInFlight && Clock::now() >= e.deadline)
    s.fail(e, "timed out after " + std::to_string(s.config.request_timeout.count()) + " s waiting for producer '" + e.producer + "'");
  ItemStatus out{e.readiness, e.reason, e.blocks, e.bytes};
  if (e.readiness == Readiness::kFailed) s.entries.erase(it);
  return out;
}

Result<ItemStatus> CacheConsumer::take(const std::string& key) {
  Impl& s = *impl_;
  std::lock_guard lock(s.mu);
  auto it = s.entries.find(key);
  if (it == s.entries.end() || it->second.readiness != Readiness::kReady)
    return Error{ErrorCode::kInvalidArgument, "take('" + key + "'): the item is not ready"};
  ItemStatus out{Readiness::kReady, "", std::move(it->second.blocks), it->second.bytes};
  s.entries.erase(it);
  return out;
}

SharedRegion& CacheConsumer::region() { return *impl_->config.region; }
Agent& CacheConsumer::agent() { return *impl_->agent; }

void CacheConsumer::close() {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->closed) return;
    impl_->closed = true;
  }
  impl_->config.comm->unwatch_peer_events(impl_->watch);
  impl_->listener->stop();
}

}  // namespace wcomm::xfer
