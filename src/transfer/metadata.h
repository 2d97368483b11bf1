// An agent's metadata: what a peer needs to reach its registered memory, as plain msgpack
// (a map of numbers, strings and byte strings; docs/transfer.md lists the fields).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "wcomm/errors.h"
#include "wcomm/xfer/types.h"

namespace wcomm::xfer {

struct AgentMetadata {
  std::uint32_t format = 1;
  std::string name;
  std::uint64_t generation = 0;
  std::string host_id;         // boot id + pid namespace: equal means cma can reach the pid
  std::int64_t pid = 0;
  std::uint64_t pid_start = 0;  // the process's start time (/proc/PID/stat), against pid reuse
  std::string comm_node;       // the Agent's Comm node id ("" without a Comm)
  std::vector<std::string> comm_addresses;  // where that Comm listens (URLs): add_remote adds it as a peer
  DescList regions;            // merged registered ranges
  std::string ucx_address;     // the UCP worker address ("" without ucx)
  std::vector<std::string> ucx_rkeys;  // one packed rkey per region ("" without ucx)
};

std::string encode_metadata(const AgentMetadata& meta);
// InvalidArgument naming what is missing or of the wrong type.
Result<AgentMetadata> decode_metadata(std::string_view bytes);

// Descriptor lists as msgpack arrays of [addr, len, dev_id] (the seed's list[tuple[int,int,int]]).
std::string encode_descs(const DescList& descs);
Result<DescList> decode_descs(std::string_view bytes);

// This process's identity for cma (shared by the agent and its checks).
std::string local_host_id();
std::uint64_t process_start_time(std::int64_t pid);  // 0 when there is no such process

}  // namespace wcomm::xfer
