// Tensor round trips and tensor structure checks of the benchmark initiator.
#include "netbench/tensor_phase.h"

#include <cstdio>
#include <string>
#include <vector>

#include "netbench/clock.h"
#include "netbench/phase_progress.h"
#include "netbench/stats.h"

namespace wcomm::bench {
namespace {

// A float32 tensor of `bytes / 4` elements with distinct values, so a wrong echo shows.
Tensor float_tensor(std::uint64_t bytes, float offset) {
  const auto elements = static_cast<std::int64_t>(bytes / 4);
  Tensor t = Tensor::empty(DType::kFloat32, {elements});
  float* data = t.data_as<float>();
  for (std::int64_t i = 0; i < elements; ++i) data[i] = offset + static_cast<float>(i % 4096) * 0.25f;
  return t;
}

Tensor bool_tensor(std::int64_t elements) {
  Tensor t = Tensor::empty(DType::kBool, {elements});
  for (std::int64_t i = 0; i < elements; ++i) t.data()[i] = static_cast<std::uint8_t>(i % 3 == 0);
  return t;
}

const Tensor* tensor_in(const Value* v) { return v != nullptr && v->is<Tensor>() ? &v->as<Tensor>() : nullptr; }

bool same_tensor(const Value* echoed, const Tensor& sent) {
  const Tensor* t = tensor_in(echoed);
  return t != nullptr && *t == sent;
}

double tensor_ping_ms(ControlChannel& control, const Tensor& tensor, std::int64_t sequence) {
  const auto start = BenchClock::now();
  auto sent = control.post(
      Dict{{"op", "tensor_ping"}, {"sequence", sequence}, {"size", tensor.nbytes()}, {"payload", tensor}});
  Dict pong = control.expect("tensor_pong");
  const auto end = BenchClock::now();
  sent.get();
  if (int_field(pong, "sequence") != sequence)
    throw BenchProtocolError("benchmark protocol: tensor_pong for sequence " +
                             std::to_string(int_field(pong, "sequence")) + ", expected " + std::to_string(sequence));
  if (!same_tensor(pong.find("payload"), tensor))
    throw BenchProtocolError("benchmark protocol: the tensor_pong's payload is not the float32 tensor of " +
                             std::to_string(tensor.nbytes()) + " bytes that was sent");
  return seconds_between(start, end) * 1e3;
}

nlohmann::json structures(ControlChannel& control, std::uint64_t bytes) {
  const Tensor single = float_tensor(bytes, 1.0f);
  const Tensor first = float_tensor(bytes, 2.0f);
  const Tensor second = float_tensor(bytes, 3.0f);
  const Tensor floats = float_tensor(bytes, 4.0f);
  const Tensor bools = bool_tensor(static_cast<std::int64_t>(bytes / 4));
  Dict payload{{"single", single},
               {"tensor_list", List{Value(first), Value(second)}},
               {"tensor_dict", Dict{{"float", floats}, {"bool", bools}}}};
  const auto start = BenchClock::now();
  control.send(Dict{{"op", "tensor_structures"}, {"payload", payload}});
  Dict reply = control.expect("tensor_structures");
  const double ms = seconds_between(start, BenchClock::now()) * 1e3;

  const Value* echoed = reply.find("payload");
  const Dict* back = echoed != nullptr && echoed->is<Dict>() ? &echoed->as<Dict>() : nullptr;
  bool single_ok = false, list_ok = false, dict_ok = false;
  if (back != nullptr) {
    single_ok = same_tensor(back->find("single"), single);
    const Value* list = back->find("tensor_list");
    if (list != nullptr && list->is<List>()) {
      const auto& items = list->as<List>().items;
      list_ok = items.size() == 2 && same_tensor(&items[0], first) && same_tensor(&items[1], second);
    }
    const Value* dict = back->find("tensor_dict");
    if (dict != nullptr && dict->is<Dict>()) {
      const Dict& d = dict->as<Dict>();
      dict_ok = d.items.size() == 2 && same_tensor(d.find("float"), floats) && same_tensor(d.find("bool"), bools);
    }
  }
  return {{"payload_bytes", bytes},     {"single", single_ok},
          {"tensor_list", list_ok},      {"tensor_dict", dict_ok},
          {"correct", single_ok && list_ok && dict_ok}, {"round_trip_ms", ms}};
}

}  // namespace

nlohmann::json run_tensor_phase(ControlChannel& control, const BenchSettings& settings, std::int64_t& next_sequence,
                                const ProgressSink& progress, const std::string& torch_version) {
  nlohmann::json round_trips = nlohmann::json::array();
  nlohmann::json v01_round_trips = nlohmann::json::array();
  nlohmann::json checks = nlohmann::json::array();
  PhaseProgress steps("tensor", settings.tensor_sizes.size());
  for (std::uint64_t bytes : settings.tensor_sizes) {
    const Tensor tensor = float_tensor(bytes, 0.5f);
    std::vector<double> samples;
    for (std::uint64_t i = 0; i < settings.tensor_rounds; ++i)
      samples.push_back(tensor_ping_ms(control, tensor, next_sequence++));
    nlohmann::json summary = summarize(samples);
    checks.push_back(structures(control, bytes));
    if (progress) {
      char line[200];
      std::snprintf(line, sizeof line, "tensor %llu B: p50 %.3f ms over %zu rounds; structures %s",
                    static_cast<unsigned long long>(bytes), summary["p50"].is_number() ? summary["p50"].get<double>() : 0.0,
                    samples.size(), checks.back()["correct"].get<bool>() ? "echoed correctly" : "NOT echoed correctly");
      progress(steps.line(checks.size(), line));
    }
    // V0.1's goodput of one round trip: the tensor's bytes out and back over its RTT.
    std::vector<double> goodput;
    goodput.reserve(samples.size());
    for (double ms : samples) goodput.push_back(static_cast<double>(bytes) * 2 * 8 / (ms / 1e3) / 1e6);
    v01_round_trips.push_back({{"payload_bytes", bytes},
                               {"elements", bytes / 4},
                               {"dtype", "torch.float32"},
                               {"rounds", settings.tensor_rounds},
                               {"round_trip_ms", summary},
                               {"round_trip_goodput_mbps", summarize(goodput)},
                               {"samples_ms", samples}});
    round_trips.push_back({{"payload_bytes", bytes},
                           {"elements", bytes / 4},
                           {"rounds", settings.tensor_rounds},
                           {"samples_ms", samples},
                           {"summary_ms", std::move(summary)}});
  }
  bool all_correct = true;
  bool single_ok = true, list_ok = true, dict_ok = true;
  for (const auto& c : checks) {
    all_correct = all_correct && c["correct"].get<bool>();
    single_ok = single_ok && c["single"].get<bool>();
    list_ok = list_ok && c["tensor_list"].get<bool>();
    dict_ok = dict_ok && c["tensor_dict"].get<bool>();
  }
  return {// wcomm's keys
          {"dtype", "float32"},
          {"rounds", settings.tensor_rounds},
          {"round_trips", std::move(round_trips)},
          {"structures", std::move(checks)},
          {"structures_correct", all_correct},
          // V0.1's keys, with V0.1's meaning
          {"torch_version", torch_version.empty() ? nlohmann::json(nullptr) : nlohmann::json(torch_version)},
          {"device", "cpu"},
          {"contiguous", true},
          {"round_trip", std::move(v01_round_trips)},
          {"structure_round_trip", {{"single_tensor", single_ok}, {"tensor_list", list_ok}, {"tensor_dict", dict_ok}}}};
}

}  // namespace wcomm::bench
