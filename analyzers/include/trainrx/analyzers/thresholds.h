// trainrx::analyzers thresholds — every rule's named, overridable thresholds (analysis.h).
#pragma once

#include <map>
#include <string>
#include <utility>

namespace trainrx::analyzers {

// Named, overridable thresholds ("input.dataloader_bound.share_pct" = 5).
class Thresholds {
 public:
  Thresholds();  // registers every analyzer's defaults
  // Keys come from analyzer code, so an unknown one is a programming error (a typo would otherwise
  // read as a zero threshold and silently flag, or hide, a finding): throws std::logic_error naming
  // the key. tests/analyzers/registry_test.cc checks every key the analyzers read is registered.
  double Get(const std::string& key) const;
  // Keys from users: returns false (with *error listing the known keys) for unknown keys.
  bool Set(const std::string& key, double value, std::string* error);
  // "key=value" form from the command line.
  bool Parse(const std::string& assignment, std::string* error);
  const std::map<std::string, std::pair<double, std::string>>& all() const { return values_; }

 private:
  std::map<std::string, std::pair<double, std::string>> values_;  // key -> (value, description)
};

}  // namespace trainrx::analyzers
