// Rendezvous: how the ranks of a Group find each other. Either every rank is given the whole
// directory, or every rank knows rank 0's address: ranks then register with rank 0 (a small
// TCP exchange), receive every rank's address, and connect directly. The spec can also be read
// from the environment torchrun, Slurm or Open MPI's mpirun give each process.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "wcomm/config.h"

namespace wcomm {

struct RendezvousSpec {
  int rank = -1;
  int world = 0;
  // Explicit directory: world entries, entry k is where rank k listens (host and port).
  // When given, master_addr is not used.
  std::vector<Peer> peers = {};
  // Otherwise: rank 0's rendezvous address. Rank 0 listens there during the rendezvous.
  std::string master_addr = {};
  std::uint16_t master_port = 0;
  // The address this rank's Comm listens on ("": all interfaces) and advertises ("": the
  // local address of the connection to rank 0, i.e. the interface that routes there).
  std::string bind_host = {};
  std::string advertise_host = {};
  std::chrono::duration<double> timeout = std::chrono::seconds(120);  // the whole rendezvous
  // Off by default: Comm's own `auto` transport already reaches a peer on the same host
  // through shared memory. When set (or WCOMM_SAME_HOST=unix), ranks that rank 0 finds on one
  // host (same boot id and network namespace) also listen on, and dial each other first at, an
  // abstract Unix socket (unix://@wcomm-<nonce>-<rank>), TCP behind it.
  bool same_host_unix = false;
  CommConfig comm = {};
  std::string source = "explicit";  // where the spec came from ("torchrun", "slurm", "openmpi")

  // Throws InvalidArgumentError naming what is wrong (world < 1, rank outside the world,
  // duplicate directory entries, no master address).
  void validate() const;
};

// The spec from environment variables (WCOMM_MASTER_ADDR / WCOMM_MASTER_PORT override the
// launcher's):
// - torchrun: RANK, WORLD_SIZE, MASTER_ADDR, and MASTER_PORT + 1 (MASTER_PORT itself is left to
//   torch.distributed's store);
// - Slurm: SLURM_PROCID, SLURM_NTASKS, the first host of SLURM_JOB_NODELIST (else
//   SLURM_LAUNCH_NODE_IPADDR), port MASTER_PORT or 29400 + SLURM_JOB_ID % 1000;
// - Open MPI: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, MASTER_ADDR or 127.0.0.1 when every
//   rank is on one node (OMPI_COMM_WORLD_LOCAL_SIZE == size), port MASTER_PORT or one derived
//   from the job id (OMPI_MCA_ess_base_jobid).
// Throws InvalidArgumentError saying which variables are missing or malformed.
RendezvousSpec rendezvous_from_env();
// The same, over a given environment (tests).
RendezvousSpec rendezvous_from_env(const std::map<std::string, std::string>& env);

// The first host of a Slurm node list ("node[03-05,9],gpu1" -> "node03").
std::string slurm_first_host(const std::string& nodelist);

// Runs the rendezvous: the directory of every rank (entry k: rank k's Comm address). Rank 0
// serves the exchange; a bad registration (rank outside the world, duplicate rank, different
// world size) fails every rank with an InvalidArgumentError saying which. `port` is the port
// this rank's Comm will listen on; its host is spec.advertise_host, or the local address of
// the connection to rank 0 (rank 0: master_addr).
std::vector<Peer> rendezvous_exchange(const RendezvousSpec& spec, std::uint16_t port);

}  // namespace wcomm
