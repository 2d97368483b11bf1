// Two processes, each with a Comm, connected over the transport named on the command line
// ("tcp" on loopback, "unix": a socket file in /tmp, or "shm": shared-memory rings set up over
// such a socket). The parent is the listening side;
// the child dials it once the parent listens. "tls": tcp with CommConfig::tls, the
// certificates of nodes echo and ping from $WCOMM_BENCH_TLS_DIR (scripts/make-test-certs.sh).
// For the Comm API benchmarks.
#pragma once

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>

#include "bench_common.h"
#include "wcomm/comm.h"

namespace wcomm::bench_programs {

inline int run_comm_pair_configs(const std::string& transport, const CommConfig& config, const CommConfig& dialer_config,
                                 const std::function<void(Comm&, const Peer&)>& listener,
                                 const std::function<void(Comm&, const Peer&)>& dialer);

// WCOMM_BENCH_PIN=1: the parent (and the threads it starts) on CPU 0, the child on CPU 1, so
// that the scheduler's placement does not make the figures bimodal.
inline void pin_to_cpu(int cpu) {
  const char* pin = std::getenv("WCOMM_BENCH_PIN");
  if (!pin || std::string(pin) != "1") return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) die("WCOMM_BENCH_PIN: cannot pin to CPU " + std::to_string(cpu));
}

// Runs listener(comm, peer) in the parent and dialer(comm, peer) in a forked child; returns
// the child's exit status (the dialer measures and prints).
inline int run_comm_pair(const std::string& transport, const CommConfig& config,
                         const std::function<void(Comm&, const Peer&)>& listener,
                         const std::function<void(Comm&, const Peer&)>& dialer) {
  if (transport == "tls") {
    const char* dir = std::getenv("WCOMM_BENCH_TLS_DIR");
    if (!dir || !*dir) die("transport tls needs WCOMM_BENCH_TLS_DIR (scripts/make-test-certs.sh DIR echo ping)");
    const auto with_tls = [&](const std::string& node) {
      CommConfig c = config;
      c.tls = {std::string(dir) + "/" + node + ".pem", std::string(dir) + "/" + node + ".key", std::string(dir) + "/ca.pem"};
      return c;
    };
    return run_comm_pair_configs("tcp", with_tls("echo"), with_tls("ping"), listener, dialer);
  }
  return run_comm_pair_configs(transport, config, config, listener, dialer);
}

inline int run_comm_pair_configs(const std::string& transport, const CommConfig& config, const CommConfig& dialer_config,
                                 const std::function<void(Comm&, const Peer&)>& listener,
                                 const std::function<void(Comm&, const Peer&)>& dialer) {
  if (transport != "tcp" && transport != "unix" && transport != "shm")
    die("transport must be tcp, unix, shm or tls, got " + transport);
  const std::string path = "/tmp/wcomm-bench-" + std::to_string(getpid()) + ".sock";
  auto address = [&](std::uint16_t port) {
    return transport == "tcp" ? Address::tcp("127.0.0.1", port) : Address::parse(transport + "://" + path);
  };
  int port_pipe[2];
  if (pipe(port_pipe) != 0) die("pipe failed");
  // Fork before any Comm exists: a Comm owns a thread, which a fork would not carry over.
  const pid_t child = fork();
  pin_to_cpu(child != 0 ? 0 : 1);
  if (child != 0) {
    // The child's directory entry is never dialed, so its address is a placeholder.
    auto comm = Comm::create(CommSpec{{"echo", "", 0, {address(0)}}, {{"ping", "", 0, {address(1)}}}, "", config});
    write_port(port_pipe[1], comm->port());
    listener(*comm, comm->peer("ping"));
    int status = 0;
    waitpid(child, &status, 0);
    comm->close();
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }
  const std::uint16_t port = read_port(port_pipe[0]);
  const Address dial = address(port);
  const Address self =
      transport == "tcp" ? Address::tcp("127.0.0.1", 0) : Address::parse(transport + "://" + path + ".child");
  auto comm = Comm::create(CommSpec{{"ping", "", 0, {self}}, {{"echo", "", 0, {dial}}}, "", dialer_config});
  dialer(*comm, comm->peer("echo"));
  comm->close();
  std::exit(0);
}

}  // namespace wcomm::bench_programs
