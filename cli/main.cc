// trainrx — the command. Thin: parses arguments, calls the libraries, maps errors to exit codes.
// Exit codes: 0 success, 2 usage or input error (file named in the message).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "experiment.h"
#include "gate.h"
#include "record.h"
#include "run.h"
#include "sample_trace.h"
#include "terminal.h"
#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/env.h"
#include "trainrx/profiler/kineto_reader.h"
#include "trainrx/profiler/kineto_writer.h"
#include "trainrx/profiler/trace_names.h"
#include "trainrx/analyzers/diff.h"
#include "trainrx/reports/diff.h"
#include "trainrx/reports/html.h"
#include "trainrx/reports/report.h"
#include "trainrx/sets/analyze_set.h"

namespace {

using trainrx::cli::Fail;
using trainrx::cli::kExitInputError;
using trainrx::cli::kExitOk;

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// "1.5G" -> 1610612736 (K, M, G: powers of 1024; a plain number: bytes). False unless positive.
bool ParseBytes(const std::string& text, uint64_t* out) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    return false;
  }
  std::string unit = text.substr(used);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (!unit.empty() && (unit.back() == 'i')) unit.pop_back();
  const double scale = unit.empty() ? 1 : unit == "K" || unit == "k" ? 1024.0 : unit == "M" || unit == "m" ? 1048576.0
                                       : unit == "G" || unit == "g" ? 1073741824.0 : 0;
  if (scale == 0 || !(v > 0) || v * scale > 1e18) return false;
  *out = static_cast<uint64_t>(v * scale);
  return true;
}

// `analyze` options for the set (sets::SetOptions): --strict, --keep-clocks, --per-rank.
trainrx::sets::SetOptions g_set;

int RunAnalyze(const std::vector<std::string>& paths, bool sample, const std::string& format, const std::string& output,
               const std::vector<std::string>& threshold_args, const std::vector<std::string>& run_json = {},
               const std::vector<std::string>& run_summary = {}) {
  using namespace trainrx;
  sets::SetOptions set_options = g_set;
  for (const auto& t : threshold_args) {
    std::string error;
    if (!set_options.thresholds.Parse(t, &error)) return Fail(error);
  }
  if (format != "text" && format != "json" && format != "md" && format != "html")
    return Fail("--format must be text, json, md or html");
  if (sample && !paths.empty()) return Fail("give trace paths or --sample, not both");
  if (!sample && paths.empty()) return Fail("analyze needs at least one trace file or directory (or --sample)");
  sets::SetAnalysis set;
  std::string error;
  const bool ok = sample ? sets::AnalyzeBuffer(cli::SampleTrace(), cli::kSampleTraceName, set_options, &set, &error)
                         : sets::AnalyzeSet(paths, set_options, &set, &error);
  if (!ok) return Fail(error);
  reports::RenderOptions options;
  options.inputs = sample ? std::vector<std::string>{std::string("built-in sample: ") + cli::kSampleTraceName} : paths;
  options.run_results_json = run_json;
  options.run_summary = run_summary;
  const auto render = [&](std::ostream& out) {
    options.color = &out == &std::cout && isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr;
    if (format == "json") reports::WriteJson(set.trace, set.report, set_options.thresholds, options, out);
    else if (format == "html") reports::WriteHtml(set.trace, set.report, set_options.thresholds, options, out);
    else if (format == "md") reports::WriteMarkdown(set.trace, set.report, set_options.thresholds, options, out);
    else reports::WriteText(set.trace, set.report, set_options.thresholds, options, out);
  };
  if (!cli::WriteOut(output, render)) return Fail(output + ": write failed");
  return kExitOk;
}

// `trainrx diff A B`: each side a trace, a set of rank traces or a recorded run, analyzed as
// `analyze` would, then compared (analyzers::DiffRuns).
int RunDiff(const std::string& a, const std::string& b, const std::string& format, const std::string& output) {
  using namespace trainrx;
  sets::SetAnalysis sa, sb;
  std::string error;
  if (!sets::AnalyzeSet({a}, g_set, &sa, &error) || !sets::AnalyzeSet({b}, g_set, &sb, &error)) return Fail(error);
  const analyzers::RunDiff d = analyzers::DiffRuns(sa.trace, sa.report, a, sb.trace, sb.report, b);
  const auto render = [&](std::ostream& out) {
    if (format == "json") reports::WriteDiffJson(d, out);
    else reports::WriteDiffText(d, out, format == "md");
  };
  if (!cli::WriteOut(output, render)) return Fail(output + ": write failed");
  return kExitOk;
}

int RunSummarize(const std::vector<std::string>& paths, const std::string& out_dir,
                 const std::vector<std::string>& threshold_args) {
  using namespace trainrx;
  analyzers::Thresholds thresholds;
  std::string error;
  for (const auto& t : threshold_args)
    if (!thresholds.Parse(t, &error)) return Fail(error);
  std::vector<sets::WrittenSummary> written;
  if (!sets::SummarizeSet(paths, thresholds, out_dir, &written, &error)) return Fail(error);
  for (const auto& w : written)
    std::cerr << fmt::format("rank {} ({}): {} steps, {} collectives, {} findings -> {}\n", w.rank, w.source, w.steps,
                             w.collectives, w.findings, w.path);
  return kExitOk;
}

int RunConvert(const std::vector<std::string>& paths, const std::string& output) {
  using namespace trainrx;
  profiler::Trace trace;
  if (const auto st = profiler::ReadTraces(paths, trace); !st.ok) return Fail(st.error);
  if (!g_set.keep_clocks) {
    for (const auto& c : analyzers::AlignRankClocks(trace))
      if (c.status != "reference") std::cerr << fmt::format("rank {}: {}\n", c.rank, c.why);
  }
  const auto ranks = trace.RankIds();
  for (int32_t rank : ranks) {
    // Several ranks: one file each, named as a launch's ranks name theirs ("out.rank1.json").
    const std::string path = ranks.size() > 1 ? profiler::RankTracePath(output, rank) : output;
    if (const auto st = profiler::WriteKinetoFile(trace, rank, path); !st.ok) return Fail(st.error);
    std::cerr << fmt::format("wrote rank {} to {}\n", rank, path);
  }
  return kExitOk;
}

}  // namespace

int Main(int argc, char** argv) {
  CLI::App app{"trainrx: profiler and performance doctor for PyTorch / LibTorch training loops"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "trainrx " TRAINRX_VERSION);

  std::vector<std::string> paths, thresholds;
  std::string format = "text", output;
  bool sample = false;
  auto* analyze = app.add_subcommand("analyze", "Analyze PyTorch-profiler (Kineto/Chrome) traces: findings, evidence, fixes");
  analyze->add_option("paths", paths, "trace files (.json, .json.gz) or directories of per-rank traces");
  analyze->add_option("--format", format, "text | json | md | html (one self-contained file: plots, tables, timeline)")
      ->check(CLI::IsMember({"text", "json", "md", "html"}));
  analyze->add_option("-o,--output,--report", output, "write the report here instead of stdout");
  analyze->add_option("--threshold", thresholds, "override a threshold: id.key=value (repeatable)");
  analyze->add_flag("--strict", g_set.strict,
                    "traces of different jobs or inconsistent ranks in one input, or a trace cut off inside its events, "
                    "are an error (exit 2), not a warning");
  analyze->add_flag("--keep-clocks", g_set.keep_clocks,
                    "leave each rank's times as recorded (by default ranks on different clocks are aligned on the ends "
                    "of the collectives they share, when those support it; the report says how)");
  analyze->add_flag("--per-rank", g_set.per_rank,
                    "analyze each rank's trace on its own and compare the ranks (memory: one trace per core, not the "
                    "set); automatic above 16 files and for per-rank summaries");
  analyze->add_option("--step", g_set.step_name,
                      "the training step as you name it: a record_function range name, or a Python function "
                      "(with_stack traces: \"train.py(57): NAME\"); every such range is a step");
  analyze->add_flag("--sample", sample, "analyze the built-in sample trace (a CPU training loop with planted problems)");

  std::string diff_a, diff_b, diff_format = "text", diff_out;
  auto* diff = app.add_subcommand("diff", "Why B differs from A: step time by phase, operator, kernel, configuration "
                                          "and findings, each change per step");
  diff->add_option("a", diff_a, "run A: a trace file or a directory of rank traces")->required();
  diff->add_option("b", diff_b, "run B")->required();
  diff->add_option("--format", diff_format, "text | md | json")->check(CLI::IsMember({"text", "md", "json"}));
  diff->add_option("-o,--output,--report", diff_out, "write the report here instead of stdout");

  std::vector<std::string> convert_paths;
  std::string convert_out;
  auto* convert = app.add_subcommand("convert", "Read any supported trace and write Kineto JSON (opens in Perfetto / HTA)");
  convert->add_option("paths", convert_paths, "trace files or directories")->required();
  convert->add_option("-o,--output", convert_out, "output file (.json or .json.gz); per-rank suffix when several ranks")
      ->required();
  convert->add_flag("--keep-clocks", g_set.keep_clocks, "write each rank's times as recorded (no clock alignment)");

  std::vector<std::string> summarize_paths, summarize_thresholds;
  std::string summarize_out;
  auto* summarize = app.add_subcommand(
      "summarize", "Analyze each rank's trace where it is and write a small per-rank summary (rank-R.summary.json): "
                   "`trainrx analyze` of the summaries does the cross-rank analyses");
  summarize->add_option("paths", summarize_paths, "trace files or directories (this node's ranks)")->required();
  summarize->add_option("-o,--output", summarize_out, "directory for the summaries")->required();
  summarize->add_option("--threshold", summarize_thresholds, "override a threshold: id.key=value (repeatable)");

  trainrx::cli::RecordOptions record_options;
  record_options.torch_lib = TRAINRX_PROBE_TORCH_LIB;
  record_options.torch_version = TRAINRX_PROBE_TORCH_VERSION;
  auto* record = app.add_subcommand(
      "record", "Run a command with the probes attached (no code change) and write a Kineto-compatible trace");
  record->add_option("-o,--output", record_options.output, "trace file to write (.json or .json.gz)");
  record->add_flag("--analyze", record_options.analyze, "analyze the trace(s) when the command ends");
  std::string record_format = "text", record_report;
  record->add_option("--format", record_format, "with --analyze: text | json | md | html")
      ->check(CLI::IsMember({"text", "json", "md", "html"}));
  record->add_option("--report", record_report, "with --analyze: write the report here instead of stdout");
  record->add_option("--probe-dir", record_options.probe_dir,
                     "directory of the probe to attach (built for the program's torch; default: next to trainrx)");
  record->add_option("--steps", record_options.steps,
                     "steps to record, then the run goes on unrecorded (default 200; all: every step)")
      ->check([](const std::string& v) {
        int64_t steps = 0;
        return trainrx::env::ParseStepCount(v.c_str(), &steps) ? std::string()
                                                              : "expected a step count (1 or more) or all, got " + v;
      });
  record->add_option("--skip", record_options.skip, "steps to run unrecorded before the recorded ones (default 0)")
      ->check(CLI::NonNegativeNumber);
  record->add_flag("-v,--verbose", record_options.verbose, "let the probes report what they do on stderr");
  std::string record_memory_cap;
  record->add_option("--memory-cap", record_memory_cap,
                     "run the program under this much writable memory (RLIMIT_DATA: 1.5G, 800M): the CPU stand-in for a "
                     "device's capacity; the report's memory headroom is measured against it");
  record->add_option("command", record_options.command, "the command to run, after --")->required();
  record->allow_extras(false);

  auto* workloads = app.add_subcommand("workloads", "List the reference workloads, their knobs (with the finding each fixes) and presets");
  trainrx::cli::RunOptions run_options;
  auto* run = app.add_subcommand("run", "Run a reference workload under the probes and analyze it");
  run->add_option("workload", run_options.workload, "cnn | lm")->required();
  run->add_option("--set", run_options.sets, "knob=value (repeatable; see `trainrx workloads`)");
  run->add_option("--preset", run_options.preset, "a named configuration (see `trainrx workloads`)");
  run->add_option("--nproc", run_options.nproc, "local ranks (torch.distributed c10d, env:// on 127.0.0.1)");
  run->add_option("-o,--output", run_options.output, "trace path (default trainrx_<workload>.json; .rank<R> per rank)");
  run->add_option("--format", format, "text | json | md | html")->check(CLI::IsMember({"text", "json", "md", "html"}));
  run->add_option("--report", output, "write the report here instead of stdout");
  run->add_option("--threshold", thresholds, "override a threshold: id.key=value (repeatable)");

  trainrx::cli::ExperimentOptions exp;
  std::string fix_workload, fix_preset;
  std::vector<std::string> fix_sets;
  auto add_common = [&](CLI::App* c) {
    c->add_option("--trials", exp.plan.trials, "trials per configuration (default 5; at least 4)");
    c->add_option("--seed", exp.plan.seed, "seed of the randomized interleaving");
    c->add_option("--format", exp.format, "text | md | json | html")->check(CLI::IsMember({"text", "md", "json", "html"}));
    c->add_option("-o,--report", exp.output, "write the report here instead of stdout");
  };
  auto* fix = app.add_subcommand("fix", "Run a workload, find its problems, rerun with each fix and report the measured speedups");
  std::string fix_cmd;
  fix->add_option("workload", fix_workload, "cnn | lm (or --cmd)");
  fix->add_option("--cmd", fix_cmd, "a user's command: analyze it, apply each fix from outside the script, measure");
  fix->add_option("--set", fix_sets, "knob=value (repeatable)");
  fix->add_option("--preset", fix_preset, "a named configuration (see `trainrx workloads`)");
  int fix_nproc = 1;
  fix->add_option("--nproc", fix_nproc, "local ranks of the workload (Gloo), for the dist.* findings")->check(CLI::Range(1, 64));
  fix->add_option("--budget", exp.plan.budget_s,
                  "seconds for all trials (default 900; 0: no limit): fewer trials (never below 4) when the plan "
                  "would take longer, and the bound on extra rounds for inconclusive rows");
  add_common(fix);
  std::vector<std::string> grids;
  auto* sweep = app.add_subcommand("sweep", "Run every combination of knob values; median step time and throughput with CIs");
  std::string sweep_cmd;
  sweep->add_option("workload", fix_workload, "cnn | lm (or --cmd)");
  sweep->add_option("--cmd", sweep_cmd, "a command template: \"python3 train.py --workers {workers}\" with --grid workers=0,2,4");
  sweep->add_option("--grid", grids, "knob=v1,v2,... (repeatable; the product is run)")->required();
  sweep->add_option("--samples-per-step", exp.plan.samples_per_step,
                    "--cmd: samples each step processes, from the grid: \"{batch}\" or \"{batch}*{accum}\" (default: read "
                    "from the recorded input shapes); cells then rank by samples per second");
  std::string memory_cap;
  sweep->add_option("--memory-cap", memory_cap,
                    "run every trial under this much writable memory (RLIMIT_DATA: 1.5G, 800M): the CPU stand-in for a "
                    "device's capacity; a cell that runs out of memory is a result");
  sweep->add_option("--set", fix_sets, "fixed knob=value for every cell (repeatable)");
  sweep->add_option("--preset", fix_preset, "a named base configuration");
  sweep->add_option("--nproc", fix_nproc, "local ranks of the workload (Gloo)")->check(CLI::Range(1, 64));
  add_common(sweep);
  std::string ab_a, ab_b;
  bool ab_cmd = false;
  auto* ab = app.add_subcommand("ab", "Compare two configurations (or commands) with interleaved trials");
  ab->add_option("--a", ab_a, "SPEC: a workload with knobs, e.g. \"cnn amp=off\" (or a command with --cmd)")->required();
  ab->add_option("--b", ab_b, "SPEC: e.g. \"cnn slowdown=5%\"")->required();
  ab->add_flag("--cmd", ab_cmd, "A and B are shell commands, run under `trainrx record`");
  ab->add_option("--explain", exp.plan.explain,
                 "after the trials, one traced run of each side diffed to say why: auto (when the difference is "
                 "significant), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  add_common(ab);

  trainrx::cli::GateOptions gate;
  gate.run.torch_version = TRAINRX_PROBE_TORCH_VERSION;
  double tolerance_pct = 3, undetected_pct = 10, fail_margin_pct = -1;
  auto* gate_cmd = app.add_subcommand("gate", "CI performance regression gate (exit 0 pass, 1 regression, 2 error, 3 inconclusive)");
  gate_cmd->require_subcommand(1);
  auto spec_opts = [&](CLI::App* c) {
    c->add_flag("--cmd", gate.run.command, "the SPEC is a shell command (run under `trainrx record`)");
    c->add_option("--trials", gate.run.trials, "trials per side (default 6; at least 4)");
    c->add_option("spec", gate.spec, "after --: a workload with knobs (cnn workers=2) or, with --cmd, a command");
  };
  auto* rb = gate_cmd->add_subcommand("record-baseline", "Run trials of SPEC and store them as the baseline");
  rb->add_option("-o,--output", gate.output, "baseline file (JSON)")->required();
  spec_opts(rb);
  auto* gc = gate_cmd->add_subcommand("check", "Compare SPEC (or --current FILE) with the baseline: pass / fail / inconclusive");
  gc->add_option("--baseline", gate.baseline, "baseline file")->required();
  gc->add_option("--current", gate.current, "compare against this recorded file instead of running SPEC");
  gc->add_option("--budget", gate.run.budget_s, "seconds: keep adding trials while inconclusive, up to this");
  gc->add_option("--tolerance", tolerance_pct, "percent: slowdowns below this do not fail (default 3)");
  gc->add_option("--max-undetected", undetected_pct, "percent: pass needs the CI to rule out a regression this large (default 10)");
  gc->add_option("--fail-margin", fail_margin_pct,
                 "percent: fail needs the CI's lower bound above this slowdown (default: half the tolerance)");
  gc->add_option("--inconclusive", gate.inconclusive, "exit code for inconclusive: error (3), pass (0) or fail (1)")
      ->check(CLI::IsMember({"error", "pass", "fail"}));
  gc->add_flag("--strict", gate.run.strict, "a fingerprint mismatch is an error (exit 2), not a warning");
  gc->add_flag("--stored", gate.run.stored_only, "compare with the stored samples; never re-run the baseline spec");
  gc->add_option("--explain", gate.run.explain,
                 "after a fail, one traced run of the baseline's command and of this one, diffed: auto (on a fail), "
                 "always, never (needs --same-job re-runs: stored samples have no code to trace)")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  gc->add_flag("--same-job", gate.run.same_job,
               "the baseline's program or arguments differ from SPEC's but they are one job (e.g. the main branch's "
               "build against this one); without it such a check is an error (exit 2)");
  gc->add_option("--format", gate.format, "text | md | junit | json | html")
      ->check(CLI::IsMember({"text", "md", "junit", "json", "html"}));
  gc->add_option("-o,--report", gate.report, "write the report here instead of stdout");
  spec_opts(gc);
  auto* st = gate_cmd->add_subcommand("self-test", "Measure the gate's false-alarm and detection rates on this machine");
  st->add_option("--repeats", gate.repeats, "gate decisions per case (default 20)");
  st->add_option("--slowdowns", gate.self_test_pcts, "injected slowdowns in % (0 = A/A; default 0 5 10)")->delimiter(',');
  st->add_flag("--across-processes", gate.across_processes,
               "A and B in separate processes (--trials per side, interleaved; the two-sample rule) instead of paired "
               "blocks in one process");
  st->add_flag("--compare-rules", gate.compare_rules,
               "also judge the same samples by other rules (the CI only above 1, the rule before; alpha 0.01; the CI "
               "above the tolerance) and print their rates beside the gate's");
  spec_opts(st);

  // A mistyped command names itself (CLI11 alone says "A subcommand is required").
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const auto* c : app.get_subcommands([](CLI::App*) { return true; })) names.push_back(c->get_name());
    if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      std::string all, near;
      size_t best = 3;  // suggest within two edits
      for (const auto& n : names) {
        all += (all.empty() ? "" : ", ") + n;
        if (const size_t d = EditDistance(argv[1], n); d < best) best = d, near = n;
      }
      return Fail(fmt::format("unknown command '{}'{}; the commands are {}", argv[1],
                              near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near), all));
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ExtrasError& e) {
    // Issue 34: `record -o run.json python3 train.py --epochs 1` said only "arguments were not
    // expected": the program's own options need the -- before the program.
    if (record->parsed())
      return Fail(fmt::format("record: {}; put the program after --, e.g. trainrx record -o run.json -- python3 "
                              "train.py --epochs 1",
                              e.what()));
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kExitInputError;
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kExitInputError;
  }
  if (*analyze) return RunAnalyze(paths, sample, format, output, thresholds);
  if (*convert) return RunConvert(convert_paths, convert_out);
  if (*diff) return RunDiff(diff_a, diff_b, diff_format, diff_out);
  if (*summarize) return RunSummarize(summarize_paths, summarize_out, summarize_thresholds);
  if (*workloads) return trainrx::cli::ListWorkloads(std::cout);
  if (*fix && !fix->count("--budget")) exp.plan.budget_s = 900;
  if (!memory_cap.empty() && !ParseBytes(memory_cap, &exp.plan.memory_cap_bytes))
    return Fail(fmt::format("--memory-cap: '{}' is not a size (e.g. 1.5G, 800M, 1048576)", memory_cap));
  if ((*fix && !fix_cmd.empty()) || (*sweep && !sweep_cmd.empty())) {
    if (!fix_workload.empty() || !fix_sets.empty() || !fix_preset.empty())
      return Fail("--cmd replaces the workload: give a command or a workload with --set/--preset, not both");
    return *fix ? trainrx::cli::RunFixCommand(fix_cmd, exp) : trainrx::cli::RunSweepCommand(sweep_cmd, grids, exp);
  }
  if ((*fix || *sweep) && fix_workload.empty()) return Fail("give a workload (cnn, lm) or --cmd COMMAND");
  if (*fix || *sweep) {
    std::string text = fix_workload + (fix_preset.empty() ? "" : " preset=" + fix_preset);
    for (const auto& s : fix_sets) text += " " + s;
    if (fix_nproc > 1) text += " nproc=" + std::to_string(fix_nproc);
    return *fix ? trainrx::cli::RunFix(text, exp) : trainrx::cli::RunSweep(text, grids, exp);
  }
  if (*ab) return trainrx::cli::RunAb(ab_a, ab_b, ab_cmd, exp);
  if (*gate_cmd) {
    gate.run.rule.tolerance = tolerance_pct / 100;
    gate.run.rule.max_undetected = undetected_pct / 100;
    gate.run.rule.fail_ci_margin = fail_margin_pct >= 0 ? fail_margin_pct / 100 : gate.run.rule.tolerance / 2;
    if (*rb) return trainrx::cli::GateRecordBaseline(gate);
    if (*gc) return trainrx::cli::GateCheck(gate);
    return trainrx::cli::GateSelfTest(gate);
  }
  if (*run) {
    return trainrx::cli::RunWorkload(run_options, [&](const std::vector<std::string>& traces,
                                                      const std::vector<std::string>& run_json,
                                                      const std::vector<std::string>& summary) {
      return RunAnalyze(traces, false, format, output, thresholds, run_json, summary);
    });
  }
  if (*record) {
    if (!record_options.analyze && (record->count("--format") > 0 || !record_report.empty()))
      return Fail("record: --format and --report describe the analysis: add --analyze");
    if (!record_memory_cap.empty() && !ParseBytes(record_memory_cap, &record_options.memory_cap_bytes))
      return Fail(fmt::format("--memory-cap: '{}' is not a size (e.g. 1.5G, 800M, 1048576)", record_memory_cap));
    return trainrx::cli::RunRecord(record_options, [&](const std::vector<std::string>& traces) {
      return RunAnalyze(traces, false, record_format, record_report, thresholds);
    });
  }
  return kExitInputError;
}

// A bug (an analyzer asking for an unregistered threshold, ...) is said as one, with its own exit
// code, never as a crash dump or as the user's input error.
int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "trainrx: internal error: " << e.what() << " (a bug in trainrx: please report it with the command)\n";
    return 70;
  }
}
