// Each transform's predicted interval calibrated on its measured rows (issue 79.5), by split-conformal
// prediction (Vovk, Gammerman and Shafer 2005; Angelopoulos and Bates, "A Gentle Introduction to
// Conformal Prediction", 2021):
//   - a measured row is one fix predicted from a script's first run and measured by `trainrx fix`;
//     its score is how many points of the step its measured saving lay outside the predicted interval
//     (0 inside);
//   - with n rows, the margin at level L is the ceil((n + 1) L)-th smallest score; every interval of
//     that transform is widened by it on both sides. Where the rows and the next prediction are
//     exchangeable (the same kind of scripts and machines), at least L of the next measurements then
//     fall inside;
//   - fewer rows than that (ceil((n + 1) L) > n): no margin can reach L, and the interval stays the
//     replay's own range, said to be uncalibrated.
// The rows are those of the corpus's last run with today's transforms (bench/prediction; the table
// and command in docs/what-if.md): a transform changed since its rows were measured must be measured
// again, not calibrated on another's residuals.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "trainrx/analyzers/finding.h"

namespace trainrx::analyzers {

constexpr double kCalibrationLevel = 0.9;

struct TransformCalibration {
  const char* transform;
  std::vector<double> scores;  // one per measured row: points outside its interval (0: inside)
  const char* source;          // where and when they were measured
};

// The split-conformal margin of `scores` at `level`; nullopt: too few rows to reach it.
std::optional<double> ConformalMargin(std::vector<double> scores, double level);
// The rows n a level needs at least: the smallest n with ceil((n + 1) level) <= n.
size_t RowsForLevel(double level);
// nullptr: the transform has no measured rows to calibrate on.
const TransformCalibration* FindCalibration(std::string_view transform);
// A replayed prediction of one transform: its interval widened by the transform's margin, level set
// to kCalibrationLevel and the assumptions saying by how much and on what; otherwise (several fixes
// together, too few rows) level stays 0 and `calibration` says why the range is the replay's own.
void Calibrate(Prediction& p);

}  // namespace trainrx::analyzers
