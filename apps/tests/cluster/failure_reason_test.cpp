// Naming the failed node and why from stderr: SSH sessions and copies, srun and mpirun jobs.
#include <gtest/gtest.h>

#include "cluster/failure_reason.h"

namespace wcomm::cluster {
namespace {

TEST(SessionFailureReason, PrefersTheWorkersErrorThenSshsWordsThenTheLastLine) {
  SessionEnd end{.stderr_lines = {"cluster worker node-c: ranks [2] listening (pid 9)",
                                  "cluster worker node-c: error: network interface 'x' does not exist", "bye"},
                 .exit_text = "exit status 1", .exit_code = 1};
  EXPECT_EQ(session_failure_reason(end), "cluster worker node-c: error: network interface 'x' does not exist [exit status 1]");
  end.stderr_lines = {"ssh: connect to host 192.0.2.12 port 22: Connection refused\r", "/usr/bin/scp: Connection closed"};
  end.exit_text = "exit status 255";
  end.exit_code = 255;
  end.is_copy = true;
  EXPECT_EQ(session_failure_reason(end), "ssh: connect to host 192.0.2.12 port 22: Connection refused [exit status 255]");
  end.stderr_lines = {"cluster worker node-c: ranks [2] listening (pid 9)", "multirank: rank 2 barrier 0 B: p50 1 ms", "", "last words"};
  end.exit_text = "exit status 2";
  end.exit_code = 2;
  EXPECT_EQ(session_failure_reason(end), "last words [exit status 2]");
}

TEST(SessionFailureReason, SaysAWorkerWasKilled) {
  SessionEnd end{.stderr_lines = {"cluster worker node-c: ranks [2] listening (pid 4321)"}, .exit_text = "exit status 255",
                 .exit_code = 255, .pid = "4321"};
  EXPECT_EQ(session_failure_reason(end),
            "the SSH session ended without an exit status (ssh exit status 255): the worker (pid 4321) was killed by a "
            "signal, or the connection dropped");
  end.exit_text = "exit status 137";  // a shell that outlived the worker reports 128 + 9
  end.exit_code = 137;
  EXPECT_EQ(session_failure_reason(end), "the worker ended: exit status 137 (killed by signal 9)");
  end.signaled = true;  // ssh itself killed (by the launcher): no claim about the worker
  end.exit_text = "killed by signal 9";
  EXPECT_EQ(session_failure_reason(end), "the worker ended: killed by signal 9");
}

TEST(BatchRankFailure, NamesTheRankThatFailedNotThoseThatStoppedAfterIt) {
  EXPECT_FALSE(batch_rank_failure({"nothing here"}));
  auto f = batch_rank_failure({"srun: error: n1: tasks 0-1: Exited with exit code 3", "srun: error: n1: task 2: Killed",
                               "cluster rank 3 on n1: stopped, a peer failed: connection closed"});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->node, "n1");
  EXPECT_EQ(f->reason, "rank 2: Killed");
  f = batch_rank_failure({"cluster rank 1 on n2: stopped, a peer failed: closed",
                          "cluster rank 2 on n3: error: broadcast root must be smaller than world size"});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->node, "n3");
  EXPECT_EQ(f->reason, "rank 2: broadcast root must be smaller than world size");
  f = batch_rank_failure({"mpirun noticed that process rank 2 with PID 1234 on node vm exited on signal 9 (Killed)."});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->node, "vm");
  EXPECT_EQ(f->reason, "rank 2: exited on signal 9 (Killed).");
  f = batch_rank_failure({"srun: error: n1: tasks 0-1: Exited with exit code 3"});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->reason, "rank 0-1: Exited with exit code 3");  // only peers stopped: still named
}

}  // namespace
}  // namespace wcomm::cluster
