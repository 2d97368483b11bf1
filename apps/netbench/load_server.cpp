// The plain-TCP load server of latency under load (responder side).
#include "netbench/load_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <exception>

#include <nlohmann/json.hpp>

namespace wcomm::bench {

LoadServer::LoadServer(const std::string& host, std::uint16_t port) : listener_(listen_tcp(host, port)) {
  acceptor_ = std::thread([this] { accept_loop(); });
}

LoadServer::~LoadServer() { stop(); }

void LoadServer::stop() {
  if (stopping_.exchange(true)) return;
  if (acceptor_.joinable()) acceptor_.join();
  {
    std::lock_guard lock(mutex_);
    for (int fd : connections_) ::shutdown(fd, SHUT_RDWR);
  }
  for (auto& t : threads_) t.join();
}

void LoadServer::accept_loop() {
  while (!stopping_.load()) {
    pollfd p{listener_.fd(), POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard lock(mutex_);
    connections_.push_back(fd);
    threads_.emplace_back([this, fd] { serve(fd); });
  }
}

void LoadServer::serve(int fd) {
  Socket owned(fd);
  try {
    const nlohmann::json request = nlohmann::json::parse(read_line(fd));
    const std::string direction = request.at("direction").get<std::string>();
    const double duration = request.at("duration_s").get<double>();
    const double mbps = request.at("target_mbps").get<double>();
    write_all(fd, "READY\n");
    if (read_line(fd) != "GO") return;
    if (direction == "download") {
      paced_send(fd, mbps, duration, stopping_);
      ::shutdown(fd, SHUT_WR);
      drain(fd, stopping_);
    } else if (direction == "bidirectional") {
      std::thread sender([&] {
        paced_send(fd, mbps, duration, stopping_);
        ::shutdown(fd, SHUT_WR);
      });
      drain(fd, stopping_);
      sender.join();
    } else {
      drain(fd, stopping_);
    }
  } catch (const std::exception&) {
    // A malformed or broken load connection ends only itself.
  }
  std::lock_guard lock(mutex_);
  std::erase(connections_, fd);
  owned.release();
  ::close(fd);
}

}  // namespace wcomm::bench
