// The gate's in-process comparison decided process by process (gate_sequential.h), and `gate
// self-test` through it, with a simulated launcher: each process has its own speed, each step its
// own noise, and B's steps carry an absolute slowdown (busy microseconds, as the workload's
// `slowdown` knob), so the true effect of every decision is known.
#include "trainrx/experiments/gate_sequential.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

#include "trainrx/reports/gate.h"

namespace trainrx::experiments {
namespace {

class SimLauncher : public Launcher {
 public:
  double base_ms = 20;
  double process_noise = 0.05;  // sd of one process's speed (log), shared by its steps
  double step_noise = 0.05;     // sd of a step around its process (log)
  int alt_trials = 0;

  Status CanRunWorkloads() const override { return Status::Ok(); }
  StatusOr<TrialResult> Trial(const Spec&) override {
    TrialResult out;
    out.value = base_ms;
    out.seconds = 1;
    return out;
  }
  Status AltTrial(const Spec&, const std::vector<std::string>& alt, AltResult* out) override {
    return Simulate(alt, "slowdown=", out);
  }
  // A command's in-process trial: the start-up hook's slowdown_us token plants B's slowdown.
  Status CommandAlt(const std::string& command, const std::vector<std::string>& fixes, AltResult* out) override {
    commands.push_back(command);
    if (cannot_switch) {
      out->unpaired = "no step was switched";
      return Status::Ok();
    }
    return Simulate(fixes, "slowdown_us=", out);
  }
  StatusOr<TrialResult> Command(const std::string& command, const std::vector<std::string>&) override {
    commands.push_back(command);
    return Trial(Spec{});
  }
  std::vector<std::string> commands;
  bool cannot_switch = false;

  Status Simulate(const std::vector<std::string>& alt, const std::string& knob, AltResult* out) {
    ++alt_trials;
    double slow_us = 0;
    for (const auto& a : alt)
      if (a.rfind(knob, 0) == 0) slow_us = std::stod(a.substr(knob.size()));
    const double process = base_ms * std::exp(process_noise * normal_(rng_));
    std::vector<char> arms;
    std::vector<double> ms;
    static const char kPattern[] = {'A', 'B', 'B', 'A', 'B', 'A', 'A', 'B'};
    for (int i = 0; i < 64; ++i) {
      const char arm = kPattern[i % 8];
      const double v = (process + (arm == 'B' ? slow_us / 1000 : 0)) * std::exp(step_noise * normal_(rng_));
      arms.push_back(arm);
      ms.push_back(v);
      (arm == 'B' ? out->b_ms : out->a_ms).push_back(v);
    }
    const auto r = BlockLogRatios(arms, ms);
    out->log_ratios.insert(out->log_ratios.end(), r.begin(), r.end());
    out->seconds += 1;
    return Status::Ok();
  }
  Status Analyze(const Spec&, analyzers::Report*, double*) override { return No(); }
  Status AnalyzeCommand(const std::string&, analyzers::Report*, double*) override { return No(); }

 private:
  static Status No() { return Status::Error("not simulated"); }
  std::mt19937_64 rng_{11};
  std::normal_distribution<double> normal_{0, 1};
};

Spec Cnn() {
  Spec s;
  const Status st = ParseSpec("cnn", &s);
  EXPECT_TRUE(st.ok()) << st.message();
  return s;
}

// A clear A/A passes and a clear 10 % slowdown fails after one or two processes of the six the
// fixed design ran; a change between the tolerance and the pass bound is not passed early.
TEST(GateSequentialTest, ClearCasesStopEarly) {
  SimLauncher l;
  Status st;
  SequentialGateResult aa, slow;
  ASSERT_TRUE((st = DecideInProcessSequentially(l, Cnn(), {"slowdown=0"}, 6, GateRule{}, &aa)).ok()) << st.message();
  EXPECT_EQ(aa.verdict, GateVerdict::kPass);
  EXPECT_LE(aa.processes, 2);
  EXPECT_LT(aa.metrics.front().ci_high, 1.03);  // passed early: the interval is under the tolerance
  ASSERT_TRUE((st = DecideInProcessSequentially(l, Cnn(), {"slowdown=2000"}, 6, GateRule{}, &slow)).ok())
      << st.message();
  EXPECT_EQ(slow.verdict, GateVerdict::kFail);
  EXPECT_LE(slow.processes, 2);
  EXPECT_GT(slow.level, 0.95);  // decided at an early look's stricter level
  // DecideLook: before the last look an interval below 1 + max_undetected but not below 1 +
  // tolerance stays open; at the last look the rule's own pass applies.
  std::mt19937_64 rng(3);
  std::normal_distribution<double> n(std::log(1.05), 0.04);
  MetricSamples m{"step time", "ms", false, {20}, {21}, {}};
  for (int i = 0; i < 16; ++i) m.paired_log_ratios.push_back(n(rng));
  std::vector<MetricDecision> d;
  GateRule rule;
  rule.tolerance = 0.10;  // a 5 % change is under the tolerance: never a fail
  rule.max_undetected = 0.20;
  EXPECT_EQ(DecideLook(m, rule, 0.002, false, &d), GateVerdict::kPass);  // upper end < 1.10
  rule.tolerance = 0.03;
  EXPECT_NE(DecideLook(m, rule, 0.002, false, &d), GateVerdict::kPass);  // upper end > 1.03: not early
}

// `gate self-test` through the simulated launcher: A/A false alarms at most 1 in 20 and a 5 %
// slowdown detected at least 80 % of the time, with fewer processes per decision than the fixed
// design's `trials` (6). Measured here (seed 11, 5 % noise per step and per process): A/A 0/200
// false alarms at 2.6 processes per decision, 5 % failed 200/200 at 2.4, 10 % 200/200 at 1.0
// (the fixed design: 6 each).
TEST(GateSequentialTest, SelfTestKeepsItsRatesInFewerProcesses) {
  SimLauncher l;
  GateRun run;
  run.spec = "cnn";
  run.trials = 6;
  Progress quiet;
  SelfTestReport r;
  const Status st = SelfTest(run, {0, 5, 10}, 200, false, l, quiet, &r);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(r.cases.size(), 3u);
  const auto& aa = r.cases[0];
  const auto& five = r.cases[1];
  const auto& ten = r.cases[2];
  std::printf("sequential gate self-test (simulated): A/A fail %d/%d (%.1f processes per decision), 5%% fail %d/%d "
              "(%.1f), 10%% fail %d/%d (%.1f); the fixed design ran %d per decision\n",
              aa.fail, aa.repeats, aa.processes / 200.0, five.fail, five.repeats, five.processes / 200.0, ten.fail,
              ten.repeats, ten.processes / 200.0, run.trials);
  EXPECT_LE(aa.fail, 200 / 20);
  EXPECT_GE(five.fail, 160);
  EXPECT_GE(ten.fail, 190);
  for (const auto& c : r.cases) EXPECT_LT(c.processes, 200 * run.trials / 2) << c.name;
  std::ostringstream text;
  reports::WriteSelfTestText(r, run, 200, false, text);
  EXPECT_NE(text.str().find("processes per decision"), std::string::npos) << text.str();
}

// `gate self-test --cmd` (issue 85): a user's script, its slowdown planted in-process by the start-up
// hook (slowdown_us, the calibration run's median step times the case's share), decided by the same
// sequential design; a script that cannot switch is an error naming why, not a rate.
TEST(GateSequentialTest, SelfTestOfACommandPlantsTheSlowdownInTheScriptsOwnSteps) {
  SimLauncher l;
  GateRun run;
  run.spec = "python3 train.py --steps 80";
  run.command = true;
  run.trials = 6;
  Progress quiet;
  SelfTestReport r;
  Status st = SelfTest(run, {0, 5}, 100, false, l, quiet, &r);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(r.cases.size(), 2u);
  EXPECT_LE(r.cases[0].fail, 5);
  EXPECT_GE(r.cases[1].fail, 80);
  EXPECT_EQ(r.cases[1].pass, 0);  // a 5 % slowdown is never passed: a pass rules out the tolerance
  for (const auto& c : l.commands) EXPECT_EQ(c, run.spec);
  EXPECT_NEAR(100 * r.cases[1].estimates.front(), 5, 2.5);
  l.cannot_switch = true;
  st = SelfTest(run, {5}, 2, false, l, quiet, &r);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot plant a slowdown in-process: no step was switched"), std::string::npos) << st.message();
  st = SelfTest(run, {5}, 2, true, l, quiet, &r);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--across-processes is for workloads"), std::string::npos) << st.message();
}

// Looks at every process keep the false-alarm rate: the same A/A samples judged by the fixed rule
// (alpha 0.05) after every process would fail more often than the sequential design does.
TEST(GateSequentialTest, LookingAfterEveryProcessAtTheFixedLevelWouldAlarmMore) {
  SimLauncher l;
  l.step_noise = 0.10;
  GateRule loose;  // a rule that fails on any significant slowdown: false alarms become visible
  loose.tolerance = 0;
  loose.fail_ci_margin = 0;
  int sequential = 0, naive = 0;
  std::string error;
  for (int s = 0; s < 300; ++s) {
    loose.seed = static_cast<uint64_t>(s + 1);
    loose.resamples = 500;
    SequentialGateResult seq;
    const Status st = DecideInProcessSequentially(l, Cnn(), {"slowdown=0"}, 6, loose, &seq);
    ASSERT_TRUE(st.ok()) << st.message();
    sequential += seq.verdict == GateVerdict::kFail;
    AltResult alt;
    bool failed = false;
    for (int k = 0; k < 6 && !failed; ++k) {
      ASSERT_TRUE(l.AltTrial(Cnn(), {"slowdown=0"}, &alt).ToBool(&error));
      failed = Overall(DecideGate({{"step time", "ms", false, alt.a_ms, alt.b_ms, alt.log_ratios}}, loose)) ==
               GateVerdict::kFail;
    }
    naive += failed;
  }
  std::printf("A/A with tolerance 0: sequential %d/300 fails, every process at 0.05: %d/300\n", sequential, naive);
  EXPECT_LE(sequential, 300 * 0.05);
  EXPECT_GT(naive, sequential);
}

}  // namespace
}  // namespace trainrx::experiments
