// collective_summary and the side report of `wcomm multirank`.
#include "tools/multirank_report.h"

#include <algorithm>

#include "bench/diagnostics.h"
#include "bench/stats.h"

namespace wcomm::tools {

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
