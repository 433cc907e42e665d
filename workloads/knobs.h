// trainrx::workloads knobs — the reference workloads' settings and their defaults. Torch-free: the
// CLI (`trainrx workloads`, `trainrx run` validation) and the workload binary (workloads/train.cc)
// share this one table.
//
// Defaults are the "good" setting; a knob's `bad` value is the setting docs/findings.md warns about. Which
// finding a bad value plants is the finding catalog's (analyzers/catalog.h: planted_by). Presets
// name classic bad configurations.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainrx/profiler/status.h"

namespace trainrx::workloads {

struct Knob {
  const char* name;
  const char* default_value;
  const char* bad_value;  // the setting that a finding flags ("" when none)
  const char* where;      // "cpu", "gpu" (only has an effect with device=cuda), "dist"
  const char* help;
};

struct Workload {
  const char* name;
  const char* help;
};

const std::vector<Knob>& Knobs();
const std::vector<Workload>& Workloads();
const Knob* FindKnob(const std::string& name);
// Knobs the workload can change between two steps of one process (--alt-set): in-process A/B.
bool IsSwitchable(const std::string& name);
std::string SwitchableKnobs();  // "slowdown, item_every_step, ..." for messages

struct Preset {
  const char* name;
  const char* help;
  std::vector<std::pair<const char*, const char*>> settings;
};
const std::vector<Preset>& Presets();

// A workload's configuration: every knob with a value (defaults filled in).
class Config {
 public:
  Config();  // all defaults
  // "workers=4": an error naming the knob or value problem (unknown knobs list the known).
  Status Set(const std::string& assignment);
  // An error naming the preset and listing the known ones when there is none of that name.
  Status ApplyPreset(const std::string& name);
  const std::string& Get(const std::string& name) const;
  int64_t Int(const std::string& name) const;
  double Double(const std::string& name) const;
  bool Bool(const std::string& name) const;
  const std::map<std::string, std::string>& values() const { return values_; }
  // Knobs set away from their default, as "k=v k=v" (for reports).
  std::string Changed() const;

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace trainrx::workloads
