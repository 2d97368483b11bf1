// Fuzzes a whole connection: arbitrary bytes from a fresh TCP connection to a node without a
// cluster key, so that a HELLO naming node-a gets through to the frame reader, the decoder and
// delivery. Seeds: the golden HELLO followed by each golden frame.
#include "fuzz_node.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static wcomm::fuzz::FuzzNode* node = new wcomm::fuzz::FuzzNode(wcomm::CommConfig{});  // lives until exit
  node->feed(data, size);
  return 0;
}
