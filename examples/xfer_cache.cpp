// xfer_cache: the encoder-cache service with two processes. Run it with no arguments: it
// starts itself again as the producer, then acts as the consumer: it sets aside blocks of a
// /dev/shm region, asks for an item before it is published (the producer parks the request),
// the producer publishes and writes the bytes straight into the consumer's blocks, and the
// consumer checks them.
//
//   cmake --build build --target xfer_cache && ./build/examples/xfer_cache [cma|ucx|tcp|auto]
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <wcomm/comm.h>
#include <wcomm/xfer/cache_service.h>

using namespace std::chrono_literals;
using namespace wcomm;
using namespace wcomm::xfer;

extern char** environ;

// Two distinct loopback ports that were free a moment ago: both are bound at once (one at a
// time, the kernel may hand out the same port twice).
static std::pair<std::uint16_t, std::uint16_t> free_ports() {
  int fds[2];
  std::uint16_t ports[2];
  for (int i = 0; i < 2; ++i) {
    fds[i] = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    ::bind(fds[i], reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::getsockname(fds[i], reinterpret_cast<sockaddr*>(&addr), &len);
    ports[i] = ntohs(addr.sin_port);
  }
  for (int fd : fds) ::close(fd);
  return {ports[0], ports[1]};
}

// Both sides must agree on these, or the producer refuses (the compatibility hash).
static CacheCompat compat() { return {.model_id = "vision-encoder-7b", .dtype = "bfloat16", .block_bytes = 64 << 10}; }

static std::vector<std::uint8_t> item_bytes() {
  std::vector<std::uint8_t> v(1'000'000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint8_t>(i * 31 + 7);
  return v;
}

static int producer(std::uint16_t port, std::uint16_t consumer_port, BackendKind backend) {
  // The control channel is a Comm whose peers are the consumers.
  auto comm = Comm::create({.local = {"producer", "127.0.0.1", port}, .peers = {{"consumer", "127.0.0.1", consumer_port}}});
  auto p = CacheProducer::create({.comm = comm, .compat = compat(), .agent = {.name = "producer", .backend = backend}});
  // Wait for the consumer's "publish now" message, so the request is parked first.
  comm->recv(comm->peer("consumer"), {.tag = 1, .timeout = 30s}).get();
  // The request travels on another tag and is handled on the producer's own thread: give it
  // a moment to be parked (bounded), just so this example shows the park-then-serve path.
  for (int i = 0; i < 5000 && p->parked_requests() == 0; ++i) std::this_thread::sleep_for(1ms);
  std::printf("producer: %zu request(s) parked; publishing 'image-0'\n", p->parked_requests());
  const auto item = item_bytes();
  p->publish("image-0", item.data(), item.size());
  comm->recv(comm->peer("consumer"), {.tag = 1, .timeout = 30s}).get();  // "done"
  p->close();
  comm->close();
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 5 && std::strcmp(argv[1], "producer") == 0)
    return producer(static_cast<std::uint16_t>(std::stoi(argv[2])), static_cast<std::uint16_t>(std::stoi(argv[3])),
                    parse_backend(argv[4]));
  const std::string backend = argc > 1 ? argv[1] : "auto";
  const auto [pport, cport] = free_ports();

  // The producer process.
  std::vector<std::string> args{"/proc/self/exe", "producer", std::to_string(pport), std::to_string(cport), backend};
  std::vector<char*> argp;
  for (auto& a : args) argp.push_back(a.data());
  argp.push_back(nullptr);
  pid_t child = 0;
  if (posix_spawn(&child, "/proc/self/exe", nullptr, nullptr, argp.data(), environ) != 0) return 1;

  // The consumer: a region of 32 blocks of 64 KiB, registered with its agent once.
  auto comm = Comm::create({.local = {"consumer", "127.0.0.1", cport}, .peers = {{"producer", "127.0.0.1", pport}}});
  auto region = std::shared_ptr<SharedRegion>(SharedRegion::create("xfer-cache-example-" + std::to_string(::getpid()), 32, 64 << 10));
  auto consumer = CacheConsumer::create({.comm = comm, .compat = compat(),
                                         .agent = {.name = "consumer", .backend = parse_backend(backend)},
                                         .region = region, .request_timeout = 20s});
  const auto expected = item_bytes();
  Status asked = consumer->request("image-0", "producer", expected.size());
  if (!asked) {
    std::fprintf(stderr, "request failed: %s\n", asked.error().message.c_str());
    return 1;
  }
  std::printf("consumer: requested 'image-0' (%zu bytes) -> %s\n", expected.size(), readiness_name(consumer->probe("image-0").readiness));
  comm->send(Dict{{"go", true}}, comm->peer("producer"), {}, {.tag = 1}).get();

  ItemStatus s;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while ((s = consumer->probe("image-0")).readiness == Readiness::kInFlight && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(200us);
  if (s.readiness != Readiness::kReady) {
    std::fprintf(stderr, "consumer: %s: %s\n", readiness_name(s.readiness), s.reason.c_str());
    return 1;
  }
  ItemStatus item = consumer->take("image-0").value();
  bool same = true;
  for (std::size_t i = 0, off = 0; i < item.blocks.size(); ++i, off += region->block_bytes()) {
    const std::size_t n = std::min<std::size_t>(region->block_bytes(), item.bytes - off);
    same &= std::memcmp(region->block(item.blocks[i]), expected.data() + off, n) == 0;
  }
  std::printf("consumer: 'image-0' is ready in %zu blocks, bytes %s\n", item.blocks.size(), same ? "match" : "DIFFER");
  (void)region->free(item.blocks);
  comm->send(Dict{{"done", true}}, comm->peer("producer"), {}, {.tag = 1}).get();
  int status = 0;
  ::waitpid(child, &status, 0);
  consumer->close();
  comm->close();
  return same && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
