// Fuzzes the acceptor's HELLO / cluster-key handshake: arbitrary bytes from a fresh TCP
// connection to a keyed node. Seeds: the golden HELLO frames.
#include "fuzz_node.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static wcomm::fuzz::FuzzNode* node = [] {
    wcomm::CommConfig config;
    config.cluster_key = "fuzzing-cluster-key-0123456789";
    return new wcomm::fuzz::FuzzNode(config);  // lives until exit
  }();
  node->feed(data, size);
  return 0;
}
