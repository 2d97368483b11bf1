// collective_summary and the side report of `wcomm multirank`.
#include "multirank/multirank_report.h"

#include <algorithm>

#include "netbench/diagnostics.h"
#include "netbench/stats.h"

namespace wcomm::tools {

namespace {

// V0.1 1.11 for the exchange collectives: send_service_ms per rank, Jain's fairness of the
// per-flow rates of each iteration, and the effective round rate S * F * 8 / (C[i] * 1000).
void add_exchange_summary(nlohmann::json& entry, const nlohmann::json& rank_results, const std::string& collective,
                          const std::string& size, const std::vector<double>& completion) {
  const double bytes = std::stod(size);
  nlohmann::json per_rank = nlohmann::json::object();
  std::vector<double> jain(completion.size(), 0.0), effective(completion.size(), 0.0);
  std::vector<std::vector<double>> rates(completion.size());
  std::size_t flows = 0;
  for (const auto& result : rank_results) {
    const nlohmann::json& iterations = result["send_service_ms"][collective][size];
    std::vector<double> flat;
    for (std::size_t i = 0; i < iterations.size(); ++i)
      for (double d : iterations[i]) {
        flat.push_back(d);
        if (i < rates.size()) rates[i].push_back(bytes * 8 / (d * 1000));
      }
    if (!iterations.empty()) flows += iterations[0].size();
    per_rank[std::to_string(result["rank"].get<int>())] = bench::summarize(flat);
  }
  for (std::size_t i = 0; i < completion.size(); ++i) {
    double sum = 0, squares = 0;
    for (double x : rates[i]) {
      sum += x;
      squares += x * x;
    }
    jain[i] = squares > 0 ? sum * sum / (static_cast<double>(rates[i].size()) * squares) : 0.0;
    effective[i] = completion[i] > 0 ? bytes * static_cast<double>(flows) * 8 / (completion[i] * 1000) : 0.0;
  }
  entry["send_service_ms"] = per_rank;
  entry["jain_fairness"] = bench::summarize(jain);
  entry["effective_round_mbps"] = bench::summarize(effective);
}

}  // namespace

nlohmann::json collective_summary(const nlohmann::json& rank_results) {
  nlohmann::json summary = nlohmann::json::object();
  if (rank_results.empty()) return summary;
  for (auto& [collective, sizes] : rank_results[0]["samples_ms"].items()) {
    for (auto& [size, first] : sizes.items()) {
      nlohmann::json per_rank = nlohmann::json::object();
      std::vector<double> completion(first.size(), 0.0);
      for (const auto& result : rank_results) {
        std::vector<double> samples = result["samples_ms"][collective][size].get<std::vector<double>>();
        per_rank[std::to_string(result["rank"].get<int>())] = bench::summarize(samples);
        for (std::size_t i = 0; i < completion.size() && i < samples.size(); ++i)
          completion[i] = std::max(completion[i], samples[i]);
      }
      summary[collective][size] = {{"per_rank_ms", per_rank},
                                   {"completion_samples_ms", completion},
                                   {"collective_completion_ms", bench::summarize(completion)}};
      if (collective == "ring_exchange" || collective == "all_to_all_exchange")
        add_exchange_summary(summary[collective][size], rank_results, collective, size, completion);
    }
  }
  return summary;
}

nlohmann::json side_report(const std::vector<int>& local_ranks, const nlohmann::json& before,
                           const nlohmann::json& after, const nlohmann::json& link_samples) {
  nlohmann::json side = {{"local_ranks", local_ranks}};
  bench::add_environment_section(side, before, after);
  side["link_samples"] = link_samples;
  return side;
}

}  // namespace wcomm::tools
