// trainrx::experiments spec — a reference-workload configuration, parsed once.
//
// "cnn workers=0 anomaly=1" / "lm preset=seeds slowdown=5%": the workload, its preset and knob
// assignments (kept in order, for labels and the workload's command line) and the resolved,
// validated knob configuration every later step reads (no caller parses the strings again).
#pragma once

#include <string>
#include <vector>

#include "knobs.h"
#include "trainrx/profiler/status.h"

namespace trainrx::experiments {

struct Spec {
  std::string workload;
  std::string preset;
  std::vector<std::string> sets;  // "knob=value" as given; "slowdown=5%" until ResolvePercentages
  workloads::Config config;       // defaults, then the preset, then the sets (percentages left out)
  int nproc = 1;                  // local ranks ("nproc=N" in the text): N processes, Gloo, env://

  std::string Label() const;  // "cnn preset=seeds workers=2"
  bool HasPercentages() const;
  // The samples one optimizer step processes across the ranks: batch x micro-steps x ranks (a change
  // of it makes time a step the wrong yardstick: fix and ab then time per sample).
  int64_t SamplesPerStep() const;
  // This spec with one more assignment (already validated by the caller's plan); "nproc=N" sets
  // the ranks. An assignment the knob table refuses is a bug in the plan that built it:
  // std::logic_error (said as an internal error).
  Spec With(const std::string& assignment) const;
};

// Parses SPEC into *spec; an error on an unknown workload, preset, knob or value. Only `slowdown`
// takes a percentage ("slowdown=5%": a share of a measured step, see ResolvePercentages).
Status ParseSpec(const std::string& text, Spec* spec);

// Replaces "slowdown=P%" by "slowdown=<µs>" for a median step of `median_ms`; the notes say what
// each became.
void ResolvePercentages(Spec* spec, double median_ms, std::vector<std::string>* notes);
Spec WithoutPercentages(const Spec& spec);

std::string KnobName(const std::string& assignment);  // "workers=4" -> "workers"

// The knobs whose values differ between a and b, as b's assignments; true when there are some and
// every one can switch between steps (workloads::IsSwitchable): then A and B can be interleaved
// step by step inside one process.
bool SwitchableDifference(const Spec& a, const Spec& b, std::vector<std::string>* alt);

}  // namespace trainrx::experiments
