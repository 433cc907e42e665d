// The real launcher: trials are processes of trainrx-workload WITHOUT the probes (`--no-trace`:
// we time the program, not the program under observation), each summarized by its median step
// time after warm-up (the workload's own step timer, the same boundaries as its trainrx::step#
// ranges); commands run under `trainrx record`.
#include <unistd.h>

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/analyzers/batch.h"
#include "trainrx/analyzers/compile.h"
#include "trainrx/experiments/launch_files.h"
#include "trainrx/experiments/launcher.h"
#include "trainrx/experiments/process.h"
#include "trainrx/experiments/ranks.h"
#include "trainrx/experiments/record.h"
#include "trainrx/experiments/run_result.h"
#include "trainrx/experiments/stats.h"
#include "trainrx/profiler/reader.h"
#include "trainrx/profiler/env.h"
#include "trainrx/sets/analyze_set.h"

namespace trainrx::experiments {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::vector<double> BlockLogRatios(const std::vector<char>& arms, const std::vector<double>& ms) {
  std::vector<double> out;
  for (size_t blk = 0; blk + 4 <= std::min(arms.size(), ms.size()); blk += 4) {
    double sa = 0, sb = 0;
    int na = 0, nb = 0;
    for (size_t i = blk; i < blk + 4; ++i) {
      if (arms[i] == 'B') sb += ms[i], ++nb;
      else sa += ms[i], ++na;
    }
    if (na > 0 && nb > 0 && sa > 0 && sb > 0) out.push_back(std::log((sb / nb) / (sa / na)));
  }
  return out;
}

Status ParseAltSteps(std::string_view text, const std::string& path, AltResult* out) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto e = parser.parse(simdjson::padded_string(text)).get(doc); e)
    return Status::Error(fmt::format("{}: not a readable in-process record: {}", path, simdjson::error_message(e)));
  std::string_view schema, stopped, token;
  simdjson::dom::array steps;
  if (doc["schema"].get(schema) != simdjson::SUCCESS || schema != "trainrx.alt/1" ||
      doc["steps"].get(steps) != simdjson::SUCCESS)
    return Status::Error(fmt::format("{}: expected \"schema\": \"trainrx.alt/1\" and a \"steps\" array", path));
  std::vector<char> arms;
  std::vector<double> ms;
  for (auto step : steps) {
    std::string_view arm;
    double v = 0;
    if (step["arm"].get(arm) != simdjson::SUCCESS || (arm != "A" && arm != "B") || step["ms"].get(v) != simdjson::SUCCESS ||
        !(v >= 0))
      return Status::Error(
          fmt::format("{}: steps[{}]: expected {{\"arm\": \"A\" or \"B\", \"ms\": a number >= 0}}", path, arms.size()));
    arms.push_back(arm[0]);
    ms.push_back(v);
  }
  if (doc["stopped"].get(stopped) == simdjson::SUCCESS && !stopped.empty()) {
    out->unpaired = std::string(stopped);
    if (doc["token"].get(token) == simdjson::SUCCESS) out->unpaired_token = std::string(token);
    return Status::Ok();
  }
  int64_t warmup = 0;
  if (doc["warmup"].get(warmup) != simdjson::SUCCESS) warmup = 0;
  if (ms.size() < static_cast<size_t>(kAltMinTimedSteps)) {
    out->unpaired = fmt::format("the script's own process ran {} optimizer step{} after its {} warm-up steps, fewer than "
                                "the {} (16 paired blocks of four) an in-process trial needs",
                                ms.size(), ms.size() == 1 ? "" : "s", warmup, kAltMinTimedSteps);
    return Status::Ok();
  }
  for (size_t i = 0; i < ms.size(); ++i) (arms[i] == 'B' ? out->b_ms : out->a_ms).push_back(ms[i]);
  const auto ratios = BlockLogRatios(arms, ms);
  out->log_ratios.insert(out->log_ratios.end(), ratios.begin(), ratios.end());
  profiler::CpuLoad cpu;  // the start-up hook's figures over the switched steps (absent: unmeasured)
  if (simdjson::dom::object o; doc["cpu"].get(o) == simdjson::SUCCESS)
    if (Status st = ParseCpuLoad(simdjson::minify(o), path, &cpu); !st.ok()) return st;
  out->cpu.push_back(cpu);
  return Status::Ok();
}

namespace {

// fix --cmd's in-process trials: steps the start-up hook leaves as they are before it switches (the
// first has lazy initialization and the allocator's growth; the probe records these, and only these,
// so the switched steps run unobserved as workload trials do).
constexpr int kCommandAltWarmup = 5;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A command's memory figures (issue 36), from the analysis of its recording: the memory of
// `rank`'s device with the largest peak (the GPU's on a CUDA run, else the CPU's heap samples or
// allocator events), when that device has a figure at two steps' starts or more.
void MemoryOfRank(const std::vector<analyzers::DeviceMemory>& memory, int32_t rank, TrialResult* out) {
  const analyzers::DeviceMemory* best = nullptr;
  for (const auto& m : memory)
    if (m.rank == rank && (best == nullptr || m.peak_allocated > best->peak_allocated)) best = &m;
  if (best == nullptr || best->growth_steps < 2) return;
  out->has_memory = true;
  out->memory_growth = best->growth_per_step;
  out->memory_peak = static_cast<double>(best->peak_allocated);
}

// The fixes as the start-up hook reads them (TRAINRX_FIX, TRAINRX_ALT_FIX): "a,b".
std::string Joined(const std::vector<std::string>& fixes) {
  std::string out;
  for (const auto& f : fixes) out += (out.empty() ? "" : ",") + f;
  return out;
}

class ProcessLauncher : public Launcher {
 public:
  ProcessLauncher(std::string bin_dir, const LauncherOptions& o)
      : bin_dir_(std::move(bin_dir)),
        memory_cap_(o.memory_cap_bytes),
        stop_after_steps_(o.trial_steps),
        analysis_steps_(o.analysis_steps),
        analysis_what_if_(o.analysis_what_if),
        record_(o.record) {
    dir_ = fs::temp_directory_path() / fmt::format("trainrx-exp-{}", getpid());
    std::error_code ec;
    fs::create_directories(dir_, ec);
  }
  ~ProcessLauncher() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  Status CanRunWorkloads() const override {
    if (fs::exists(Workload())) return Status::Ok();
    return Status::Error(
        fmt::format("{} not found: this trainrx was built without LibTorch (scripts/setup builds it)", Workload()));
  }

  StatusOr<TrialResult> Trial(const Spec& s) override {
    RunResult r;
    const auto t0 = Clock::now();
    TrialResult out;
    if (Status st = RunWorkload(s, {"--no-trace"}, "trial", &r); !st.ok()) {
      out.seconds = Since(t0);
      if (!OutOfMemoryResult(dir_ / "trial.log", &out)) return st;
      return out;
    }
    out.value = r.MsPerStep();
    out.samples_per_s = r.samples_per_s;
    out.ranks = s.nproc;
    for (const auto& step : r.steps) out.step_ms.push_back(step.ms);
    out.has_memory = MemoryOfRun(r, &out.memory_growth, &out.memory_peak);
    out.cpu = r.cpu;
    out.seconds = Since(t0);
    return out;
  }

  Status AltTrial(const Spec& s, const std::vector<std::string>& alt, AltResult* out) override {
    // No evaluation inside timed steps here: it would land in one arm's steps only. At least 64
    // timed steps (16 paired blocks) per process: power comes from the number of blocks.
    const int64_t steps = std::max<int64_t>(64, s.config.Int("steps"));
    std::vector<std::string> extra = {"--no-trace", "--set", "eval_every=0", "--set", "steps=" + std::to_string(steps)};
    for (const auto& set : alt) extra.insert(extra.end(), {"--alt-set", set});
    RunResult r;
    const auto t0 = Clock::now();
    if (Status st = RunWorkload(s, extra, "alt", &r); !st.ok()) return st;
    std::vector<char> arms;
    std::vector<double> ms;
    for (const auto& step : r.steps) {
      arms.push_back(step.arm);
      ms.push_back(step.ms);
      (step.arm == 'B' ? out->b_ms : out->a_ms).push_back(step.ms);
    }
    const auto ratios = BlockLogRatios(arms, ms);
    out->log_ratios.insert(out->log_ratios.end(), ratios.begin(), ratios.end());
    out->cpu.push_back(r.cpu);
    out->seconds += Since(t0);
    return Status::Ok();
  }

  Status Analyze(const Spec& s, analyzers::Report* report, double* seconds) override {
    const auto t0 = Clock::now();
    StatusOr<std::vector<std::string>> traces = TraceWorkload(s, "analysis");
    if (!traces.ok()) return traces.status();
    *seconds = Since(t0);
    return AnalyzeTraces(*traces, report);
  }

  // The command runs directly, split into words as a shell would, unless it needs a shell (pipes,
  // redirections, `;`, `&&`, variables): then under /bin/sh -c. Either way the traces read are
  // those of every process of the launch that loaded torch: a shell or launcher between writes none.
  StatusOr<TrialResult> Command(const std::string& cmd, const std::vector<std::string>& fixes) override {
    std::vector<std::string> traces;
    TrialResult result;
    if (Status st = Record(cmd, fixes, "cmd", stop_after_steps_, &traces, &result.seconds); !st.ok()) {
      if (!OutOfMemoryResult(dir_ / "cmd.log", &result)) return st;
      return result;
    }
    // A trace that was written and cannot be read fails the trial, naming the file: its run's time
    // is no measurement of its steps. A command none of whose processes loaded torch writes none:
    // then the whole run's time is the measurement ("s per run", said in the table's unit).
    profiler::Trace t;
    if (!traces.empty()) {
      if (Status st = profiler::ReadTraces(traces, t); !st.ok())
        return Status::Error(fmt::format("`{}`{}: its recording cannot be read, so the trial has no step times: {}", cmd,
                                         fixes.empty() ? "" : " (fixes: " + Joined(fixes) + ")", st.message()));
      // What the trial measures (steps, memory, CPU load), not the whole analysis (after the run:
      // not timed).
      const analyzers::Measurement measured = analyzers::Measure(t);
      const analyzers::StepModel& steps = measured.steps;
      // One process's steps (the lowest rank): ranks step together.
      std::vector<double> ms;
      const int32_t first_rank = steps.steps.empty() ? 0 : steps.steps.front().rank;
      for (const auto& s : steps.steps)
        if (s.rank == first_rank) ms.push_back(s.wall_ns / 1e6);
      result.compile_s = static_cast<double>(analyzers::CompileTimeNs(t, first_rank)) / 1e9;
      result.ranks = std::max<int>(1, static_cast<int>(t.ranks.size()));
      MemoryOfRank(measured.memory, first_rank, &result);
      for (const auto& c : measured.cpu_load)
        if (c.rank == first_rank) result.cpu = c.load;
      if (ms.size() >= 3) {
        ms.erase(ms.begin());
        result.value = stats::Mean(ms);  // what throughput follows (launcher.h, TrialResult::value)
        result.step_ms = ms;
        result.unit = "ms per step";
        if (const auto batch = analyzers::SamplesPerStep(t, steps)) {
          const std::string micro = batch->micro_steps > 1
                                        ? fmt::format(", {} micro-batches of {} a step", batch->micro_steps, batch->micro_batch)
                                        : std::string();
          const int64_t tokens = analyzers::TokensPerSample(*batch);
          result.samples_per_step = static_cast<double>(batch->samples * std::max<int64_t>(tokens, 1));
          if (tokens > 0) result.throughput_unit = "tokens";
          result.samples_from =
              tokens > 0 ? fmt::format("input shapes: {} sequences of {} tokens a step, {}'s indices{} ({} of {} steps with "
                                       "shapes)",
                                       batch->samples, tokens, batch->op, micro, batch->steps, batch->steps_with_shapes)
                         : fmt::format("input shapes: dim 0 of {}'s input{} ({} of {} steps with shapes)", batch->op, micro,
                                       batch->steps, batch->steps_with_shapes);
        }
        return result;
      }
    }
    result.value = result.seconds;
    result.unit = "s per run";
    return result;
  }

  // The command under `trainrx record --steps <warm-up>` (the probe records the warm-up only: the
  // switched steps run unobserved; no module ranges or marks, nobody reads this trace), its start-up
  // hook switching `fixes` between steps (TRAINRX_ALT_FIX) and writing the timed steps to a file.
  // No TRAINRX_FIX: A is the script as it is. The user's own TRAINRX_STOP_AFTER_STEPS still applies.
  Status CommandAlt(const std::string& cmd, const std::vector<std::string>& fixes, AltResult* out) override {
    const fs::path result = dir_ / "alt.steps.json";
    std::error_code ec;
    fs::remove(result, ec);
    RecordOptions o;
    StatusOr<RecordLaunch> launch = PrepareRecordOf(cmd, "alt", std::to_string(kCommandAltWarmup), &o);
    if (!launch.ok()) return launch.status();
    const std::string joined = Joined(fixes);
    std::vector<EnvChange>& env = launch->process.env;
    env.insert(env.end(), {{env::kFix, "", EnvChange::kUnset},
                           {env::kModules, "0", EnvChange::kSet},
                           {env::kMarks, "0", EnvChange::kSet},
                           {env::kAltFix, joined, EnvChange::kSet},
                           {env::kAltResult, result.string(), EnvChange::kSet},
                           {env::kAltWarmup, std::to_string(kCommandAltWarmup), EnvChange::kSet},
                           {env::kAltSteps, std::to_string(kAltMinTimedSteps), EnvChange::kSet}});
    const auto t0 = Clock::now();
    std::vector<std::string> traces;
    const StatusOr<int> run = RunRecord(o, *launch, &traces);
    out->seconds += Since(t0);
    if (!run.ok()) return run.status();
    if (const int rc = *run; rc != 0)
      return Status::Error(fmt::format("`{}` (switching {} in-process): exited with {}: {}", cmd, joined, rc,
                                       LogTail(launch->process.log)));
    simdjson::padded_string text;
    if (simdjson::padded_string::load(result.string()).get(text) != simdjson::SUCCESS) {
      out->unpaired = "no step was switched: the command's own process ran no torch.optim step (a shell or launcher "
                      "runs the training in another process, or it has no torch.optim), or it left without Python's exit "
                      "handlers";
      return Status::Ok();
    }
    return ParseAltSteps(std::string_view(text.data(), text.size()), result.string(), out);
  }

  StatusOr<sets::SetAnalysis> TracedRun(const std::string& what, bool command) override {
    const std::string name = fmt::format("explain{}", traced_runs_++);
    Spec s;
    if (!command)
      if (Status st = ParseSpec(what, &s); !st.ok()) return st;
    double seconds = 0;
    // A command's explaining run ends after the analysis run's steps, as `fix --cmd`'s analysis run
    // does (issue 81.2: a script whose default is 40 epochs was recorded to its end, for hours,
    // after `ab` had decided in minutes).
    analysis_stopped_ = false;
    const StatusOr<std::vector<std::string>> traces =
        command ? RecordSome(what, name, analysis_steps_, &seconds) : TraceWorkload(s, name);
    if (!traces.ok()) return traces.status();
    if (command) analysis_stopped_ = StoppedAtStepLimit(name);
    sets::SetAnalysis out;
    if (Status st = sets::AnalyzeSet(*traces, {}, &out); !st.ok()) return st;
    return out;
  }

  Status AnalyzeCommand(const std::string& cmd, analyzers::Report* report, double* seconds) override {
    analysis_stopped_ = false;
    StatusOr<std::vector<std::string>> traces = RecordSome(cmd, "analysis", analysis_steps_, seconds);
    if (!traces.ok()) return traces.status();
    analysis_stopped_ = StoppedAtStepLimit("analysis");
    sets::SetOptions options;
    options.what_if = analysis_what_if_;
    return AnalyzeTraces(*traces, report, options);
  }
  int64_t AnalysisStoppedAfter() const override { return analysis_stopped_ ? analysis_steps_ : 0; }
  void SetCommandTrialSteps(int64_t steps) override { stop_after_steps_ = steps; }

 private:
  // The traces of one run, analyzed as `trainrx analyze` would (sets::AnalyzeSet).
  static Status AnalyzeTraces(const std::vector<std::string>& traces, analyzers::Report* report,
                              const sets::SetOptions& options = {}) {
    sets::SetAnalysis set;
    if (Status st = sets::AnalyzeSet(traces, options, &set); !st.ok()) return st;
    *report = std::move(set.report);
    return Status::Ok();
  }

  std::string Workload() const { return bin_dir_ + "/trainrx-workload"; }

  // One traced run of a workload spec (its ranks' traces with nproc > 1) into `name`.json: the
  // traces it wrote. Analyze and TracedRun share it.
  StatusOr<std::vector<std::string>> TraceWorkload(const Spec& s, const std::string& name) {
    const std::string trace = (dir_ / (name + ".json")).string();
    RunResult r;
    if (s.nproc <= 1) {
      if (Status st = RunWorkload(s, {"-o", trace}, name, &r); !st.ok()) return st;
      return std::vector<std::string>{trace};
    }
    std::vector<std::string> traces;
    if (Status st = RunRanks(s, trace, {}, name, &traces, &r); !st.ok()) return st;
    return traces;
  }

  // Whether the recording `name` was ended by the analysis step limit: the start-up hook says so in
  // its log when it ends the run there (probes/python/sitecustomize.py).
  bool StoppedAtStepLimit(const std::string& name) const {
    return analysis_steps_ > 0 &&
           LogTail((dir_ / (name + ".log")).string(), 65536).find(env::kStepStopLine) != std::string::npos;
  }

  // A command recorded that must leave a trace (AnalyzeCommand, TracedRun).
  StatusOr<std::vector<std::string>> RecordSome(const std::string& cmd, const std::string& name, int64_t stop,
                                                double* seconds) {
    std::vector<std::string> traces;
    if (Status st = Record(cmd, {}, name, stop, &traces, seconds); !st.ok()) return st;
    if (traces.empty())
      return Status::Error(fmt::format("`{}`: wrote no trace: it never loaded torch (see `trainrx record`)", cmd));
    return traces;
  }

  // A trial that failed: true when its log says it ran out of memory and the plan accepts that,
  // with *out an out-of-memory result; else false (the failure stands).
  bool OutOfMemoryResult(const fs::path& log, TrialResult* out) const {
    if (!accepts_out_of_memory()) return false;
    // The error is the last thing a dying run prints (a traceback's last lines).
    const OutOfMemory oom = FindOutOfMemory(LogTail(log.string(), 8192));
    if (!oom.found) return false;
    out->out_of_memory = true;
    out->oom_request_bytes = oom.request_bytes;
    out->oom_message = oom.line;
    return true;
  }

  // The command recorded as `trainrx record -o <name>.json` records it (the library's PrepareRecord
  // and FinishRecord: no CLI between), run directly (split into words as a shell would) unless it
  // needs a shell (pipes, redirections, `;`, `&&`, variables): then under /bin/sh -c. Either way
  // *traces are this launch's traces of every process that loaded torch: a shell or launcher
  // between writes none. `stop` > 0: the run ends after that many steps (TRAINRX_STOP_AFTER_STEPS,
  // unless the user set it: 0 there means whole runs).
  Status Record(const std::string& cmd, const std::vector<std::string>& fixes, const std::string& name, int64_t stop,
                std::vector<std::string>* traces, double* seconds) {
    RecordOptions o;
    StatusOr<RecordLaunch> launch = PrepareRecordOf(cmd, name, "", &o);
    if (!launch.ok()) return launch.status();
    const std::string joined = Joined(fixes);
    if (Status st = CheckHookForFixes(joined, bin_dir_); !st.ok()) return st;
    std::vector<EnvChange>& env = launch->process.env;
    env.push_back({env::kFix, joined, joined.empty() ? EnvChange::kUnset : EnvChange::kSet});
    if (stop > 0) env.push_back({env::kStopAfterSteps, std::to_string(stop), EnvChange::kSetIfUnset});
    const auto t0 = Clock::now();
    const StatusOr<int> run = RunRecord(o, *launch, traces);
    *seconds = Since(t0);
    if (!run.ok()) return run.status();
    if (const int rc = *run; rc != 0)
      return Status::Error(fmt::format("`{}`{}: exited with {}: {}", cmd, joined.empty() ? "" : " (fixes: " + joined + ")",
                                       rc, LogTail(launch->process.log)));
    return Status::Ok();
  }

  // The recording of `cmd` into <name>.json made ready (*o: its options), its output and the
  // recording's own lines in <name>.log, under the memory cap. `steps`: the probe's step window
  // ("": the default).
  StatusOr<RecordLaunch> PrepareRecordOf(const std::string& cmd, const std::string& name, const std::string& steps,
                                         RecordOptions* o) const {
    *o = record_;
    o->output = (dir_ / (name + ".json")).string();
    o->steps = steps;
    o->memory_cap_bytes = memory_cap_;
    const std::vector<std::string> words = SplitCommand(cmd);
    o->command = words.empty() ? std::vector<std::string>{"/bin/sh", "-c", cmd} : words;
    StatusOr<RecordLaunch> launch = PrepareRecord(*o, bin_dir_);
    if (!launch.ok()) return launch.status();
    launch->process.log = (dir_ / (name + ".log")).string();
    return launch;
  }

  // Runs a prepared recording and collects its traces (FinishRecord's lines appended to its log):
  // the program's exit code.
  static StatusOr<int> RunRecord(const RecordOptions& o, const RecordLaunch& launch, std::vector<std::string>* traces) {
    const StatusOr<int> run = RunProcess(launch.process);
    if (!run.ok()) return run;
    std::ofstream log(launch.process.log, std::ios::app);
    *traces = FinishRecord(o, launch, *run, log);
    return run;
  }

  // The spec's ranks (nproc > 1) as one job: the result is the job's, its step (median, mean) the slowest
  // rank's (the others wait for it at each all-reduce) and its throughput the sum of the ranks'.
  Status RunRanks(const Spec& s, const std::string& output, const std::vector<std::string>& extra, const std::string& name,
                  std::vector<std::string>* traces, RunResult* r) {
    RankLaunch how;
    how.output = output;
    how.scratch = (dir_ / name).string();
    how.extra = extra;
    std::vector<RunResult> ranks;
    int rc = 0;
    if (const Status st = LaunchRanks(Workload(), s, s.nproc, how, traces, &ranks, &rc); !st.ok())
      return rc > 0 ? Status::Error(fmt::format("{}: {}", s.Label(), st.message())) : st;
    *r = ranks.front();
    r->samples_per_s = 0;
    for (const auto& k : ranks) {
      r->median_step_ms = std::max(r->median_step_ms, k.median_step_ms);
      r->mean_step_ms = std::max(r->mean_step_ms, k.mean_step_ms);
      r->samples_per_s += k.samples_per_s;
    }
    return Status::Ok();
  }

  Status RunWorkload(const Spec& s, const std::vector<std::string>& extra, const std::string& name, RunResult* r) {
    if (s.nproc > 1) {
      std::vector<std::string> no_traces;
      return RunRanks(s, "", extra, name, &no_traces, r);
    }
    const std::string result = (dir_ / (name + ".result.json")).string(), log = (dir_ / (name + ".log")).string();
    std::error_code ec;
    fs::remove(result, ec);
    ProcessSpec p;
    p.argv = {Workload(), s.workload};
    if (!s.preset.empty()) p.argv.insert(p.argv.end(), {"--preset", s.preset});
    for (const auto& set : s.sets) p.argv.insert(p.argv.end(), {"--set", set});
    p.argv.insert(p.argv.end(), extra.begin(), extra.end());
    p.argv.insert(p.argv.end(), {"--result", result});
    p.env = {{env::kQuiet, "1", EnvChange::kSetIfUnset}};
    p.log = log;
    p.data_limit_bytes = memory_cap_;
    const StatusOr<int> run = RunProcess(p);
    if (!run.ok()) return run.status();
    if (const int rc = *run; rc != 0) return Status::Error(fmt::format("{}: exited with {}: {}", s.Label(), rc, LogTail(log)));
    return ReadRunResult(result, r);
  }

  std::string bin_dir_;
  uint64_t memory_cap_ = 0;
  int64_t stop_after_steps_ = 0;  // a command's trials end after this many optimizer steps; 0: whole runs
  int64_t analysis_steps_ = 0;    // and its analysis run after this many
  std::vector<std::string> analysis_what_if_;  // transforms the analysis run's replay predicts too
  RecordOptions record_;          // the recordings' fixed options (the probe's torch, trainrx's sources)
  bool analysis_stopped_ = false;
  int traced_runs_ = 0;
  fs::path dir_;
};

}  // namespace

std::unique_ptr<Launcher> MakeProcessLauncher(const std::string& bin_dir, const LauncherOptions& options) {
  return std::make_unique<ProcessLauncher>(bin_dir, options);
}

}  // namespace trainrx::experiments
