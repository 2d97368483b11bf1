// RendezvousSpec validation and its construction from launcher environments (torchrun, Slurm,
// Open MPI).
#include <cstdlib>
#include <functional>
#include <set>

#include "wcomm/collectives/rendezvous.h"
#include "wcomm/errors.h"

extern char** environ;

namespace wcomm {
namespace {

using Env = std::map<std::string, std::string>;

const std::string* get(const Env& env, const std::string& key) {
  auto it = env.find(key);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

long parse_int(const Env& env, const std::string& key, const std::string& launcher) {
  const std::string* v = get(env, key);
  if (!v) throw InvalidArgumentError(launcher + " environment: " + key + " is not set");
  try {
    std::size_t used = 0;
    long n = std::stol(*v, &used);
    if (used != v->size()) throw std::invalid_argument(*v);
    return n;
  } catch (const std::exception&) {
    throw InvalidArgumentError(launcher + " environment: " + key + "='" + *v + "' is not an integer");
  }
}

std::uint16_t to_port(long port, const std::string& what) {
  if (port < 1 || port > 65535)
    throw InvalidArgumentError(what + ": port " + std::to_string(port) + " is outside 1..65535");
  return static_cast<std::uint16_t>(port);
}

// WCOMM_MASTER_ADDR / WCOMM_MASTER_PORT win over whatever the launcher says.
void apply_overrides(const Env& env, RendezvousSpec& spec) {
  if (const std::string* a = get(env, "WCOMM_MASTER_ADDR")) spec.master_addr = *a;
  if (get(env, "WCOMM_MASTER_PORT")) spec.master_port = to_port(parse_int(env, "WCOMM_MASTER_PORT", "wcomm"), "WCOMM_MASTER_PORT");
  if (const std::string* t = get(env, "WCOMM_RENDEZVOUS_TIMEOUT")) spec.timeout = std::chrono::duration<double>(std::stod(*t));
}

}  // namespace

void RendezvousSpec::validate() const {
  if (world < 1) throw InvalidArgumentError("rendezvous: the world size must be at least 1, not " + std::to_string(world));
  if (rank < 0 || rank >= world)
    throw InvalidArgumentError("rendezvous: rank " + std::to_string(rank) + " is outside the world (0.." +
                               std::to_string(world - 1) + ")");
  if (!(timeout.count() > 0)) throw InvalidArgumentError("rendezvous: the timeout must be positive");
  if (!peers.empty()) {
    if (peers.size() != static_cast<std::size_t>(world))
      throw InvalidArgumentError("rendezvous: the directory lists " + std::to_string(peers.size()) +
                                 " ranks for a world of " + std::to_string(world));
    std::set<std::pair<std::string, int>> seen;
    for (std::size_t k = 0; k < peers.size(); ++k) {
      if (peers[k].host.empty() || peers[k].port == 0)
        throw InvalidArgumentError("rendezvous: directory entry " + std::to_string(k) + " needs a host and a port");
      if (!seen.insert({peers[k].host, peers[k].port}).second)
        throw InvalidArgumentError("rendezvous: directory entry " + std::to_string(k) + " (" + peers[k].host + ":" +
                                   std::to_string(peers[k].port) + ") duplicates an earlier rank's address");
    }
    return;
  }
  if (world > 1 && (master_addr.empty() || master_port == 0))
    throw InvalidArgumentError("rendezvous: give either every rank's address or rank 0's (master_addr and master_port)");
}

std::string slurm_first_host(const std::string& nodelist) {
  // The first entry ends at a comma outside brackets.
  std::size_t depth = 0, end = nodelist.size();
  for (std::size_t i = 0; i < nodelist.size(); ++i) {
    if (nodelist[i] == '[') ++depth;
    else if (nodelist[i] == ']') --depth;
    else if (nodelist[i] == ',' && depth == 0) { end = i; break; }
  }
  std::string first = nodelist.substr(0, end);
  std::size_t open = first.find('[');
  if (open == std::string::npos) return first;
  std::string prefix = first.substr(0, open);
  std::string range = first.substr(open + 1, first.find(']') - open - 1);
  std::string lo = range.substr(0, range.find_first_of(",-"));
  return prefix + lo + first.substr(first.find(']') + 1);
}

RendezvousSpec rendezvous_from_env(const Env& env) {
  RendezvousSpec spec;
  if (get(env, "RANK") && get(env, "WORLD_SIZE")) {
    spec.source = "torchrun";
    spec.rank = static_cast<int>(parse_int(env, "RANK", "torchrun"));
    spec.world = static_cast<int>(parse_int(env, "WORLD_SIZE", "torchrun"));
    const std::string* addr = get(env, "MASTER_ADDR");
    if (!addr && !get(env, "WCOMM_MASTER_ADDR")) throw InvalidArgumentError("torchrun environment: MASTER_ADDR is not set");
    if (addr) spec.master_addr = *addr;
    if (get(env, "MASTER_PORT"))
      spec.master_port = to_port(parse_int(env, "MASTER_PORT", "torchrun") + 1, "MASTER_PORT + 1");
  } else if (get(env, "OMPI_COMM_WORLD_RANK")) {
    spec.source = "openmpi";
    spec.rank = static_cast<int>(parse_int(env, "OMPI_COMM_WORLD_RANK", "Open MPI"));
    spec.world = static_cast<int>(parse_int(env, "OMPI_COMM_WORLD_SIZE", "Open MPI"));
    if (const std::string* a = get(env, "MASTER_ADDR")) spec.master_addr = *a;
    else if (get(env, "OMPI_COMM_WORLD_LOCAL_SIZE") &&
             parse_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", "Open MPI") == spec.world)
      spec.master_addr = "127.0.0.1";
    if (get(env, "MASTER_PORT")) {
      spec.master_port = to_port(parse_int(env, "MASTER_PORT", "Open MPI"), "MASTER_PORT");
    } else if (const std::string* job = get(env, "OMPI_MCA_ess_base_jobid")) {
      spec.master_port = static_cast<std::uint16_t>(20000 + std::hash<std::string>{}(*job) % 20000);
    }
  } else if (get(env, "SLURM_PROCID")) {
    spec.source = "slurm";
    spec.rank = static_cast<int>(parse_int(env, "SLURM_PROCID", "Slurm"));
    spec.world = static_cast<int>(parse_int(env, "SLURM_NTASKS", "Slurm"));
    if (const std::string* a = get(env, "MASTER_ADDR")) spec.master_addr = *a;
    else if (const std::string* nodes = get(env, "SLURM_JOB_NODELIST")) spec.master_addr = slurm_first_host(*nodes);
    else if (const std::string* launch = get(env, "SLURM_LAUNCH_NODE_IPADDR")) spec.master_addr = *launch;
    if (get(env, "MASTER_PORT")) spec.master_port = to_port(parse_int(env, "MASTER_PORT", "Slurm"), "MASTER_PORT");
    else if (get(env, "SLURM_JOB_ID")) spec.master_port = static_cast<std::uint16_t>(29400 + parse_int(env, "SLURM_JOB_ID", "Slurm") % 1000);
    else spec.master_port = 29400;
  } else {
    throw InvalidArgumentError(
        "no launcher environment found: set RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (torchrun), or run under "
        "Slurm (SLURM_PROCID, SLURM_NTASKS) or Open MPI's mpirun (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE)");
  }
  apply_overrides(env, spec);
  if (spec.world > 1 && spec.master_addr.empty())
    throw InvalidArgumentError(spec.source + " environment: no address for rank 0: set MASTER_ADDR (or WCOMM_MASTER_ADDR)");
  if (spec.world > 1 && spec.master_port == 0)
    throw InvalidArgumentError(spec.source + " environment: no rendezvous port: set MASTER_PORT (or WCOMM_MASTER_PORT)");
  return spec;  // Group::create validates (after telling rank 0, so that every rank hears of a bad rank)
}

RendezvousSpec rendezvous_from_env() {
  Env env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    std::size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return rendezvous_from_env(env);
}

}  // namespace wcomm
