// One logical rank of `wcomm multirank`: V0.1's per-rank loop (v01-collectives-cluster.md 1.5)
// over its collectives, with V0.1's payloads, tags and checks, timing every iteration.
#pragma once

#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "multirank/multirank_settings.h"
#include "wcomm/collectives/group.h"
#include "wcomm/comm.h"

namespace wcomm::tools {

struct RankContext {
  int rank = 0;
  int world = 1;
  std::shared_ptr<Comm> comm;
  std::vector<const Peer*> peers;  // by rank; nullptr for this rank
  Group* group = nullptr;          // set when settings.algorithm is not "v01"
  const MultirankSettings* settings = nullptr;
  bool progress = false;           // print a line per (collective, size) on stderr
  std::vector<int> ring;           // the ring order (cluster YAML's `ring`); empty: 0, 1, ..., W-1
};

// The context of `rank` whose Comm reaches every other rank as peer "rank-<k>".
RankContext rank_context(int rank, int world, std::shared_ptr<Comm> comm, Group* group,
                         const MultirankSettings& settings);

// Runs every collective and size; returns the rank result {rank, samples_ms}. Throws the
// failure (a timeout, a lost peer, a wrong payload) with V0.1's message where it has one.
nlohmann::json run_rank(RankContext& ctx);

}  // namespace wcomm::tools
