// A scripted Launcher for the experiment plans (tests/experiments/plans_test.cc and
// bench/experiments_aa_bench.cc): each configuration's step time is a function of its knobs plus
// seeded noise (a process's own speed, shared by its steps, and each step's), so a caller knows the
// true effect and checks what a plan concludes. No process, no torch.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "trainrx/experiments/launcher.h"
#include "trainrx/experiments/plans.h"
#include "trainrx/experiments/spec.h"

namespace trainrx::experiments::fake {

inline TrialResult Cmd(double value, std::string unit, double seconds, double samples_per_step = 0, std::string from = "") {
  TrialResult c;
  c.value = value, c.unit = std::move(unit), c.seconds = seconds;
  c.samples_per_step = samples_per_step, c.samples_from = std::move(from);
  return c;
}

class FakeLauncher : public Launcher {
 public:
  // True median step time of a configuration; default: 10 ms, +5 ms with anomaly, +2 ms with
  // workers=0, +1 ms with item_every_step, + slowdown µs.
  std::function<double(const workloads::Config&)> step_ms = [](const workloads::Config& c) {
    return 10.0 + (c.Bool("anomaly") ? 5 : 0) + (c.Int("workers") == 0 ? 2 : 0) + (c.Bool("item_every_step") ? 1 : 0) +
           c.Double("slowdown") / 1000.0;
  };
  double process_noise = 0.05;  // sd of one process's speed (log), shared by all its steps
  double step_noise = 0.01;     // sd of a step around its process (log)
  double seconds_per_trial = 2;
  // The steps a trial times (TrialResult::step_ms), each step_noise around its process; drawn from
  // a stream of their own, so the trials' medians are the same whatever this is.
  int steps_per_trial = 20;
  // When set, workload trials measure memory: this growth a step (bytes) and a peak of 50 MB plus
  // 20 steps of it, each with 20 kB of noise.
  std::function<double(const workloads::Config&)> growth_bytes;
  // When set, what each workload trial (and each in-process run) got of the CPUs, by call number.
  std::function<profiler::CpuLoad(int call)> cpu_load;
  analyzers::Report analysis;
  std::map<std::string, TrialResult> commands;
  std::function<double(const std::string&, const std::vector<std::string>&)> command_ms;
  std::vector<std::vector<std::string>> fix_sets;  // per Command call
  bool workloads_available = true;
  int trials = 0, alt_trials = 0, analyses = 0;
  int64_t analysis_stopped_after = 0;  // what AnalysisStoppedAfter says
  int64_t command_trial_steps = -2;    // what SetCommandTrialSteps was told last (-2: never)
  std::vector<std::string> calls;  // labels, in call order

  void Reseed(uint64_t seed) { rng_.seed(seed), alt_rng_.seed(seed + 1), step_rng_.seed(seed + 2); }

  Status CanRunWorkloads() const override {
    return workloads_available ? Status::Ok() : Status::Error("trainrx-workload not found");
  }
  StatusOr<TrialResult> Trial(const Spec& s) override {
    ++trials;
    calls.push_back(s.Label());
    TrialResult out;
    out.value = step_ms(s.config) * std::exp(Noise(process_noise));
    out.samples_per_s = static_cast<double>(s.config.Int("batch")) * 1000.0 / out.value;
    out.step_ms = Steps(out.value);
    out.seconds = seconds_per_trial;
    if (cpu_load) out.cpu = cpu_load(trials + alt_trials);
    if (growth_bytes) {
      out.has_memory = true;
      out.memory_growth = growth_bytes(s.config) + 20e3 * Noise(1);
      out.memory_peak = 50e6 + 20 * out.memory_growth + 20e3 * Noise(1);
    }
    return out;
  }
  Status AltTrial(const Spec& s, const std::vector<std::string>& alt, AltResult* out) override {
    ++alt_trials;
    calls.push_back(s.Label() + " ~ alt");
    Spec b = s;
    for (const auto& a : alt) b = b.With(a);
    // Its own noise stream: how many in-process trials ran (they stop when decided) leaves the
    // noise of the trials across processes as it was.
    const double process = std::exp(Noise(process_noise, alt_rng_));
    std::vector<char> arms;
    std::vector<double> ms;
    static const char kPattern[] = {'A', 'B', 'B', 'A', 'B', 'A', 'A', 'B'};
    for (int i = 0; i < 64; ++i) {
      const char arm = kPattern[i % 8];
      const double v = step_ms(arm == 'B' ? b.config : s.config) * process * std::exp(Noise(step_noise, alt_rng_));
      arms.push_back(arm);
      ms.push_back(v);
      (arm == 'B' ? out->b_ms : out->a_ms).push_back(v);
    }
    const auto r = BlockLogRatios(arms, ms);
    out->log_ratios.insert(out->log_ratios.end(), r.begin(), r.end());
    out->seconds += seconds_per_trial;
    if (cpu_load) out->cpu.push_back(cpu_load(trials + alt_trials));
    return Status::Ok();
  }
  // fix --cmd's in-process trials: 64 steps A B B A / B A A B of command_ms without and with the
  // tokens; a command-wide reason (alt_unpaired) or a token the script sets itself (alt_overwritten)
  // is reported instead, as the start-up hook's record would be.
  std::string alt_unpaired;
  std::map<std::string, std::string> alt_overwritten;
  std::vector<std::vector<std::string>> alt_fix_sets;  // per CommandAlt call
  Status CommandAlt(const std::string& cmd, const std::vector<std::string>& fixes, AltResult* out) override {
    alt_fix_sets.push_back(fixes);
    out->seconds += seconds_per_trial;
    if (!alt_unpaired.empty() || !command_ms) {
      out->unpaired = command_ms ? alt_unpaired : "the fake launcher has no command_ms";
      return Status::Ok();
    }
    for (const auto& f : fixes) {
      if (auto it = alt_overwritten.find(f); it != alt_overwritten.end()) {
        out->unpaired = it->second, out->unpaired_token = f;
        return Status::Ok();
      }
    }
    const double process = std::exp(Noise(process_noise, alt_rng_));
    std::vector<char> arms;
    std::vector<double> ms;
    static const char kPattern[] = {'A', 'B', 'B', 'A', 'B', 'A', 'A', 'B'};
    for (int i = 0; i < kAltMinTimedSteps; ++i) {
      const char arm = kPattern[i % 8];
      const double v = command_ms(cmd, arm == 'B' ? fixes : std::vector<std::string>()) * process *
                       std::exp(Noise(step_noise, alt_rng_));
      arms.push_back(arm);
      ms.push_back(v);
      (arm == 'B' ? out->b_ms : out->a_ms).push_back(v);
    }
    const auto r = BlockLogRatios(arms, ms);
    out->log_ratios.insert(out->log_ratios.end(), r.begin(), r.end());
    return Status::Ok();
  }
  Status Analyze(const Spec&, analyzers::Report* report, double* seconds) override {
    ++analyses;
    *report = analysis;
    *seconds = seconds_per_trial;
    return Status::Ok();
  }
  Status AnalyzeCommand(const std::string& cmd, analyzers::Report* report, double* seconds) override {
    ++analyses;
    calls.push_back(cmd);
    *report = analysis;
    *seconds = seconds_per_trial;
    return Status::Ok();
  }
  int64_t AnalysisStoppedAfter() const override { return analysis_stopped_after; }
  void SetCommandTrialSteps(int64_t steps) override { command_trial_steps = steps; }
  StatusOr<TrialResult> Command(const std::string& cmd, const std::vector<std::string>& fixes) override {
    fix_sets.push_back(fixes);
    if (command_ms) {  // a script whose step time depends on the fixes applied from outside
      TrialResult out = Cmd(command_ms(cmd, fixes) * std::exp(Noise(process_noise)), "ms per step", seconds_per_trial);
      out.step_ms = Steps(out.value);
      return out;
    }
    auto it = commands.find(cmd);
    if (it == commands.end()) return Status::Error("no such command: " + cmd);
    TrialResult out = it->second;
    out.value *= std::exp(Noise(process_noise));
    return out;
  }

 private:
  double Noise(double sd) { return Noise(sd, rng_); }
  std::vector<double> Steps(double median) {
    std::vector<double> v(static_cast<size_t>(std::max(0, steps_per_trial)));
    for (auto& x : v) x = median * std::exp(Noise(step_noise, step_rng_));
    return v;
  }
  double Noise(double sd, std::mt19937_64& rng) { return sd > 0 ? sd * normal_(rng) : 0; }
  std::mt19937_64 rng_{7}, alt_rng_{8}, step_rng_{9};
  std::normal_distribution<double> normal_{0, 1};
};

inline Spec MustParse(const std::string& text) {
  Spec s;
  // A spec the caller wrote wrong is its own bug: said and stopped.
  if (const Status st = ParseSpec(text, &s); !st.ok()) {
    fmt::print(stderr, "MustParse(\"{}\"): {}\n", text, st.message());
    std::abort();
  }
  return s;
}

inline analyzers::Finding FindingWithKnob(const std::string& id, const std::string& knob) {
  analyzers::Finding f;
  f.id = id;
  f.knob = knob;
  f.estimated_saving_pct = 10;
  return f;
}

}  // namespace trainrx::experiments::fake
