// p2p_local: the first wcomm program to read. Two nodes in one process exchange a message (a
// dict holding a float32 tensor, plus piggypayload metadata) over loopback TCP, and reply.
//
//   cmake --build build --target p2p_local && ./build/examples/p2p_local
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <numeric>
#include <stdexcept>
#include <utility>
#include <vector>

#include <wcomm/comm.h>

using namespace std::chrono_literals;

// Every node is created knowing the whole peer directory, ports included, so both ports must
// be known before either node exists. Port 0 would give each node an ephemeral port, but only
// after creation, too late for the other node's directory. So we ask the kernel for two free
// ports up front (bind to port 0, read the port, release it). Real deployments use fixed ports
// from their YAML configs (see `wcomm node --help`).
static std::pair<std::uint16_t, std::uint16_t> two_free_loopback_ports() {
  int fds[2];
  std::uint16_t ports[2];
  for (int i = 0; i < 2; ++i) {  // both sockets stay bound until both ports are read: they differ
    fds[i] = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fds[i] < 0 || ::bind(fds[i], reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::getsockname(fds[i], reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      throw std::runtime_error("cannot find a free loopback port");
    ports[i] = ntohs(addr.sin_port);
  }
  ::close(fds[0]);
  ::close(fds[1]);
  return {ports[0], ports[1]};
}

int main() {
  auto [port_a, port_b] = two_free_loopback_ports();
  const wcomm::Peer a{"node-a", "127.0.0.1", port_a};
  const wcomm::Peer b{"node-b", "127.0.0.1", port_b};

  // Each node binds its port and starts its own event-loop thread. Connections are dialled on
  // first use and shared by both directions. (A YAML config works too:
  // Comm::create(wcomm::load_node_config("configs/local-node-a.yaml")).)
  auto node_a = wcomm::Comm::create(wcomm::CommSpec{.local = a, .peers = {b}});
  auto node_b = wcomm::Comm::create(wcomm::CommSpec{.local = b, .peers = {a}});

  // A 3x4 float32 tensor over our own memory. Tensor::borrow copies nothing, so `data` must stay
  // valid and unmodified until the send's Future is ready (we wait for it below).
  std::vector<float> data(12);
  std::iota(data.begin(), data.end(), 0.0f);
  wcomm::Value message = wcomm::Dict{
      {"name", "layer0.weight"},
      {"tensor", wcomm::Tensor::borrow(data.data(), wcomm::DType::kFloat32, {3, 4})},
  };
  // piggypayload: small metadata (string keys, primitives, lists, maps; 64 KiB by default) that
  // travels in the message's manifest. Large data belongs in the message itself.
  wcomm::Value piggy = wcomm::Dict{{"trace_id", "request-42"}};

  // Messages are matched by (peer, tag). Receiving first or sending first both work: a message
  // that arrives before its recv waits for it.
  wcomm::Future<wcomm::Received> incoming = node_b->recv(node_b->peer("node-a"), {.tag = 1, .timeout = 5s});
  wcomm::SendResult sent = node_a->send(message, node_a->peer("node-b"), piggy, {.tag = 1, .timeout = 5s}).get();
  std::printf("node-a sent message %llu: %llu bytes on the wire\n",
              static_cast<unsigned long long>(sent.message_id), static_cast<unsigned long long>(sent.wire_bytes));

  // get() waits and returns the value, or throws the typed error (here OperationTimeoutError
  // after 5 s). The received tensor owns fresh, 64-byte-aligned storage.
  wcomm::Received got = incoming.get();
  std::printf("node-b received %s with piggypayload %s\n", wcomm::summarize(got.value).c_str(),
              wcomm::summarize(got.piggypayload).c_str());
  const wcomm::Tensor& tensor = got.value.as<wcomm::Dict>().find("tensor")->as<wcomm::Tensor>();
  const float* values = tensor.data_as<float>();
  std::printf("  tensor[2][3] = %g (sent %g)\n", values[11], data[11]);

  // The connection is full duplex: node-b answers on it without dialling node-a.
  node_b->send(wcomm::Dict{{"ok", true}}, node_b->peer("node-a"), {}, {.tag = 1, .timeout = 5s}).get();
  wcomm::Received reply = node_a->recv(node_a->peer("node-b"), {.tag = 1, .timeout = 5s}).get();
  std::printf("node-a received reply %s\n", wcomm::summarize(reply.value).c_str());

  // close() sends CLOSE to connected peers and stops the loop thread (the destructor would too).
  node_a->close();
  node_b->close();
  return 0;
}
