#include "trainrx/experiments/spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace trainrx::experiments {

namespace {
bool IsPercentage(const std::string& set) { return set.size() > 1 && set.back() == '%'; }

// An assignment the code built from the knob table (a plan's fix or cell, a resolved percentage):
// one the table refuses is a bug in that code, not the user's input.
void SetBuilt(workloads::Config* config, const std::string& assignment) {
  if (const Status st = config->Set(assignment); !st.ok())
    throw std::logic_error(fmt::format("a built assignment '{}' was refused: {}", assignment, st.message()));
}
}  // namespace

std::string Spec::Label() const {
  std::string s = workload;
  if (!preset.empty()) s += " preset=" + preset;
  for (const auto& set : sets) s += " " + set;
  if (nproc > 1) s += " nproc=" + std::to_string(nproc);
  return s;
}

bool Spec::HasPercentages() const {
  for (const auto& set : sets)
    if (IsPercentage(set)) return true;
  return false;
}

int64_t Spec::SamplesPerStep() const {
  return config.Int("batch") * std::max<int64_t>(1, config.Int("grad_accum")) * nproc;
}

Spec Spec::With(const std::string& assignment) const {
  Spec s = *this;
  if (KnobName(assignment) == "nproc") {
    s.nproc = std::max(1, std::atoi(assignment.c_str() + 6));
    return s;
  }
  s.sets.push_back(assignment);
  SetBuilt(&s.config, assignment);
  return s;
}

std::string KnobName(const std::string& assignment) { return assignment.substr(0, assignment.find('=')); }

Status ParseSpec(const std::string& text, Spec* spec) {
  std::istringstream in(text);
  std::string tok;
  *spec = {};
  while (in >> tok) {
    if (spec->workload.empty()) {
      spec->workload = tok;
    } else if (tok.rfind("preset=", 0) == 0) {
      if (!spec->preset.empty()) {
        return Status::Error(fmt::format("'{}': two presets ('{}' and '{}')", text, spec->preset, tok.substr(7)));
      }
      spec->preset = tok.substr(7);
    } else if (tok.rfind("nproc=", 0) == 0) {
      // Local ranks: a positive count; more than 64 processes on one machine is a typo.
      char* end = nullptr;
      const long n = std::strtol(tok.c_str() + 6, &end, 10);
      if (end == tok.c_str() + 6 || *end != '\0' || n < 1 || n > 64) {
        return Status::Error(
            fmt::format("'{}': nproc must be a count of local ranks from 1 to 64, got '{}'", text, tok.substr(6)));
      }
      spec->nproc = static_cast<int>(n);
    } else {
      spec->sets.push_back(tok);
    }
  }
  bool known = false;
  for (const auto& w : workloads::Workloads()) known = known || spec->workload == w.name;
  if (!known) {
    return Status::Error(spec->workload.empty()
                             ? "workload spec: empty (expected e.g. 'cnn workers=2')"
                             : fmt::format("'{}': unknown workload '{}' (cnn or lm; see `trainrx workloads`)", text,
                                           spec->workload));
  }
  // The preset first, wherever it was written, then the knobs in order (as the workload does).
  if (!spec->preset.empty()) {
    if (const Status st = spec->config.ApplyPreset(spec->preset); !st.ok())
      return Status::Error(fmt::format("'preset={}': {}", spec->preset, st.message()));
  }
  for (const auto& set : spec->sets) {
    if (!IsPercentage(set)) {
      if (const Status st = spec->config.Set(set); !st.ok())
        return Status::Error(fmt::format("'{}': {}", set, st.message()));
      continue;
    }
    if (KnobName(set) != "slowdown") return Status::Error(fmt::format("'{}': only slowdown accepts a percentage", set));
    const size_t eq = set.find('=');
    const std::string pct = eq == std::string::npos ? "" : set.substr(eq + 1, set.size() - eq - 2);
    char* end = nullptr;
    const double v = std::strtod(pct.c_str(), &end);
    if (pct.empty() || *end != '\0' || !(v >= 0))
      return Status::Error(fmt::format("'{}': expected slowdown=P% with P a number >= 0", set));
  }
  return Status::Ok();
}

void ResolvePercentages(Spec* spec, double median_ms, std::vector<std::string>* notes) {
  for (auto& set : spec->sets) {
    if (!IsPercentage(set)) continue;
    const double pct = std::strtod(set.substr(set.find('=') + 1).c_str(), nullptr);
    const std::string resolved = fmt::format("slowdown={:.0f}", median_ms * 1000 * pct / 100);
    notes->push_back(fmt::format("{} = {} us ({}% of the calibration median {:.2f} ms)", set, resolved.substr(9), pct,
                                 median_ms));
    SetBuilt(&spec->config, resolved);
    set = resolved;
  }
}

Spec WithoutPercentages(const Spec& spec) {
  Spec s = spec;
  std::erase_if(s.sets, IsPercentage);
  return s;
}

bool SwitchableDifference(const Spec& a, const Spec& b, std::vector<std::string>* alt) {
  alt->clear();
  // Ranks would have to switch arms on the same steps together: separate processes instead.
  if (a.workload != b.workload || a.nproc != 1 || b.nproc != 1) return false;
  bool switchable = true;
  for (const auto& [k, v] : a.config.values()) {
    if (b.config.Get(k) == v) continue;
    switchable = switchable && workloads::IsSwitchable(k);
    alt->push_back(k + "=" + b.config.Get(k));
  }
  // Percentages are resolved against a measured step before the comparison runs.
  if (a.HasPercentages() || b.HasPercentages()) return false;
  return switchable && !alt->empty();
}

}  // namespace trainrx::experiments
