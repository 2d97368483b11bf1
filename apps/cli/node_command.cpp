// `wcomm node`: the V0.1 node CLI. Sends, receives or echoes messages between the nodes of a
// YAML config; one line per message on stdout (V0.1's lines by default, wcomm's richer ones with
// --format wcomm), one line per failure on stderr.
//
// Exit status: 0 done (or a serve-forever --count 0 stopped by Ctrl-C / SIGTERM), 1 the network
// or the peer failed, 2 bad command line or config, 130 interrupted before the work was done.
// (python -m wireless_comm.node follows V0.1 instead: 1 for every failure, 0 on Ctrl-C.)
#include <pthread.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/payload.h"
#include "cli/v01_format.h"
#include "wcomm/comm.h"

namespace wcomm::tools {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitCommError = 1;  // the network or the peer failed us
constexpr int kExitUsage = 2;      // the command line or the config is wrong
constexpr int kExitInterrupted = 130;

struct SendArgs {
  std::string dst;
  std::string json, text, file, tensor_shape, tensor_dtype = "float32", metadata;
  std::uint32_t tag = 0;
  double timeout_s = 0;
  bool fail_fast = false;
  bool expect_reply = false;
};

struct ServeArgs {
  std::string src;
  std::uint32_t tag = 0;
  double timeout_s = 0;
  std::int64_t count = 1;  // 0: serve until SIGINT / SIGTERM
};

// What a line per message looks like: V0.1's ("received object=... piggypayload=...") so that
// scripts grepping them keep working, or wcomm's (tag, message_id, wire_bytes too).
enum class Format { kV01, kWcomm };

int fail(int code, const std::string& message) {
  std::cerr << "wcomm node: " << message << std::endl;
  return code;
}

// Takes SIGINT and SIGTERM for the whole process: they are blocked in every thread (threads
// inherit the mask, so this must exist before Comm::create starts the loop thread) and one
// watcher thread sigwait()s for them. On a signal it closes the Comm, which fails the pending
// send or recv with ClosedError and so wakes the main thread: no polling, and nothing runs
// inside a signal handler. Later signals (a second Ctrl-C) are taken and ignored, and the
// mask stays in place to the end of the process, so none can kill it while it writes its
// last lines.
class SignalWatcher {
 public:
  SignalWatcher() {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGINT);
    sigaddset(&signals_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
    thread_ = std::thread([this] { run(); });
  }
  ~SignalWatcher() {
    {
      std::lock_guard lock(mu_);
      finishing_ = true;
    }
    pthread_kill(thread_.native_handle(), SIGTERM);  // wakes sigwait
    thread_.join();
    // The mask is not restored: a signal still pending would then end the process with its
    // default action, and the process is about to exit anyway.
  }
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  // The Comm to close on a signal (also at once, if the signal came first).
  void watch(const std::shared_ptr<Comm>& comm) {
    std::unique_lock lock(mu_);
    comm_ = comm;
    if (!interrupted_) return;
    lock.unlock();
    comm->close();
  }
  bool interrupted() const {
    std::lock_guard lock(mu_);
    return interrupted_;
  }
  // Sleeps for d unless a signal comes first; true when interrupted.
  bool sleep_for(std::chrono::milliseconds d) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, d, [&] { return interrupted_; });
  }

 private:
  void run() {
    for (;;) {
      int signal = 0;
      sigwait(&signals_, &signal);
      std::shared_ptr<Comm> comm;
      {
        std::lock_guard lock(mu_);
        if (finishing_) return;
        if (interrupted_) continue;  // a second Ctrl-C: already stopping
        interrupted_ = true;
        comm = comm_.lock();
      }
      cv_.notify_all();
      if (comm) comm->close();
    }
  }

  sigset_t signals_{};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool interrupted_ = false;
  bool finishing_ = false;
  std::weak_ptr<Comm> comm_;
  std::thread thread_;
};

std::string known_peers(const NodeConfig& config) {
  std::string names;
  for (const auto& p : config.peers) names += (names.empty() ? "" : ", ") + p.node_id;
  return names.empty() ? "(none)" : names;
}

// Checks a peer name against the config before anything binds a socket, so a typo costs
// nothing and the message can list what the config does know.
void check_peer(const NodeConfig& config, const std::string& option, const std::string& node_id) {
  if (node_id == config.local.node_id)
    throw UsageError(option + ": '" + node_id + "' is this node itself; name a peer: " + known_peers(config));
  for (const auto& p : config.peers)
    if (p.node_id == node_id) return;
  throw UsageError(option + ": unknown peer '" + node_id + "'; " + config.local.node_id +
                   "'s config knows: " + known_peers(config));
}

std::string format_seconds(double s) {
  std::ostringstream out;
  out << s;
  return out.str();
}

// One line naming the operation, the peer and what to check.
// `connecting`: the operation may have failed for want of a connection (a send), so a hint
// about the peer's address helps.
int comm_failure(const std::string& what, const Peer& peer, const CommError& e, double timeout_s,
                 bool connecting = false) {
  std::string where = peer.node_id + " (" + peer.endpoints_text() + ")";
  switch (e.code()) {
    case ErrorCode::kOperationTimeout:  // e.what() would only repeat this
      return fail(kExitCommError, what + " " + where + " timed out after " + format_seconds(timeout_s) + " s" +
                                      (connecting ? " (is " + peer.node_id + " running and listening there?)" : ""));
    case ErrorCode::kConnectionFailed:
      return fail(kExitCommError, what + " " + where + " failed: cannot reach it (is it running?): " + e.what());
    default:
      return fail(kExitCommError, what + " " + where + " failed: " + error_code_name(e.code()) + ": " + e.what());
  }
}

CommOptions options_for(std::uint32_t tag, double timeout_s, bool wait_for_capacity = true) {
  CommOptions options{.tag = tag, .timeout = std::nullopt, .wait_for_capacity = wait_for_capacity};
  if (timeout_s > 0) options.timeout = Seconds(timeout_s);
  return options;
}

void print_received(Format format, const Peer& from, std::uint32_t tag, const Received& got) {
  if (format == Format::kV01)
    std::cout << "received object=" << describe_v01(got.value) << " piggypayload=" << describe_v01(got.piggypayload)
              << std::endl;
  else
    std::cout << "received from " << from.node_id << " tag=" << tag << " message_id=" << got.message_id
              << " wire_bytes=" << got.wire_bytes << " value=" << summarize(got.value)
              << " piggypayload=" << summarize(got.piggypayload) << std::endl;
}

// Exactly one payload option; the rest are usage errors caught before the Comm exists.
Value build_payload(const SendArgs& a, const CLI::App& send, const CommConfig& limits) {
  int given = 0;
  for (const char* name : {"--json", "--text", "--file", "--tensor-shape"}) given += send.count(name) > 0;
  if (given != 1)
    throw UsageError("send: give exactly one payload: --json, --text, --file or --tensor-shape");
  if (send.count("--tensor-dtype") && !send.count("--tensor-shape"))
    throw UsageError("--tensor-dtype: only meaningful with --tensor-shape");
  if (send.count("--json")) return parse_json_option("--json", a.json);
  if (send.count("--text")) return a.text;
  if (send.count("--file")) return read_file_bytes("--file", a.file);
  DType dtype = parse_dtype_option("--tensor-dtype", a.tensor_dtype);
  Shape shape = parse_shape("--tensor-shape", a.tensor_shape);
  // Checked before allocating: a typo such as 3,224,2240000 should be a message, not an
  // out-of-memory abort.
  auto nbytes = tensor_nbytes(dtype, shape);
  if (!nbytes || *nbytes > limits.max_message_bytes)
    throw UsageError("--tensor-shape: a " + std::string(dtype_name(dtype)) + " tensor of shape " + a.tensor_shape +
                     " is " + (nbytes ? std::to_string(*nbytes) + " bytes" : "too large") +
                     ", over this node's comm.max_message_bytes (" + std::to_string(limits.max_message_bytes) + ")");
  return arange_tensor(dtype, shape);
}

int run_send(Comm& comm, const SendArgs& a, Value payload, Value metadata, Format format, SignalWatcher& signals) {
  const Peer& dst = comm.peer(a.dst);
  std::string summary = format == Format::kV01
                            ? "object=" + describe_v01(payload) + " piggypayload=" + describe_v01(metadata)
                            : summarize(payload);
  try {
    SendResult sent = comm.send(std::move(payload), dst, std::move(metadata),
                                options_for(a.tag, a.timeout_s, !a.fail_fast)).get();
    if (format == Format::kV01)
      std::cout << "sent " << summary << std::endl;
    else
      std::cout << "sent message_id=" << sent.message_id << " wire_bytes=" << sent.wire_bytes << " tag=" << a.tag
                << " value=" << summary << std::endl;
  } catch (const CommError& e) {
    if (signals.interrupted()) return fail(kExitInterrupted, "interrupted");
    return comm_failure("send to", dst, e, a.timeout_s, /*connecting=*/true);
  }
  if (!a.expect_reply) return kExitOk;
  try {
    print_received(format, dst, a.tag, comm.recv(dst, options_for(a.tag, a.timeout_s)).get());
  } catch (const CommError& e) {
    if (signals.interrupted()) return fail(kExitInterrupted, "interrupted");
    return comm_failure("waiting for the reply from", dst, e, a.timeout_s);
  }
  return kExitOk;
}

// Receives (and for echo, returns) count messages from src; count 0 serves until a signal.
// A server outlives its peers: a peer that disconnects (or, with count 0, breaks the protocol
// or sends something undecodable) gets a note on stderr, and is served again when it
// reconnects.
int run_serve(Comm& comm, const ServeArgs& a, bool echo, Format format, SignalWatcher& signals) {
  const Peer& src = comm.peer(a.src);
  const bool forever = a.count == 0;
  const std::string kRecvFrom = "recv from";
  // Backoff between consecutive failures, so a peer whose every attempt fails at once does not
  // turn the server into a busy loop of notes.
  auto backoff = std::chrono::milliseconds(0);
  // Decides what a failure means: an exit code, or nullopt to keep serving.
  auto on_error = [&](const std::string& what, const CommError& e) -> std::optional<int> {
    // Stopped by a signal: a serve-forever server's normal end, else the work was cut short.
    auto interrupted = [&] { return forever ? kExitOk : fail(kExitInterrupted, "interrupted"); };
    if (signals.interrupted()) return interrupted();
    // Peers come and go: a disconnect is worth a note, never the end, even with a finite
    // --count (the next messages may come over the peer's next connection).
    const bool disconnected = e.code() == ErrorCode::kConnectionClosed;
    if (e.code() == ErrorCode::kClosed || (!forever && !disconnected)) return comm_failure(what, src, e, a.timeout_s);
    // A recv that times out while serving just means no message yet: keep waiting.
    if (e.code() == ErrorCode::kOperationTimeout && what == kRecvFrom) return std::nullopt;
    if (disconnected)
      std::cerr << "wcomm node: note: " << src.node_id << " disconnected (" << e.what() << "); still serving"
                << std::endl;
    else
      std::cerr << "wcomm node: note: " << what << " " << src.node_id << " failed: " << error_code_name(e.code())
                << ": " << e.what() << "; still serving" << std::endl;
    backoff = std::clamp(backoff * 2, std::chrono::milliseconds(50), std::chrono::milliseconds(1000));
    if (signals.sleep_for(backoff)) return interrupted();
    return std::nullopt;
  };

  for (std::int64_t done = 0; forever || done < a.count;) {
    Received got;
    try {
      got = comm.recv(src, options_for(a.tag, a.timeout_s)).get();
    } catch (const CommError& e) {
      if (auto code = on_error(kRecvFrom, e)) return *code;
      continue;
    }
    backoff = std::chrono::milliseconds(0);
    print_received(format, src, a.tag, got);
    ++done;
    if (!echo) continue;
    std::string echoed = format == Format::kV01 ? "echoed object=" + describe_v01(got.value) +
                                                      " piggypayload=" + describe_v01(got.piggypayload)
                                                : std::string();
    try {
      SendResult sent = comm.send(std::move(got.value), src, std::move(got.piggypayload),
                                  options_for(a.tag, a.timeout_s)).get();
      if (format == Format::kV01)
        std::cout << echoed << std::endl;
      else
        std::cout << "echoed to " << src.node_id << " tag=" << a.tag << " message_id=" << sent.message_id
                  << " wire_bytes=" << sent.wire_bytes << std::endl;
    } catch (const CommError& e) {
      if (auto code = on_error("echo to", e)) return *code;
    }
  }
  return kExitOk;
}

// CLI11's PositiveNumber prints its range up to DBL_MAX in full; this says what is meant.
const CLI::Validator kSeconds(
    [](const std::string& text) -> std::string {
      double s = 0;
      std::istringstream in(text);
      if (in >> s && in.eof() && s > 0) return {};
      return "'" + text + "' is not a positive number of seconds";
    },
    "SECONDS");

void add_serve_options(CLI::App* command, ServeArgs& a) {
  command->add_option("--src", a.src, "the peer to receive from")->required();
  command->add_option("--tag", a.tag, "message tag (default 0)");
  command->add_option("--timeout", a.timeout_s, "seconds to wait for each message")->check(kSeconds);
  command->add_option("--count", a.count, "messages to handle (default 1; 0: serve until Ctrl-C)")
      ->check(CLI::Validator(
          [](const std::string& text) -> std::string {
            std::int64_t n = -1;
            auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
            if (ec == std::errc() && end == text.data() + text.size() && n >= 0) return {};
            return "--count: '" + text + "' is not a count; give 0 (serve until Ctrl-C) or a positive number";
          },
          "COUNT"));
}

int node_main(int argc, char** argv) {
  CLI::App app{"Run a wcomm node from a YAML config: send, receive or echo messages.\n\n"
               "  wcomm node --config node-b.yaml echo --src node-a --tag 1 --count 1\n"
               "  wcomm node --config node-a.yaml send --dst node-b --tag 1 --json '{\"message\":\"hello\"}' \\\n"
               "      --metadata '{\"trace_id\":\"wifi-test-1\"}' --expect-reply\n",
               "wcomm node"};
  // V0.1 takes --config before the sub-command; fallthrough lets it come after it too.
  app.fallthrough();
  app.require_subcommand(1);
  std::string config_path;
  app.add_option("--config", config_path, "the node's YAML config (local, peers, comm)")->required();
  std::string format_name = "v0.1";
  app.add_option("--format", format_name,
                 "output lines: v0.1 (default; 'received object=... piggypayload=...', as V0.1 prints) "
                 "or wcomm (one line with tag, message_id and wire_bytes)")
      ->check(CLI::IsMember({"v0.1", "wcomm"}));

  SendArgs send_args;
  CLI::App* send = app.add_subcommand("send", "send one message to a peer");
  send->add_option("--dst", send_args.dst, "the peer to send to")->required();
  send->add_option("--json", send_args.json, "payload: a JSON document (objects become dicts)");
  send->add_option("--text", send_args.text, "payload: a string");
  send->add_option("--file", send_args.file, "payload: the bytes of a file");
  send->add_option("--tensor-shape", send_args.tensor_shape,
                   "payload: torch.arange(numel) in this shape, e.g. 3,224,224");
  send->add_option("--tensor-dtype", send_args.tensor_dtype,
                   "the tensor's dtype (default float32; torch's names such as half or long too)");
  send->add_option("--metadata", send_args.metadata, "piggypayload: a JSON object");
  send->add_option("--tag", send_args.tag, "message tag (default 0)");
  send->add_option("--timeout", send_args.timeout_s, "seconds to wait for the send (and the reply)")
      ->check(kSeconds);
  send->add_flag("--fail-fast", send_args.fail_fast, "fail at once when the peer's send queue is full");
  send->add_flag("--expect-reply", send_args.expect_reply, "then wait for one message back on the same tag");

  ServeArgs serve_args;
  CLI::App* recv = app.add_subcommand("recv", "receive messages from a peer and print them");
  add_serve_options(recv, serve_args);
  CLI::App* echo = app.add_subcommand("echo", "send every message from a peer back to it");
  add_serve_options(echo, serve_args);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    return fail(kExitUsage, std::string(e.what()) + " (see wcomm node --help)");
  }

  NodeConfig config;
  try {
    config = load_node_config(config_path);
  } catch (const std::exception& e) {
    return fail(kExitUsage, std::string("--config: ") + e.what());
  }

  Value payload, metadata;
  try {
    if (send->parsed()) {
      check_peer(config, "--dst", send_args.dst);
      payload = build_payload(send_args, *send, config.comm);
      if (send->count("--metadata")) metadata = parse_json_object_option("--metadata", send_args.metadata);
    } else {
      check_peer(config, "--src", serve_args.src);
    }
  } catch (const UsageError& e) {
    return fail(kExitUsage, e.what());
  }

  // A peer that vanishes mid-write must not kill a server with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  SignalWatcher signals;
  std::shared_ptr<Comm> comm;
  try {
    comm = Comm::create(config);
  } catch (const InvalidArgumentError& e) {
    return fail(kExitUsage, std::string("--config: ") + e.what());
  } catch (const CommError& e) {
    return fail(kExitCommError, "cannot start " + config.local.node_id + ": " + e.what());
  }
  signals.watch(comm);

  const Format format = format_name == "wcomm" ? Format::kWcomm : Format::kV01;
  int code = send->parsed() ? run_send(*comm, send_args, std::move(payload), std::move(metadata), format, signals)
                            : run_serve(*comm, serve_args, echo->parsed(), format, signals);
  comm->close();
  return code;
}

}  // namespace

int run_node(int argc, char** argv) {
  // Every expected failure is reported where it happens; this is the net under the rest
  // (e.g. std::bad_alloc), so the user still gets one line rather than an abort.
  try {
    return node_main(argc, argv);
  } catch (const std::exception& e) {
    return fail(kExitCommError, std::string("unexpected error: ") + e.what());
  }
}

}  // namespace wcomm::tools
