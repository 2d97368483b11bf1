// The benchmark's tensor phase (initiator side): float32 tensor round trips per size
// (tensor_ping / tensor_pong, RTT summary) and the tensor_structures correctness check
// (single tensor, tensor list, tensor dict echoed unchanged), as the report's "tensor" section.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "netbench/initiator.h"
#include "netbench/protocol.h"
#include "netbench/settings.h"

namespace wcomm::bench {

// Runs the phase for settings.tensor_sizes (bytes, multiples of 4) x tensor_rounds; returns
// wcomm's {dtype, rounds, round_trips: [{payload_bytes, elements, rounds, samples_ms,
// summary_ms}], structures: [{single, tensor_list, tensor_dict, correct, round_trip_ms}],
// structures_correct} beside V0.1's {torch_version, device, contiguous, round_trip: [{payload_bytes,
// elements, dtype, rounds, round_trip_ms, round_trip_goodput_mbps, samples_ms}],
// structure_round_trip: {single_tensor, tensor_list, tensor_dict}} (docs/benchmark-report.md).
// `torch_version` "" is written as null. Throws BenchProtocolError when an echoed tensor
// differs from the one sent.
nlohmann::json run_tensor_phase(ControlChannel& control, const BenchSettings& settings, std::int64_t& next_sequence,
                                const ProgressSink& progress, const std::string& torch_version = "");

}  // namespace wcomm::bench
