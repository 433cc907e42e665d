// trainrx::analyzers finding — what an analyzer reports: a Finding with its severity, confidence,
// evidence, estimated saving and fixes, and the order reports list them in (analysis.h).
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace trainrx::analyzers {

enum class Severity { kInfo, kLow, kMedium, kHigh };
enum class Confidence { kLow, kMedium, kHigh };
const char* SeverityName(Severity s);
const char* ConfidenceName(Confidence c);
// 1234567 -> "1.2 MB" (decimal units), for findings and reports alike.
std::string BytesText(double bytes);

struct EvidenceItem {
  std::string key;
  std::variant<int64_t, double, std::string> value;
};

// A fix's saving predicted by replaying the run's dependency graph with the fix's transform
// (analyzers/dependency/what_if.cc; docs/what-if.md): the mean step before and after, the saving as
// a share of the step with an interval (the transform's low and high assumptions, the steps' spread
// and the replay's own error on the unchanged trace).
struct Prediction {
  std::string method;     // "replay"; "not predictable" (assumptions say why); empty: none made
  std::string transform;  // the catalog's transform ("anomaly_off")
  double saving_pct = 0, low_pct = 0, high_pct = 0;  // of the mean step
  int64_t step_ns_before = 0, step_ns_after = 0;     // the measured mean step, the predicted one
  double replay_error_pct = 0;  // the unchanged graph replayed against the measured mean step
  std::string assumptions;      // plain words
  // The interval's coverage as calibrated on the transform's measured rows (0.9), or 0: the replay's
  // own range, uncalibrated; `calibration` says which and why (analyzers/dependency/calibration.h).
  double level = 0;
  double margin = 0;  // the points the replay's range was widened by on each side (level > 0)
  std::string calibration = "";
};

struct Finding {
  std::string id;  // stable, as docs/findings.md lists them: "sync.host_device"
  Severity severity = Severity::kLow;
  Confidence confidence = Confidence::kMedium;
  std::string title;
  int32_t rank = -1;  // -1: whole trace
  // The measured value beside its threshold, e.g. share of step 0.33 vs 0.05.
  double measured = 0;
  double threshold = 0;
  std::string measured_unit;  // "% of step", "per step", ...
  std::vector<EvidenceItem> evidence;
  std::vector<std::string> examples;  // ops / steps / streams where it was seen
  // Estimated saving: an upper bound from the trace (`trainrx fix` measures the real one), per
  // step as a mean over `steps` steps; without steps (`steps` 0) a total over the trace, with no
  // share of a step. It never exceeds `saving_bound_ns`, the measured time the fix would remove
  // (`saving_bound` says what: "GPU idle time", "time blocked in syncs"), nor the mean step.
  double estimated_saving_pct = 0;  // of the mean step; 0 without steps
  int64_t estimated_saving_ns = 0;
  int64_t saving_bound_ns = 0;
  std::string saving_bound;
  int64_t steps = 0;  // steps the per-step figures are means over; 0: figures are trace totals
  std::string fix_python;
  std::string fix_cpp;
  std::string knob;  // reference-workload knob that fixes it ("workers=4"), empty if none
  bool outside_fix = true;  // the catalog's outside fix (`fix --cmd`) acts on what was found (SetFix)
  std::string fix_variant;  // the catalog's fix variant the analyzer chose (SetFix; "": the first)
  Prediction predicted;  // the what-if replay's, where the fix has a transform
  // The share of the step a report ranks it by: the replay's prediction, else the estimated bound.
  double RankingPct() const { return predicted.method == "replay" ? predicted.saving_pct : estimated_saving_pct; }
};

// Ranks findings as the report lists them: by predicted saving where the replay made one, else the
// estimated saving (share of the step, then ns for traces without steps), then severity; stable.
void SortFindings(std::vector<Finding>& findings);

}  // namespace trainrx::analyzers
