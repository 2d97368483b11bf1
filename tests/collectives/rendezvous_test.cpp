// Rendezvous specs from torchrun, Slurm and Open MPI environments, and their error messages.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace wcomm
