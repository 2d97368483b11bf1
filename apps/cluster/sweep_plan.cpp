// Sweep variants, Python-compatible shuffling (MT19937 seeded by init_by_array) and configs.
#include "cluster/sweep_plan.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>

#include "wcomm/errors.h"

namespace wcomm::cluster {
namespace {

// MT19937 as CPython's _randommodule.c seeds it from an integer.
class PythonRandom {
 public:
  explicit PythonRandom(std::int64_t seed) {
    std::uint64_t magnitude = seed < 0 ? static_cast<std::uint64_t>(-(seed + 1)) + 1 : static_cast<std::uint64_t>(seed);
    std::vector<std::uint32_t> key;
    while (magnitude) {
      key.push_back(static_cast<std::uint32_t>(magnitude & 0xffffffffu));
      magnitude >>= 32;
    }
    if (key.empty()) key.push_back(0);
    init_by_array(key);
  }

  std::uint32_t next() {
    if (index_ >= kN) twist();
    std::uint32_t y = mt_[index_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
  }

  // random._randbelow_with_getrandbits for n < 2^32.
  std::uint32_t below(std::uint32_t n) {
    int k = 0;
    for (std::uint32_t v = n; v; v >>= 1) ++k;
    while (true) {
      std::uint32_t r = next() >> (32 - k);
      if (r < n) return r;
    }
  }

 private:
  static constexpr int kN = 624, kM = 397;

  void init_genrand(std::uint32_t s) {
    mt_[0] = s;
    for (int i = 1; i < kN; ++i) mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<std::uint32_t>(i);
    index_ = kN;
  }

  void init_by_array(const std::vector<std::uint32_t>& key) {
    init_genrand(19650218u);
    int i = 1;
    std::size_t j = 0;
    for (std::size_t k = std::max<std::size_t>(kN, key.size()); k; --k) {
      mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525u)) + key[j] + static_cast<std::uint32_t>(j);
      ++i;
      ++j;
      if (i >= kN) {
        mt_[0] = mt_[kN - 1];
        i = 1;
      }
      if (j >= key.size()) j = 0;
    }
    for (int k = kN - 1; k; --k) {
      mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941u)) - static_cast<std::uint32_t>(i);
      ++i;
      if (i >= kN) {
        mt_[0] = mt_[kN - 1];
        i = 1;
      }
    }
    mt_[0] = 0x80000000u;
  }

  void twist() {
    for (int i = 0; i < kN; ++i) {
      std::uint32_t y = (mt_[i] & 0x80000000u) | (mt_[(i + 1) % kN] & 0x7fffffffu);
      mt_[i] = mt_[(i + kM) % kN] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    index_ = 0;
  }

  std::array<std::uint32_t, kN> mt_{};
  int index_ = kN;
};

constexpr std::int64_t kMiB = 1048576;

std::int64_t rate(int mbit) { return static_cast<std::int64_t>(std::floor(mbit * 1e6 / 8)); }

SweepVariant p2p(const std::string& suite, int quantum_k, int mbit) {
  SweepVariant v{.name = "", .suite = suite, .collective = "all_to_all_exchange", .payload_bytes = kMiB, .ring = {0, 1, 2, 3},
                 .extra_key = "", .extra_value = 0, .comm = {}};
  if (quantum_k == 0) {
    v.name = "p2p-uncontrolled";
    return v;
  }
  v.name = "p2p-byte-rr" + std::to_string(quantum_k) + "k";
  v.comm["egress_quantum_bytes"] = quantum_k * 1024;
  if (mbit) {
    v.name += "-rate" + std::to_string(mbit);
    v.comm["egress_rate_bytes_per_second"] = rate(mbit);
  }
  return v;
}

}  // namespace

std::vector<SweepVariant> sweep_variants(const std::vector<std::string>& suites) {
  std::set<std::string> wanted(suites.begin(), suites.end()), unknown;
  for (auto& s : wanted)
    if (std::find(kSweepSuites.begin(), kSweepSuites.end(), s) == kSweepSuites.end()) unknown.insert(s);
  if (!unknown.empty()) {
    std::string names;
    for (auto& u : unknown) names += (names.empty() ? "" : ", ") + u;
    throw InvalidArgumentError("unknown experiment suites: " + names);
  }
  std::vector<SweepVariant> out;
  if (wanted.count("scheduler"))
    for (int c : {4, 2, 1})
      out.push_back({.name = "scheduler-c" + std::to_string(c), .suite = "scheduler", .collective = "ring_exchange",
                     .payload_bytes = 4 * kMiB, .ring = {0, 1, 2, 3}, .extra_key = "ring_exchange_concurrency", .extra_value = c, .comm = {}});
  if (wanted.count("ring")) {
    std::vector<int> rest = {1, 2, 3};
    do {
      out.push_back({.name = "ring-0-" + std::to_string(rest[0]) + "-" + std::to_string(rest[1]) + "-" + std::to_string(rest[2]),
                     .suite = "ring", .collective = "ring_allreduce", .payload_bytes = kMiB, .ring = {0, rest[0], rest[1], rest[2]}, .extra_key = "", .extra_value = 0, .comm = {}});
    } while (std::next_permutation(rest.begin(), rest.end()));
  }
  if (wanted.count("broadcast"))
    for (int root = 0; root < 4; ++root)
      out.push_back({.name = "broadcast-root" + std::to_string(root), .suite = "broadcast", .collective = "broadcast",
                     .payload_bytes = kMiB, .ring = {0, 1, 2, 3}, .extra_key = "broadcast_root", .extra_value = root, .comm = {}});
  if (wanted.count("chunk"))
    for (int k : {64, 128, 256})
      out.push_back({.name = "allreduce-block" + std::to_string(k) + "k", .suite = "chunk", .collective = "ring_allreduce",
                     .payload_bytes = kMiB, .ring = {0, 1, 2, 3}, .extra_key = "allreduce_block_bytes", .extra_value = k * 1024, .comm = {}});
  if (wanted.count("p2p")) {
    out.push_back(p2p("p2p", 0, 0));
    for (int q : {16, 64, 256}) out.push_back(p2p("p2p", q, 0));
    for (int r : {15, 20, 25, 30, 35}) out.push_back(p2p("p2p", 64, r));
    out.push_back(p2p("p2p", 16, 30));
    out.push_back(p2p("p2p", 256, 30));
  }
  if (wanted.count("p2p-knee")) {
    for (int r : {40, 45, 50}) out.push_back(p2p("p2p-knee", 64, r));
    out.push_back(p2p("p2p-knee", 16, 35));
    out.push_back(p2p("p2p-knee", 256, 35));
  }
  if (wanted.count("p2p-confirm")) {
    out.push_back(p2p("p2p-confirm", 0, 0));
    for (int r : {35, 40, 45, 50}) out.push_back(p2p("p2p-confirm", 64, r));
    out.push_back(p2p("p2p-confirm", 256, 40));
  }
  return out;
}

std::vector<std::size_t> python_shuffle_order(std::size_t n, std::int64_t seed) {
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  PythonRandom random(seed);
  for (std::size_t i = n; i-- > 1;) std::swap(order[i], order[random.below(static_cast<std::uint32_t>(i + 1))]);
  return order;
}

YAML::Node variant_config(const YAML::Node& base, const SweepVariant& v, int base_port, std::int64_t rounds,
                          std::int64_t warmup_rounds) {
  YAML::Node doc = YAML::Clone(base);
  doc["base_port"] = base_port;
  YAML::Node ring(YAML::NodeType::Sequence);
  for (int r : v.ring) ring.push_back(r);
  ring.SetStyle(YAML::EmitterStyle::Flow);
  doc["ring"] = ring;
  YAML::Node comm(YAML::NodeType::Map);
  for (auto& [k, value] : v.comm) comm[k] = value;
  doc["comm"] = comm;
  YAML::Node bench(YAML::NodeType::Map);
  YAML::Node sizes(YAML::NodeType::Sequence);
  sizes.push_back(v.payload_bytes);
  bench["payload_sizes"] = sizes;
  bench["rounds"] = rounds;
  bench["warmup_rounds"] = warmup_rounds;
  YAML::Node collectives(YAML::NodeType::Sequence);
  collectives.push_back(v.collective);
  bench["collectives"] = collectives;
  bench["timeout"] = 180;
  if (!v.extra_key.empty()) bench[v.extra_key] = v.extra_value;
  doc["benchmark"] = bench;
  return doc;
}

}  // namespace wcomm::cluster
