// trainrx::analyzers thresholds — every rule's named, overridable thresholds (analysis.h).
#pragma once

#include <map>
#include <string>
#include <utility>

#include "trainrx/profiler/status.h"

namespace trainrx::analyzers {

// Named, overridable thresholds ("input.dataloader_bound.share_pct" = 5).
class Thresholds {
 public:
  Thresholds();  // registers every analyzer's defaults
  // Keys come from analyzer code, so an unknown one is a programming error (a typo would otherwise
  // read as a zero threshold and silently flag, or hide, a finding): throws std::logic_error naming
  // the key. tests/analyzers/registry_test.cc checks every key the analyzers read is registered.
  double Get(const std::string& key) const;
  // Keys from users: an error listing the known keys for an unknown key.
  Status Set(const std::string& key, double value);
  // "key=value" form from the command line.
  Status Parse(const std::string& assignment);
  const std::map<std::string, std::pair<double, std::string>>& all() const { return values_; }

 private:
  std::map<std::string, std::pair<double, std::string>> values_;  // key -> (value, description)
};

}  // namespace trainrx::analyzers
