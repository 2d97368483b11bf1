// FaultProxy: a loopback TCP proxy for tests that breaks connections on demand (delays,
// bandwidth caps, resets, black holes, stalls, silent accepts, refused connects).
//
// It listens on 127.0.0.1 (an ephemeral port unless one is given) and forwards every
// accepted connection to a target address. Point a node's peer entry at port() instead of
// the real node and every byte between them goes through the proxy. One thread of its own
// runs a poll() loop over every socket; the methods below are thread-safe and return once
// that thread has applied them (each bounded: they throw std::runtime_error after 5 s).
//
// Directions: kToTarget is what the connecting side (the client) sends to the target,
// kToClient is the target's answer. The faults:
//
//   set_delay(dir, ms)          every chunk read in dir is held for ms before it is written
//                               on (order is kept; chunks already queued keep their time).
//   set_bandwidth(dir, B/s)     a token bucket shared by all connections caps dir at B bytes
//                               per second (burst: 1/20 s of the rate, 1 KiB to 64 KiB);
//                               0 lifts the cap.
//   reset()                     every open connection is reset now: both of its sockets are
//                               closed with SO_LINGER 0, so each side gets an RST.
//   reset_after(dir, k)         the same, once k more bytes have been forwarded in dir (over
//                               all connections, counted from this call); nothing more is
//                               written in dir meanwhile, and the reset waits (up to 200 ms)
//                               for those k bytes to leave the proxy's socket, so the
//                               receiver reads them before the RST: a reset mid-frame.
//   set_black_hole(dir, on)     connections stay open but everything in dir, including what
//                               is already queued, is read and dropped: a silent peer.
//   set_stall(dir, on)          the proxy stops reading the sending side of dir, so its
//                               kernel buffers fill and TCP pushes back on the sender.
//   set_never_answer(on)        connections accepted from now on are never forwarded: the
//                               proxy accepts, connects nowhere, sends nothing and drops what
//                               it receives (existing connections are not affected).
//   set_target(port)            connections accepted from now on go to 127.0.0.1:port (or
//                               the host given at construction): a node restarted elsewhere.
//   refuse() / reopen()         closes the listening socket, so connecting is refused (the
//                               open connections live on); reopen() listens again on the
//                               same port.
//   counters()                  bytes forwarded and dropped each way, connections accepted,
//                               active, reset.
//
// A target that refuses or fails the proxy's connect makes the proxy reset the client's
// connection. A clean close (FIN) on one side is passed on once what was queued is written;
// a reset or error on one side resets the other. The destructor stops the thread and closes
// every socket; see docs/testing.md for examples.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace wcomm::testing {

enum class Direction { kToTarget = 0, kToClient = 1 };

struct FaultProxyCounters {
  std::uint64_t bytes_to_target = 0;    // forwarded client -> target
  std::uint64_t bytes_to_client = 0;    // forwarded target -> client
  std::uint64_t dropped_to_target = 0;  // read from the client and dropped (black hole, silent)
  std::uint64_t dropped_to_client = 0;
  std::uint64_t connections_accepted = 0;
  std::uint64_t connections_active = 0;  // accepted and not yet closed
  std::uint64_t connections_reset = 0;   // closed with an RST by reset(), reset_after() or an error

  std::uint64_t forwarded(Direction d) const { return d == Direction::kToTarget ? bytes_to_target : bytes_to_client; }
};

class FaultProxy {
 public:
  // Listens on 127.0.0.1:listen_port (0: a free one, free_port.h) and forwards to target_host:target_port
  // (an IPv4 address). Throws std::runtime_error if it cannot listen.
  explicit FaultProxy(std::uint16_t target_port, std::string target_host = "127.0.0.1",
                      std::uint16_t listen_port = 0);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  std::uint16_t port() const { return port_; }

  void set_delay(Direction direction, std::chrono::milliseconds delay);
  void set_bandwidth(Direction direction, std::uint64_t bytes_per_second);
  void reset();
  void reset_after(Direction direction, std::uint64_t bytes);
  void set_black_hole(Direction direction, bool on);
  void set_stall(Direction direction, bool on);
  void set_never_answer(bool on);
  void set_target(std::uint16_t target_port);
  void refuse();
  void reopen();  // throws std::runtime_error if the port cannot be bound again

  // Lifts every fault: no delay, cap, black hole, stall, silence or pending reset_after;
  // listens again if refused.
  void heal();

  // The counters as of now: everything the proxy did before the call is counted.
  FaultProxyCounters counters();
  // Waits until pred(counters()) holds; false if it did not within timeout.
  bool wait_until(const std::function<bool(const FaultProxyCounters&)>& pred, std::chrono::milliseconds timeout) const;

  struct Settings;  // what the test thread asks for (fault_proxy.cpp)
  struct Loop;      // the proxy thread's own state (fault_proxy.cpp)

 private:
  // Changes the settings under the lock, wakes the loop and waits until it has applied them.
  void apply(const std::function<void(Settings&)>& change);

  std::uint16_t port_ = 0;
  int wake_fd_ = -1;  // eventfd: the test thread wakes the loop
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;  // settings applied, or counters moved
  Settings* settings_ = nullptr;             // guarded by mutex_
  FaultProxyCounters counters_;              // guarded by mutex_
  Loop* loop_ = nullptr;                     // touched only by thread_ (and by the ctor / dtor around it)
  std::thread thread_;
};

}  // namespace wcomm::testing
