// The encoder-cache producer: receives requests on the control Comm, checks compatibility,
// writes published items into the consumer's blocks with its Agent (or parks the request
// until the item is published) and acknowledges each request once.
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "transfer/cache_messages.h"
#include "transfer/tag_listener.h"
#include "wcomm/comm.h"
#include "wcomm/xfer/cache_service.h"

namespace wcomm::xfer {

namespace {
using Clock = std::chrono::steady_clock;

// A published item in memory the agent has registered; deregistered when the last transfer
// that reads it is over.
struct Item {
  Agent* agent = nullptr;
  std::uint8_t* data = nullptr;
  std::size_t size = 0;
  ~Item() {
    if (agent && data) (void)agent->deregister(data, size);
    std::free(data);
  }
};

struct Incoming {
  std::string node;
  CacheRequest request;
  Clock::time_point deadline;
};

struct InFlight {
  Incoming in;
  std::shared_ptr<Item> item;
  XferHandle handle;
};
}  // namespace

struct CacheProducer::Impl : std::enable_shared_from_this<CacheProducer::Impl> {
  CacheProducerConfig config;
  std::string hash;
  std::unique_ptr<Agent> agent;

  mutable std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::deque<Incoming> queue;                              // to look at
  std::map<std::string, std::vector<Incoming>> parked;     // waiting for publish
  std::map<std::string, std::shared_ptr<Item>> items;
  std::vector<InFlight> in_flight;                         // service thread only
  std::shared_ptr<TagListener> listener;  // requests from every peer
  std::thread thread;


  void on_message(const std::string& node, const Value& v) {
    std::string why;
    std::optional<CacheRequest> r = request_from(v, why);
    if (!r) {
      send_ack(node, {.request_id = 0, .key = "", .ok = false, .reason = "malformed request: " + why});
      return;
    }
    const double t = r->timeout_s > 0 ? r->timeout_s : config.transfer_timeout.count();
    Incoming in{node, std::move(*r), Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t))};
    {
      std::lock_guard lock(mu);
      queue.push_back(std::move(in));
    }
    cv.notify_one();
  }

  void send_ack(const std::string& node, const CacheAck& ack) {
    // Fire and forget: a consumer that is gone has nobody to tell; its own timeout covers it.
    (void)config.comm->send(to_value(ack), config.comm->peer(node), {}, {.tag = kCacheAckTag});
  }

  void refuse(const Incoming& in, std::string reason) {
    send_ack(in.node, {.request_id = in.request.request_id, .key = in.request.key, .ok = false, .reason = std::move(reason)});
  }

  // Service thread: checks a request and starts its transfer, parks it, or refuses it.
  void look_at(Incoming in) {
    const CacheRequest& r = in.request;
    if (r.version != config.compat.version)
      return refuse(in, "connector version mismatch: the consumer runs '" + r.version + "', this producer '" + config.compat.version + "'");
    if (r.compat_hash != hash)
      return refuse(in, "compatibility hash mismatch: the consumer sent " + r.compat_hash + ", this producer has " + hash +
                            " (version, model id, dtype or block size differ)");
    std::shared_ptr<Item> item;
    {
      std::lock_guard lock(mu);
      auto it = items.find(r.key);
      if (it == items.end()) {
        parked[r.key].push_back(std::move(in));
        return;
      }
      item = it->second;
    }
    Result<std::string> remote = agent->add_remote(r.agent_metadata);
    if (!remote) return refuse(in, "the consumer's agent metadata was refused: " + remote.error().message);
    // The item fills the blocks in order; the last one may be partly used.
    DescList local, far;
    std::uint64_t off = 0;
    for (const Desc& b : r.blocks) {
      if (off == item->size) break;
      const std::uint64_t take = std::min<std::uint64_t>(b.len, item->size - off);
      local.push_back({reinterpret_cast<std::uint64_t>(item->data) + off, take, 0});
      far.push_back({b.addr, take, b.dev_id});
      off += take;
    }
    if (off < item->size)
      return refuse(in, "item '" + r.key + "' is " + std::to_string(item->size) + " bytes but the request's blocks hold only " +
                            std::to_string(off));
    const auto left = std::chrono::duration<double>(in.deadline - Clock::now());
    if (left.count() <= 0) return refuse(in, "the request expired before it could be served");
    Result<XferHandle> h = agent->post(Op::kWrite, local, remote.value(), far, {.timeout = std::min(left, config.transfer_timeout)});
    if (!h) return refuse(in, "the transfer could not start: " + h.error().message);
    if (config.after_post) config.after_post(r.key);
    in_flight.push_back({std::move(in), std::move(item), h.value()});
  }

  void check_in_flight() {
    for (auto it = in_flight.begin(); it != in_flight.end();) {
      const XferStatus s = agent->poll(it->handle);
      if (s.state == XferState::kPending) {
        ++it;
        continue;
      }
      (void)agent->release(it->handle);
      const CacheRequest& r = it->in.request;
      if (s.state == XferState::kDone) {
        if (config.before_ack) config.before_ack(r.key);
        send_ack(it->in.node, {.request_id = r.request_id, .key = r.key, .ok = true, .reason = "", .bytes = it->item->size});
      } else {
        refuse(it->in, "the transfer failed: " + s.reason);
      }
      it = in_flight.erase(it);
    }
  }

  void run() {
    std::unique_lock lock(mu);
    while (!stopping) {
      if (in_flight.empty()) cv.wait(lock, [&] { return stopping || !queue.empty(); });
      else cv.wait_for(lock, std::chrono::microseconds(100), [&] { return stopping || !queue.empty(); });
      if (stopping) break;
      std::deque<Incoming> todo = std::move(queue);
      queue.clear();
      // Parked requests past their deadline are dropped: their consumer has given up.
      const auto now = Clock::now();
      for (auto& [key, list] : parked) std::erase_if(list, [&](const Incoming& in) { return in.deadline <= now; });
      std::erase_if(parked, [](const auto& kv) { return kv.second.empty(); });
      lock.unlock();
      for (Incoming& in : todo) look_at(std::move(in));
      check_in_flight();
      lock.lock();
    }
  }
};

std::unique_ptr<CacheProducer> CacheProducer::create(CacheProducerConfig config) {
  if (!config.comm) throw InvalidArgumentError("CacheProducerConfig.comm is not set (the control channel)");
  auto impl = std::make_shared<Impl>();
  config.agent.comm = config.comm;
  impl->hash = compat_hash(config.compat);
  impl->agent = Agent::create(config.agent);
  impl->config = std::move(config);
  std::weak_ptr<Impl> listening = impl;
  impl->listener = TagListener::start(impl->config.comm, kCacheRequestTag, [listening](const std::string& node, const Value& v) {
    if (auto self = listening.lock()) self->on_message(node, v);
  });
  impl->thread = std::thread([raw = impl.get()] { raw->run(); });
  return std::unique_ptr<CacheProducer>(new CacheProducer(std::move(impl)));
}

CacheProducer::~CacheProducer() { close(); }

void CacheProducer::publish(const std::string& key, const void* data, std::size_t size) {
  if (size == 0) throw InvalidArgumentError("publish('" + key + "'): an item needs at least one byte");
  auto item = std::make_shared<Item>();
  item->data = static_cast<std::uint8_t*>(std::aligned_alloc(4096, (size + 4095) / 4096 * 4096));
  if (!item->data) throw std::bad_alloc();
  std::memcpy(item->data, data, size);
  item->size = size;
  if (Status s = impl_->agent->register_memory(item->data, size); !s) throw_error(s.error());
  item->agent = impl_->agent.get();
  {
    std::lock_guard lock(impl_->mu);
    impl_->items[key] = std::move(item);
    // Requests that came before the item are served now, in the order they came.
    auto it = impl_->parked.find(key);
    if (it != impl_->parked.end()) {
      for (Incoming& in : it->second) impl_->queue.push_back(std::move(in));
      impl_->parked.erase(it);
    }
  }
  impl_->cv.notify_one();
}

std::size_t CacheProducer::parked_requests() const {
  std::lock_guard lock(impl_->mu);
  std::size_t n = 0;
  for (const auto& [key, list] : impl_->parked) n += list.size();
  return n;
}

Agent& CacheProducer::agent() { return *impl_->agent; }

void CacheProducer::close() {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopping) return;
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  impl_->listener->stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  for (InFlight& f : impl_->in_flight) (void)impl_->agent->release(f.handle);
  impl_->in_flight.clear();
  impl_->items.clear();
}

}  // namespace wcomm::xfer
