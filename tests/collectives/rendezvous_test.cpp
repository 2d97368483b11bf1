// Rendezvous specs from torchrun, Slurm and Open MPI environments, and their error messages.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "wcomm/collectives/rendezvous.h"
#include "wcomm/errors.h"

namespace wcomm {
namespace {

TEST(Rendezvous, Torchrun) {
  auto s = rendezvous_from_env({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "3"},
                                {"MASTER_ADDR", "192.0.2.1"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(s.source, "torchrun");
  EXPECT_EQ(s.rank, 3);
  EXPECT_EQ(s.world, 4);
  EXPECT_EQ(s.master_addr, "192.0.2.1");
  EXPECT_EQ(s.master_port, 29501);  // MASTER_PORT itself is torch.distributed's
}

TEST(Rendezvous, SlurmAndOverrides) {
  auto s = rendezvous_from_env({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "8"}, {"SLURM_JOB_NODELIST", "gpu[07-09,12],cpu1"},
                                {"SLURM_JOB_ID", "4242"}});
  EXPECT_EQ(s.source, "slurm");
  EXPECT_EQ(s.master_addr, "gpu07");
  EXPECT_EQ(s.master_port, 29400 + 242);
  s = rendezvous_from_env({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "8"}, {"SLURM_LAUNCH_NODE_IPADDR", "192.0.2.9"},
                           {"WCOMM_MASTER_PORT", "7000"}});
  EXPECT_EQ(s.master_addr, "192.0.2.9");
  EXPECT_EQ(s.master_port, 7000);
  EXPECT_EQ(slurm_first_host("node01"), "node01");
  EXPECT_EQ(slurm_first_host("a,b"), "a");
  EXPECT_EQ(slurm_first_host("rack[2-3]-n[1-4]"), "rack2-n[1-4]");
}

TEST(Rendezvous, OpenMpi) {
  auto s = rendezvous_from_env({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}, {"OMPI_MCA_ess_base_jobid", "123456"}});
  EXPECT_EQ(s.source, "openmpi");
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.master_addr, "127.0.0.1");
  EXPECT_GE(s.master_port, 20000);
  EXPECT_LT(s.master_port, 40000);
}

TEST(Rendezvous, ErrorsSayWhatIsMissing) {
  auto message = [](std::map<std::string, std::string> env) {
    try {
      rendezvous_from_env(env);
    } catch (const InvalidArgumentError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({}).find("no launcher environment"), std::string::npos);
  EXPECT_NE(message({{"RANK", "0"}, {"WORLD_SIZE", "2"}}).find("MASTER_ADDR"), std::string::npos);
  EXPECT_NE(message({{"RANK", "x"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}).find("RANK='x'"), std::string::npos);
  EXPECT_NE(message({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}}).find("MASTER_ADDR"), std::string::npos);
  RendezvousSpec s;
  s.rank = 0;
  s.world = 0;
  EXPECT_THROW(s.validate(), InvalidArgumentError);
}

// Something else at master_addr:master_port (here: a server that answers a JSON line without a
// peer list) makes the rendezvous fail with a ProtocolError that says so, not a JSON exception.
TEST(Rendezvous, AReplyWithoutAPeerListIsAProtocolErrorThatSaysSo) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  std::thread impostor([listener] {
    const int fd = ::accept(listener, nullptr, nullptr);
    if (fd < 0) return;
    char buffer[4096];
    (void)::recv(fd, buffer, sizeof buffer, 0);  // the rank's request line
    const char reply[] = "{\"status\": \"ok\"}\n";
    (void)::send(fd, reply, sizeof reply - 1, MSG_NOSIGNAL);
    ::close(fd);
  });
  RendezvousSpec spec;
  spec.rank = 1;
  spec.world = 2;
  spec.master_addr = "127.0.0.1";
  spec.master_port = ntohs(addr.sin_port);
  spec.bind_host = "127.0.0.1";
  spec.timeout = std::chrono::seconds(10);
  try {
    rendezvous_exchange(spec, 1);
    ADD_FAILURE() << "a reply without peers was accepted";
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("no valid peer list"), std::string::npos) << e.what();
  }
  impostor.join();
  ::close(listener);
}

}  // namespace
}  // namespace wcomm
