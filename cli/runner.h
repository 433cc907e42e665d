// The experiment runner shared by fix / sweep / ab (experiment.cc) and the CI gate (gate.cc):
// runs workload trials as separate processes (without the probes), in-process A/B trials, and
// commands under `trainrx record`; shows progress with an ETA on a terminal.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "experiment.h"
#include "trainrx/analyzers/analysis.h"

namespace trainrx::cli {

int Fail(const std::string& msg);
std::string KnobName(const std::string& assignment);
// True when every knob that differs between a and b can switch between steps (in-process A/B);
// *alt receives B's values for them.
bool SwitchableDifference(const WorkloadSpec& a, const WorkloadSpec& b, std::vector<std::string>* alt);

class Progress {
 public:
  explicit Progress(int total);
  ~Progress();
  void Step(const std::string& what);

 private:
  int total_, done_ = 0;
  std::chrono::steady_clock::time_point start_;
  bool enabled_;
};

class Runner {
 public:
  Runner();
  ~Runner();
  std::vector<std::string> WorkloadArgs(const WorkloadSpec& s) const;
  bool Trial(const WorkloadSpec& s, double* ms, double* sps, std::string* error);
  // Appends every timed step's ms to *a / *b by arm, and per block of four steps (two of each)
  // log(mean B / mean A) to *log_ratios.
  bool AltTrial(const WorkloadSpec& s, const std::vector<std::string>& alt_sets, std::vector<double>* a,
                std::vector<double>* b, std::vector<double>* log_ratios, std::string* error);
  bool Analyze(const WorkloadSpec& s, analyzers::Report* report, double* seconds, std::string* error);
  bool Command(const std::string& cmd, double* value, std::string* unit, std::string* error);

 private:
  std::filesystem::path dir_;
};

bool Emit(const ExperimentOptions& o, const std::function<void(std::ostream&)>& text,
          const std::function<void(std::ostream&)>& json);

}  // namespace trainrx::cli
