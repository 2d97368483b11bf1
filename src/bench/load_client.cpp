// Background load connections of the initiator (latency under load).
#include "bench/load_client.h"

#include <sys/socket.h>

#include <nlohmann/json.hpp>

#include "bench/clock.h"

namespace wcomm::bench {

LoadClient::LoadClient(const std::string& host, std::uint16_t port, const std::string& direction, std::size_t streams,
                       double per_stream_mbps, double duration_s, std::chrono::milliseconds timeout)
    : direction_(direction), per_stream_mbps_(per_stream_mbps), duration_s_(duration_s) {
  const std::string request =
      nlohmann::json{{"direction", direction}, {"duration_s", duration_s}, {"target_mbps", per_stream_mbps}}.dump() +
      "\n";
  for (std::size_t i = 0; i < streams; ++i) {
    auto stream = std::make_unique<Stream>();
    stream->socket = connect_tcp(host, port, timeout);
    write_all(stream->socket.fd(), request);
    const std::string reply = read_line(stream->socket.fd());
    if (reply != "READY")
      throw std::runtime_error("load traffic: the load server answered '" + reply + "', expected READY");
    streams_.push_back(std::move(stream));
  }
}

LoadClient::~LoadClient() {
  stop_ = true;
  for (auto& s : streams_) {
    if (s->socket) ::shutdown(s->socket.fd(), SHUT_RDWR);
    if (s->thread.joinable()) s->thread.join();
  }
}

void LoadClient::go() {
  for (auto& s : streams_) write_all(s->socket.fd(), "GO\n");
  started_ = BenchClock::now();
  for (auto& s : streams_) s->thread = std::thread([this, stream = s.get()] { run_stream(*stream); });
}

void LoadClient::run_stream(Stream& stream) {
  const int fd = stream.socket.fd();
  if (direction_ == "upload") {
    stream.sent = paced_send(fd, per_stream_mbps_, duration_s_, stop_);
    ::shutdown(fd, SHUT_WR);
    drain(fd, stop_);  // the server closes once it has read everything
  } else if (direction_ == "download") {
    stream.received = drain(fd, stop_);
    ::shutdown(fd, SHUT_WR);
  } else {
    std::thread sender([&] {
      stream.sent = paced_send(fd, per_stream_mbps_, duration_s_, stop_);
      ::shutdown(fd, SHUT_WR);
    });
    stream.received = drain(fd, stop_);
    sender.join();
  }
}

LoadResult LoadClient::wait() {
  LoadResult result;
  for (auto& s : streams_) {
    if (s->thread.joinable()) s->thread.join();
    result.bytes_sent += s->sent;
    result.bytes_received += s->received;
  }
  result.elapsed_s = seconds_between(started_, BenchClock::now());
  return result;
}

}  // namespace wcomm::bench
