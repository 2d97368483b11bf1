// Background load connections of the initiator (latency under load).
#include "netbench/load_client.h"

#include <sys/socket.h>

#include <nlohmann/json.hpp>

#include "netbench/clock.h"

namespace wcomm::bench {

LoadClient::LoadClient(const std::string& host, std::uint16_t port, const std::string& direction, std::size_t streams,
                       double per_stream_mbps, double duration_s, std::chrono::milliseconds timeout)
    : per_stream_mbps_(per_stream_mbps), duration_s_(duration_s) {
  // Bidirectional load is `streams` upload plus `streams` download connections, each one way,
  // as V0.1 ran it: its load server knows only those two directions.
  std::vector<std::string> directions;
  if (direction == "bidirectional") {
    directions.assign(streams, "upload");
    directions.insert(directions.end(), streams, "download");
  } else {
    directions.assign(streams, direction);
  }
  for (const std::string& one_way : directions) {
    const std::string request =
        nlohmann::json{{"direction", one_way}, {"duration_s", duration_s}, {"target_mbps", per_stream_mbps}}.dump() +
        "\n";
    auto stream = std::make_unique<Stream>();
    stream->direction = one_way;
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
  if (stream.direction == "upload") {
    stream.sent = paced_send(fd, per_stream_mbps_, duration_s_, stop_);
    ::shutdown(fd, SHUT_WR);
    drain(fd, stop_);  // the server closes once it has read everything
  } else {
    stream.received = drain(fd, stop_);
    ::shutdown(fd, SHUT_WR);
  }
}

LoadResult LoadClient::wait() {
  LoadResult result;
  for (auto& s : streams_) {
    if (s->thread.joinable()) s->thread.join();
    result.bytes_sent += s->sent;
    result.bytes_received += s->received;
  }
  result.connections = streams_.size();
  result.elapsed_s = seconds_between(started_, BenchClock::now());
  return result;
}

}  // namespace wcomm::bench
