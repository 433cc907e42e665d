// Reading the collector's configuration (private to analyzers/).
//
// Our probes record configuration two ways (docs/architecture.md): a "trainrx" block with values
// at start/finish (RankInfo::config), and "trainrx.config.<key>" counters written at every step
// boundary where a value changed (anomaly mode switched on after import, a profiler opened for
// ten steps). ConfigView answers "what was <key> at time t on this rank": the last counter at or
// before t, else the first counter (the value at the first step boundary), else the block value.
// Traces from other tools have neither, and every accessor returns nullopt: rules stay silent.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainrx/analyzers/analysis.h"

namespace trainrx::analyzers {

// A "trainrx" block value of a rank as text ("" when absent); JSON strings are decoded
// ("\"SIGSEGV\"" -> "SIGSEGV", "\"a\\\"b\"" -> "a\"b"). Serves where only the RankInfo is at hand
// (a summary's side).
std::string ConfigText(const profiler::RankInfo& info, const char* key);

class ConfigView {
 public:
  ConfigView(const profiler::Trace& trace, int32_t rank);
  std::optional<double> At(const std::string& key, int64_t ts_ns) const;
  std::optional<double> Static(const std::string& key) const;  // the "trainrx" block value
  // Largest value seen over the run (counters and block).
  std::optional<double> Max(const std::string& key) const;
  // Steps of this rank during which `key` was non-zero (value at the step's start or a change
  // inside it); `total` receives the number of steps of the rank.
  int64_t StepsWhereOn(const std::string& key, const StepModel& steps, int64_t* total) const;
  // Raw text of a block entry ("" when absent), e.g. the "env" object.
  std::string Raw(const std::string& key) const;
  bool from_collector() const { return from_collector_; }
  // Ranks sharing this rank's machine (LOCAL_WORLD_SIZE in the recorded environment; 1 without).
  double LocalRanks() const;

 private:
  std::map<std::string, std::vector<std::pair<int64_t, double>>> series_;  // sorted by ts
  std::map<std::string, profiler::ConfigValue> block_;
  int32_t rank_;
  bool from_collector_ = false;
};

// Whether the CPUs of a machine are all taken by the compute threads of its local ranks and one
// communication thread each (local ranks x (intra-op threads + 1) > CPUs allowed; false when a
// figure is unknown, 0): Gloo's own thread then has no core to overlap the compute on.
inline bool NoFreeCore(double cpu_count, double intra_op_threads, double local_ranks) {
  return cpu_count > 0 && intra_op_threads > 0 && local_ranks * (intra_op_threads + 1) > cpu_count;
}

}  // namespace trainrx::analyzers
