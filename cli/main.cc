// trainrx — the command. Thin: parses arguments, calls the libraries, maps errors to exit codes.
// Exit codes: 0 success, 2 usage or input error (file named in the message).
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include "exe_dir.h"
#include "experiment.h"
#include "gate.h"
#include "sample_trace.h"
#include "terminal.h"
#include "trainrx/analyzers/catalog.h"
#include "trainrx/analyzers/diff.h"
#include "trainrx/experiments/record.h"
#include "trainrx/experiments/watch.h"
#include "trainrx/exports/tables.h"
#include "trainrx/experiments/workload_run.h"
#include "trainrx/profiler/env.h"
#include "trainrx/profiler/json_writer.h"
#include "trainrx/reports/diff.h"
#include "trainrx/reports/format.h"
#include "trainrx/reports/output.h"
#include "trainrx/reports/report.h"
#include "trainrx/reports/workloads.h"
#include "trainrx/sets/analyze_set.h"
#include "trainrx/sets/convert.h"

namespace {

using namespace trainrx;
using cli::Fail;
using cli::kExitInputError;
using cli::kExitOk;
using Paths = std::vector<std::string>;
namespace fs = std::filesystem;

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

// Every subcommand's options, filled by CLI11 (`run` reuses analyze's report options, `sweep`
// fix's workload options, fix / sweep / ab share the experiment options).
struct Args {
  sets::SetOptions set;  // analyze's --strict, --keep-clocks, --per-rank, --step (convert: --keep-clocks)
  Paths paths, thresholds;
  std::string format = "text", output;
  bool sample = false;
  std::string diff_a, diff_b, diff_format = "text", diff_out;
  Paths convert_paths, summarize_paths, summarize_thresholds;
  std::string convert_out, summarize_out;
  Paths export_paths, export_thresholds;
  std::string export_out, export_format = "parquet", export_run;
  experiments::RecordOptions record;
  std::string record_format = "text", record_report, record_memory_cap;
  experiments::WatchOptions watch;
  std::string capture_dir;
  int capture_steps = 0;
  experiments::WorkloadRun run;
  cli::ExperimentOptions exp;
  std::string fix_workload, fix_preset, fix_cmd, sweep_cmd, memory_cap, ab_a, ab_b;
  Paths fix_sets, grids;
  int fix_nproc = 1;
  bool ab_cmd = false;
  cli::GateOptions gate;
  double tolerance_pct = 3, undetected_pct = -1, fail_margin_pct = -1;
};

// The subcommands, once added.
struct Commands {
  CLI::App *analyze, *diff, *convert, *summarize, *exp, *record, *watch, *capture, *workloads, *run, *fix, *sweep, *ab, *gate,
      *rb, *gc, *st;
};

int RunAnalyze(const Paths& paths, bool sample, const std::string& format, const std::string& output,
               const sets::SetOptions& set, const Paths& threshold_args, const Paths& run_json = {},
               const Paths& run_summary = {}) {
  sets::SetOptions set_options = set;
  for (const auto& t : threshold_args)
    if (Status st = set_options.thresholds.Parse(t); !st.ok()) return Fail("--threshold " + t, st.message());
  for (std::string& w : set_options.what_if) {
    StatusOr<std::string> name = analyzers::ResolveWhatIf(w);
    if (!name.ok()) return Fail(name.status());
    w = *name;
  }
  if (!reports::IsReportFormat(format)) return Fail("--format " + format, "expected text, json, md or html");
  if (sample && !paths.empty()) return Fail("analyze", "give trace paths or --sample, not both");
  if (!sample && paths.empty()) return Fail("analyze", "expected at least one trace file or directory (or --sample)");
  sets::SetAnalysis s;
  const Status st = sample ? sets::AnalyzeBuffer(cli::SampleTrace(), cli::kSampleTraceName, set_options, &s)
                            : sets::AnalyzeSet(paths, set_options, &s);
  if (!st.ok()) return Fail(st);
  reports::RenderOptions options;
  options.inputs = sample ? Paths{std::string("built-in sample: ") + cli::kSampleTraceName} : paths;
  options.run_results_json = run_json;
  options.run_summary = run_summary;
  const auto render = [&](std::ostream& out) {
    options.color = &out == &std::cout && isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr;
    reports::WriteReport(format, s.trace, s.report, set_options.thresholds, options, out);
  };
  if (Status st = reports::WriteOut(output, render); !st.ok()) return Fail(st);
  return kExitOk;
}

// `trainrx diff A B`: each side a trace, a set of rank traces or a recorded run, analyzed as
// `analyze` would, then compared (analyzers::DiffRuns).
int RunDiff(const Args& a) {
  sets::SetAnalysis sa, sb;
  if (Status st = sets::AnalyzeSet({a.diff_a}, a.set, &sa); !st.ok()) return Fail(st);
  if (Status st = sets::AnalyzeSet({a.diff_b}, a.set, &sb); !st.ok()) return Fail(st);
  const analyzers::RunDiff d = analyzers::DiffRuns(sa.trace, sa.report, a.diff_a, sb.trace, sb.report, a.diff_b);
  if (Status st = reports::WriteOut(a.diff_out, [&](std::ostream& out) { reports::WriteDiff(a.diff_format, d, out); });
      !st.ok())
    return Fail(st);
  return kExitOk;
}

int RunSummarize(const Args& a) {
  analyzers::Thresholds thresholds;
  for (const auto& t : a.summarize_thresholds)
    if (Status st = thresholds.Parse(t); !st.ok()) return Fail("--threshold " + t, st.message());
  std::vector<sets::WrittenSummary> written;
  if (Status st = sets::SummarizeSet(a.summarize_paths, thresholds, a.summarize_out, &written); !st.ok()) return Fail(st);
  for (const auto& w : written)
    std::cerr << fmt::format("rank {} ({}): {} steps, {} collectives, {} findings -> {}\n", w.rank, w.source, w.steps,
                             w.collectives, w.findings, w.path);
  return kExitOk;
}

// `trainrx export`: the set's tables under DIR (exports/tables.h), one line per table on stderr.
int RunExport(const Args& a) {
  exports::ExportOptions o;
  o.set = a.set;
  o.run = a.export_run;
  for (const auto& t : a.export_thresholds)
    if (Status st = o.set.thresholds.Parse(t); !st.ok()) return Fail("--threshold " + t, st.message());
  auto sink = exports::OpenSink(a.export_format, cli::ExeDir());
  if (!sink.ok()) return Fail(sink.status());
  exports::ExportSummary summary;
  if (Status st = exports::ExportSet(a.export_paths, o, a.export_out, **sink, &summary); !st.ok()) return Fail(st);
  std::cerr << fmt::format("run {}: {} ranks from {} files ({}) -> {}/<table>/run={}/\n", summary.run, summary.ranks,
                           summary.files, sets::StrategyName(summary.strategy), a.export_out, summary.run);
  for (const auto& [table, rows] : summary.rows) std::cerr << fmt::format("  {:<14} {:>10} rows\n", table, rows);
  return kExitOk;
}

// --memory-cap TEXT into *bytes (left as it is when TEXT is empty).
Status ParseCap(const std::string& text, uint64_t* bytes) {
  const StatusOr<uint64_t> cap = text.empty() ? StatusOr<uint64_t>(*bytes) : experiments::ParseBytes(text);
  if (cap.ok()) *bytes = *cap;
  return cap.status();
}

// `trainrx record`: the program's exit code, or 2 when nothing was recorded; with --analyze the
// analysis's code when the program succeeded.
int RunRecord(const Args& a, bool format_given) {
  if (!a.record.analyze && (format_given || !a.record_report.empty()))
    return Fail("record", "--format and --report describe the analysis: add --analyze");
  experiments::RecordOptions options = a.record;
  if (Status st = ParseCap(a.record_memory_cap, &options.memory_cap_bytes); !st.ok()) return Fail(st);
  experiments::RecordResult r;
  if (Status st = experiments::RecordCommand(options, cli::ExeDir(), std::cerr, &r); !st.ok()) return Fail(st);
  if (r.traces.empty()) return r.code != 0 ? r.code : kExitInputError;
  if (options.analyze) {
    const int rc = RunAnalyze(r.traces, false, a.record_format, a.record_report, a.set, a.thresholds);
    if (rc != 0 && r.code == 0) return rc;
  }
  return r.code;
}

// The watcher's SIGTERM goes to the job (the terminal's Ctrl-C reaches it directly, as with record).
pid_t g_watched = -1;
void ForwardToWatched(int sig) {
  if (g_watched > 0) kill(g_watched, sig);
}

// A finished capture analyzed into its folder (report.txt, report.json, report.html); its first
// finding said on stderr.
void AnalyzeCapture(const experiments::Capture& c, const Args& a) {
  const fs::path folder(c.folder);
  std::cerr << fmt::format("trainrx watch: {} ({})\n", folder.filename().string(), c.reason);
  if (!c.unfinished.empty())
    std::cerr << fmt::format("trainrx watch: {}: not finished by {}: the job ended inside it (killed?) or its files could not "
                             "be written (a full disk?){}\n",
                             folder.filename().string(), c.unfinished,
                             c.traces.empty() ? "; nothing to analyze" : "; the finished ranks' traces are analyzed");
  if (c.traces.empty()) {
    std::ofstream(folder / "report.json") << fmt::format("{{\"skipped\": true, \"unfinished\": {}}}\n",
                                                         profiler::JsonWriter::Quote(c.unfinished));
    return;
  }
  for (const char* format : {"text", "html", "json"}) {  // json last: its file marks the capture done
    const std::string out = (folder / (std::string("report.") + (std::string(format) == "text" ? "txt" : format))).string();
    if (RunAnalyze(c.traces, false, format, out, a.set, a.thresholds) != kExitOk) {
      std::cerr << fmt::format("trainrx watch: {}: the analysis failed (above)\n", folder.filename().string());
      std::ofstream(folder / "report.json") << "{\"analysis_failed\": true}\n";
      return;
    }
  }
  if (Status st = experiments::PublishFindings(folder.string()); !st.ok())
    std::cerr << fmt::format("trainrx watch: {}\n", st.message());
  std::ifstream text(folder / "report.txt");
  bool in_findings = false;
  std::string warning;  // the report's first (an out-of-memory capture's: the failure)
  for (std::string line; std::getline(text, line);) {
    if (line.rfind("Findings", 0) == 0) in_findings = true;
    else if (in_findings && line.find("1. [") != std::string::npos) {
      std::cerr << "trainrx watch:   first finding:" << line.substr(line.find("1. [") + 2) << "\n";
      return;
    } else if (const size_t at = line.find("WARNING: "); warning.empty() && at != std::string::npos)
      warning = line.substr(at + 9);
  }
  std::cerr << "trainrx watch:   no finding" << (warning.empty() ? "" : "; the report warns: " + warning) << "\n";
}

// `trainrx watch`: the job's exit code (2: it could not start).
int RunWatch(const Args& a) {
  const StatusOr<experiments::ProcessSpec> spec = experiments::PrepareWatch(a.watch, cli::ExeDir());
  if (!spec.ok()) return Fail(spec.status());
  const StatusOr<pid_t> child = experiments::StartProcess(*spec);
  if (!child.ok()) return Fail(child.status());
  g_watched = *child;
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, ForwardToWatched);
  const std::string dir = fs::absolute(a.watch.dir).string();
  std::cerr << fmt::format("trainrx watch: {} (metrics in {}/metrics; `trainrx capture {}` takes a capture)\n",
                           a.watch.command.front(), dir, dir);
  std::string last_hang;
  int code = 0;
  for (bool ended = false; !ended;) {
    ended = experiments::ProcessEnded(*child, &code);
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    for (const auto& c : experiments::FinishedCaptures(dir, ended)) AnalyzeCapture(c, a);
    if (const std::string hang = experiments::HangReport(dir); !hang.empty() && hang != last_hang) {
      last_hang = hang;
      std::ofstream(fs::path(dir) / "hang-report.txt") << hang;
      std::cerr << hang;
    }
  }
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  std::error_code ec;
  const bool watched = fs::exists(fs::path(dir) / "metrics", ec) && !fs::is_empty(fs::path(dir) / "metrics", ec);
  std::cerr << fmt::format("trainrx watch: the job ended (exit code {}); {}{}\n", code, dir,
                           watched ? "" : ": nothing was watched (no process imported torch, or the hook could not load: see above)");
  return code;
}

// `trainrx capture PID|DIR`: a PID (digits, not a folder here) names the job through its process.
int RunCapture(const Args& a, bool steps_given) {
  const StatusOr<std::string> found = experiments::WatchedJobDir(a.capture_dir);
  if (!found.ok()) return Fail(found.status());
  const std::string& dir = *found;
  const std::optional<int> steps = steps_given ? std::optional<int>(a.capture_steps) : std::nullopt;
  if (Status st = experiments::RequestCapture(dir, steps); !st.ok()) return Fail(st);
  std::cerr << fmt::format("trainrx capture: asked the job in {} for {}; its watcher analyzes them into {}/capture-K/\n", dir,
                           steps ? fmt::format("{} steps", *steps) : "the steps its watcher captures (--capture-steps)",
                           dir);
  return kExitOk;
}

// `trainrx run`: 0, 2 or the first failing rank's code; then the analysis's.
int RunWorkload(const Args& a) {
  experiments::WorkloadTraces w;
  if (Status st = experiments::RunWorkload(a.run, cli::ExeDir(), std::cerr, &w); !st.ok()) {
    const int code = Fail(st);
    return w.rank_exit_code != 0 ? w.rank_exit_code : code;
  }
  return RunAnalyze(w.traces, false, a.format, a.output, a.set, a.thresholds, w.run_json, w.summary);
}

// fix / sweep: a workload spec (with --set/--preset/--nproc) or a user's command.
int RunFixOrSweep(Args& a, bool fix) {
  if (Status st = ParseCap(a.memory_cap, &a.exp.plan.memory_cap_bytes); !st.ok()) return Fail(st);
  const std::string& cmd = fix ? a.fix_cmd : a.sweep_cmd;
  if (!a.exp.plan.also.empty() && cmd.empty())
    return Fail("--also", "measures a fix applied from outside a script: it goes with --cmd (a workload's knobs: `trainrx ab "
                          "WORKLOAD --set KNOB=VALUE`)");
  for (std::string& n : a.exp.plan.also) {
    StatusOr<std::string> token = analyzers::ResolveOutsideFix(n);
    if (!token.ok()) return Fail(token.status());
    n = *token;
  }
  if (!cmd.empty()) {
    if (!a.fix_workload.empty() || !a.fix_sets.empty() || !a.fix_preset.empty())
      return Fail("--cmd", "replaces the workload: give a command or a workload with --set/--preset, not both");
    return fix ? cli::RunFixCommand(cmd, a.exp) : cli::RunSweepCommand(cmd, a.grids, a.exp);
  }
  if (a.fix_workload.empty()) return Fail(fix ? "fix" : "sweep", "expected a workload (cnn, lm) or --cmd COMMAND");
  std::string text = a.fix_workload + (a.fix_preset.empty() ? "" : " preset=" + a.fix_preset);
  for (const auto& s : a.fix_sets) text += " " + s;
  if (a.fix_nproc > 1) text += " nproc=" + std::to_string(a.fix_nproc);
  return fix ? cli::RunFix(text, a.exp) : cli::RunSweep(text, a.grids, a.exp);
}

int RunGate(Args& a, const Commands& c) {
  auto& rule = a.gate.run.rule;
  rule.tolerance = a.tolerance_pct / 100;
  rule.max_undetected = a.undetected_pct >= 0 ? a.undetected_pct / 100 : rule.tolerance;
  rule.fail_ci_margin = a.fail_margin_pct >= 0 ? a.fail_margin_pct / 100 : rule.tolerance / 2;
  if (*c.rb) return cli::GateRecordBaseline(a.gate);
  if (*c.gc) return cli::GateCheck(a.gate);
  return cli::GateSelfTest(a.gate);
}

// `--format` for a document: the registered formats that render it (reports::FormatNames), named
// in the help and checked, so a format registered once is offered everywhere it renders.
CLI::Option* FormatOption(CLI::App* app, std::string& target, reports::Document d, const std::string& note = "") {
  const std::vector<std::string> names = reports::FormatNames(d);
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : " | ") + n;
  return app->add_option("--format", target, list + note)->check(CLI::IsMember(names));
}

// The parsed subcommand, run.
int Dispatch(Args& a, const Commands& c) {
  if (*c.analyze) return RunAnalyze(a.paths, a.sample, a.format, a.output, a.set, a.thresholds);
  if (*c.convert) {
    const Status st = sets::ConvertTraces(a.convert_paths, a.convert_out, a.set.keep_clocks, std::cerr);
    return st.ok() ? kExitOk : Fail(st);
  }
  if (*c.diff) return RunDiff(a);
  if (*c.summarize) return RunSummarize(a);
  if (*c.exp) return RunExport(a);
  if (*c.workloads) {
    reports::WriteWorkloads(std::cout);
    return kExitOk;
  }
  if (*c.fix && !c.fix->count("--budget")) a.exp.plan.budget_s = experiments::kFixDefaultBudgetS;
  if (*c.fix || *c.sweep) return RunFixOrSweep(a, static_cast<bool>(*c.fix));
  if (*c.ab) return cli::RunAb(a.ab_a, a.ab_b, a.ab_cmd, a.exp);
  if (*c.gate) return RunGate(a, c);
  if (*c.run) return RunWorkload(a);
  if (*c.record) return RunRecord(a, c.record->count("--format") > 0);
  if (*c.watch) return RunWatch(a);
  if (*c.capture) return RunCapture(a, c.capture->count("--steps") > 0);
  // CLI11 requires a subcommand (app.require_subcommand), and every one is dispatched above.
  return cli::FailInternal("no subcommand was dispatched");
}

// The subcommands and their options, in the order `trainrx --help` lists them.
void AddAnalysisCommands(CLI::App& app, Args& a, Commands& c) {
  c.analyze = app.add_subcommand("analyze", "Analyze PyTorch-profiler (Kineto/Chrome) traces: findings, evidence, fixes");
  c.analyze->add_option("paths", a.paths, "trace files (.json, .json.gz) or directories of per-rank traces");
  FormatOption(c.analyze, a.format, reports::Document::kAnalysis, " (html: one self-contained file: plots, tables, timeline)");
  c.analyze->add_option("-o,--output,--report", a.output, "write the report here instead of stdout");
  c.analyze->add_option("--threshold", a.thresholds, "override a threshold: id.key=value (repeatable)");
  c.analyze->add_flag("--strict", a.set.strict,
                      "traces of different jobs or inconsistent ranks in one input, or a trace cut off inside its events, "
                      "are an error (exit 2), not a warning");
  c.analyze->add_flag("--keep-clocks", a.set.keep_clocks,
                      "leave each rank's times as recorded (by default ranks on different clocks are aligned on the ends "
                      "of the collectives they share, when those support it; the report says how)");
  c.analyze->add_flag("--per-rank", a.set.per_rank,
                      "analyze each rank's trace on its own and compare the ranks (memory: one trace per core, not the "
                      "set); automatic above 16 files and for per-rank summaries");
  c.analyze->add_option("--step", a.set.step_name,
                        "the training step as you name it: a record_function range name, or a Python function "
                        "(with_stack traces: \"train.py(57): NAME\"); every such range is a step");
  c.analyze->add_option("--what-if", a.set.what_if,
                        "replay the run with this fix applied and predict the step (repeatable: fixes replayed together): "
                        "a transform (anomaly_off, loader_workers, caching_allocator, unblock_syncs, ...; docs/what-if.md), "
                        "a finding id, or a fix with its value (workers=4, amp=bf16)");
  c.analyze->add_flag("--sample", a.sample, "analyze the built-in sample trace (a CPU training loop with planted problems)");

  c.diff = app.add_subcommand("diff", "Why B differs from A: step time by phase, operator, kernel, configuration "
                                      "and findings, each change per step");
  c.diff->add_option("a", a.diff_a, "run A: a trace file or a directory of rank traces")->required();
  c.diff->add_option("b", a.diff_b, "run B")->required();
  FormatOption(c.diff, a.diff_format, reports::Document::kDiff);
  c.diff->add_option("-o,--output,--report", a.diff_out, "write the report here instead of stdout");

  c.convert = app.add_subcommand("convert", "Read any supported trace and write Kineto JSON (opens in Perfetto / HTA)");
  c.convert->add_option("paths", a.convert_paths, "trace files or directories")->required();
  c.convert->add_option("-o,--output", a.convert_out, "output file (.json or .json.gz); per-rank suffix when several ranks")
      ->required();
  c.convert->add_flag("--keep-clocks", a.set.keep_clocks, "write each rank's times as recorded (no clock alignment)");

  c.summarize = app.add_subcommand(
      "summarize", "Analyze each rank's trace where it is and write a small per-rank summary (rank-R.summary.json): "
                   "`trainrx analyze` of the summaries does the cross-rank analyses");
  c.summarize->add_option("paths", a.summarize_paths, "trace files or directories (this node's ranks)")->required();
  c.summarize->add_option("-o,--output", a.summarize_out, "directory for the summaries")->required();
  c.summarize->add_option("--threshold", a.summarize_thresholds, "override a threshold: id.key=value (repeatable)");

  c.exp = app.add_subcommand("export", "Write a set's events and analysis as tables (Parquet or CSV), partitioned by run "
                                       "and rank, for DuckDB / pandas / Spark (docs/export.md)");
  c.exp->add_option("paths", a.export_paths, "trace files or directories of per-rank traces")->required();
  c.exp->add_option("-o,--output", a.export_out, "dataset directory (created; other runs in it are kept)")->required();
  c.exp->add_option("--format", a.export_format, "parquet (default) | csv")->check(CLI::IsMember({"parquet", "csv"}));
  c.exp->add_option("--run", a.export_run, "the run's name in the dataset (default: the first input's name); "
                                           "exporting a run again replaces it");
  c.exp->add_option("--threshold", a.export_thresholds, "override a threshold: id.key=value (repeatable)");
  c.exp->add_flag("--strict", a.set.strict, "traces of different jobs or inconsistent ranks are an error");
  c.exp->add_flag("--keep-clocks", a.set.keep_clocks, "leave each rank's times as recorded (no clock alignment)");
  c.exp->add_flag("--per-rank", a.set.per_rank, "read each rank's trace on its own (automatic above 16 files)");
  c.exp->add_option("--step", a.set.step_name, "the training step as you name it (see analyze --step)");
}

void AddRecordCommands(CLI::App& app, Args& a, Commands& c) {
  auto& r = a.record;
  r = cli::RecordDefaults();
  c.record = app.add_subcommand(
      "record", "Run a command with the probes attached (no code change) and write a Kineto-compatible trace");
  c.record->add_option("-o,--output", r.output, "trace file to write (.json or .json.gz)");
  c.record->add_flag("--analyze", r.analyze, "analyze the trace(s) when the command ends");
  FormatOption(c.record, a.record_format, reports::Document::kAnalysis, " (with --analyze)");
  c.record->add_option("--report", a.record_report, "with --analyze: write the report here instead of stdout");
  c.record->add_option("--probe-dir", r.probe_dir,
                       "directory of the probe to attach (built for the program's torch; default: next to trainrx)");
  c.record->add_option("--steps", r.steps, "steps to record, then the run goes on unrecorded (default 200; all: every step)")
      ->check([](const std::string& v) {
        int64_t steps = 0;
        return env::ParseStepCount(v.c_str(), &steps) ? std::string() : "expected a step count (1 or more) or all, got " + v;
      });
  c.record->add_option("--skip", r.skip, "steps to run unrecorded before the recorded ones (default 0)")
      ->check(CLI::NonNegativeNumber);
  c.record->add_option("--step", r.step_name,
                       "the training step as you name it: a record_function range name; the trace carries it, so its "
                       "analysis takes every such range as a step (as analyze --step does; the window --steps still "
                       "counts optimizer steps)");
  c.record->add_flag("-v,--verbose", r.verbose, "let the probes report what they do on stderr");
  c.record->add_option("--memory-cap", a.record_memory_cap,
                       "run the program under this much writable memory (RLIMIT_DATA: 1.5G, 800M): the CPU stand-in for a "
                       "device's capacity; the report's memory headroom is measured against it");
  c.record->add_flag("--memory-events", r.memory_events,
                     "record every allocation and free (as torch.profiler's profile_memory=True): names the op whose "
                     "memory outlives its step; costs about what profile_memory costs");
  c.record->add_option("command", r.command, "the command to run, after --")->required();
  c.record->allow_extras(false);

  auto& w = a.watch;
  c.watch = app.add_subcommand("watch", "Run a long job with light always-on metrics, deep captures on demand or on a "
                                        "step-time regression, and a report when its steps stop (docs/watch.md)");
  c.watch->add_option("-o,--output", w.dir, "the job's folder: metrics/, capture-K/, hang stacks")->required();
  c.watch->add_option("--capture-steps", w.capture_steps, "steps a deep capture records (default 20)");
  c.watch->add_option("--max-captures", w.max_captures, "captures a trigger may take (default 5; on-demand ones always)");
  c.watch->add_option("--hang-factor", w.hang_factor, "no step for this many median steps is a hang (default 20)");
  c.watch->add_option("--hang-min-seconds", w.hang_min_seconds, "... and at least this long (default 60)");
  c.watch->add_option("--metrics-port", w.metrics_port, "each rank serves its metrics on PORT + rank (Prometheus text)");
  c.watch->add_flag("!--no-regression", w.regression, "no capture on a step-time regression");
  c.watch->add_option("--regression-min-pct", w.regression_min_pct,
                      "a regression is the recent median step this much slower than before (default 20; a busy "
                      "machine's own swings can pass 20 %: docs/watch.md)");
  c.watch->add_option("command", w.command, "the job to run, after --")->required();
  c.capture = app.add_subcommand("capture", "Ask a watched job for a deep capture of its next steps");
  c.capture->add_option("job", a.capture_dir, "the folder the job is watched in (watch -o DIR), or a PID: a watched "
                                              "process, or its watcher or launcher")->required();
  c.capture->add_option("--steps", a.capture_steps, "steps to capture (default: the watcher's --capture-steps)");

  c.workloads = app.add_subcommand("workloads", "List the reference workloads, their knobs (with the finding each fixes) and presets");
  c.run = app.add_subcommand("run", "Run a reference workload under the probes and analyze it");
  c.run->add_option("workload", a.run.workload, "cnn | lm")->required();
  c.run->add_option("--set", a.run.sets, "knob=value (repeatable; see `trainrx workloads`)");
  c.run->add_option("--preset", a.run.preset, "a named configuration (see `trainrx workloads`)");
  c.run->add_option("--nproc", a.run.nproc, "local ranks (torch.distributed c10d, env:// on 127.0.0.1)");
  c.run->add_option("-o,--output", a.run.output, "trace path (default trainrx_<workload>.json; .rank<R> per rank)");
  FormatOption(c.run, a.format, reports::Document::kAnalysis);
  c.run->add_option("--report", a.output, "write the report here instead of stdout");
  c.run->add_option("--threshold", a.thresholds, "override a threshold: id.key=value (repeatable)");
}

void AddExperimentCommands(CLI::App& app, Args& a, Commands& c) {
  auto& plan = a.exp.plan;
  auto add_common = [&](CLI::App* s) {
    s->add_option("--trials", plan.trials,
                  "trials per configuration (default 5; at least 4); fix and ab go on until decided, to at most twice "
                  "as many rounds across processes (in-process: this many processes)");
    s->add_option("--seed", plan.seed, "seed of the randomized interleaving");
    FormatOption(s, a.exp.format, reports::Document::kFix);
    s->add_option("-o,--report", a.exp.output, "write the report here instead of stdout");
    s->add_option("--trial-steps", plan.trial_steps,
                  "--cmd: optimizer steps each trial runs before it is ended as if finished (finally blocks and exit "
                  "handlers run; what follows the training loop does not); 0: whole runs (default: fix from its "
                  "analysis run's warm-up and spread, else 40)")
        ->check(CLI::NonNegativeNumber);
  };
  c.fix = app.add_subcommand("fix", "Run a workload, find its problems, rerun with each fix and report the measured speedups");
  c.fix->add_option("workload", a.fix_workload, "cnn | lm (or --cmd)");
  c.fix->add_option("--cmd", a.fix_cmd, "a user's command: analyze it, apply each fix from outside the script, measure");
  c.fix->add_option("--set", a.fix_sets, "knob=value (repeatable)");
  c.fix->add_option("--preset", a.fix_preset, "a named configuration (see `trainrx workloads`)");
  c.fix->add_option("--nproc", a.fix_nproc, "local ranks of the workload (Gloo), for the dist.* findings")->check(CLI::Range(1, 64));
  c.fix->add_option("--memory-cap", a.memory_cap,
                    "run the analysis and every trial under this much writable memory (RLIMIT_DATA: 1.5G, 800M): the "
                    "CPU stand-in for a device's capacity (batch.small's headroom)");
  c.fix->add_option("--budget", plan.budget_s,
                    fmt::format("seconds for all trials (default {:g}; 0: no limit): fewer trials (never below 4) when "
                                "the plan would take longer, and the bound on extra rounds for inconclusive rows",
                                experiments::kFixDefaultBudgetS));
  c.fix->add_flag("--skip-unlikely", plan.skip_unlikely,
                  "skip the rows whose predicted saving (the what-if replay's range, before its calibration margin, "
                  "docs/what-if.md) ends under 1 %, where the transform's measured record allows it: a note names them "
                  "and the trial time saved (without it, the note only names them)");
  c.fix->add_option("--also", plan.also,
                    "--cmd: also measure this outside fix, named by no finding (repeatable): anomaly_off, zero_grad_none, "
                    "workers=N, pin_memory, eval_no_grad, cudnn_benchmark, deterministic_off, tf32, foreach, fused, "
                    "channels_last, compile_off, compile_mode=M (or a transform or finding id that names one); its row "
                    "is predicted by its transform's replay where one models it");
  c.fix->add_option("--analysis-steps", plan.analysis_steps,
                    "--cmd: the analysis run ends after this many optimizer steps (default 200; 0: the whole run): a "
                    "script with no step limit of its own is analyzed in minutes, without what follows those steps")
      ->check(CLI::NonNegativeNumber);
  add_common(c.fix);
  c.sweep = app.add_subcommand("sweep", "Run every combination of knob values; median step time and throughput with CIs");
  c.sweep->add_option("workload", a.fix_workload, "cnn | lm (or --cmd)");
  c.sweep->add_option("--cmd", a.sweep_cmd, "a command template: \"python3 train.py --workers {workers}\" with --grid workers=0,2,4");
  c.sweep->add_option("--grid", a.grids, "knob=v1,v2,... (repeatable; the product is run)")->required();
  c.sweep->add_option("--samples-per-step", plan.samples_per_step,
                      "--cmd: samples each step processes, from the grid: \"{batch}\" or \"{batch}*{accum}\" (default: read "
                      "from the recorded input shapes); cells then rank by samples per second");
  c.sweep->add_option("--memory-cap", a.memory_cap,
                      "run every trial under this much writable memory (RLIMIT_DATA: 1.5G, 800M): the CPU stand-in for a "
                      "device's capacity; a cell that runs out of memory is a result");
  c.sweep->add_option("--set", a.fix_sets, "fixed knob=value for every cell (repeatable)");
  c.sweep->add_option("--preset", a.fix_preset, "a named base configuration");
  c.sweep->add_option("--nproc", a.fix_nproc, "local ranks of the workload (Gloo)")->check(CLI::Range(1, 64));
  add_common(c.sweep);
  c.ab = app.add_subcommand("ab", "Compare two configurations (or commands) with interleaved trials");
  c.ab->add_option("--a", a.ab_a, "SPEC: a workload with knobs, e.g. \"cnn amp=off\" (or a command with --cmd)")->required();
  c.ab->add_option("--b", a.ab_b, "SPEC: e.g. \"cnn slowdown=5%\"")->required();
  c.ab->add_flag("--cmd", a.ab_cmd, "A and B are shell commands, run under `trainrx record`");
  c.ab->add_option("--budget", plan.budget_s,
                   "seconds for all trials (default 0: no limit, at most twice --trials rounds): with a budget, rounds "
                   "go on while undecided up to what it fits (at most three times --trials)")
      ->check(CLI::NonNegativeNumber);
  c.ab->add_option("--explain", plan.explain,
                   "after the trials, one traced run of each side diffed to say why: auto (when the difference is "
                   "significant), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  c.ab->add_option("--analysis-steps", plan.analysis_steps,
                   "--cmd: each side's explaining run (--explain) ends after this many optimizer steps (default 200; 0: "
                   "the whole run)")
      ->check(CLI::NonNegativeNumber);
  add_common(c.ab);
}

void AddGateCommands(CLI::App& app, Args& a, Commands& c) {
  auto& gate = a.gate;
  gate.run.torch_version = TRAINRX_PROBE_TORCH_VERSION;
  c.gate = app.add_subcommand("gate", "CI performance regression gate (exit 0 pass, 1 regression, 2 error, 3 inconclusive)");
  c.gate->require_subcommand(1);
  auto spec_opts = [&](CLI::App* s) {
    s->add_flag("--cmd", gate.run.command, "the SPEC is a shell command (run under `trainrx record`)");
    s->add_option("--trials", gate.run.trials, "trials per side (default 6; at least 4)");
    s->add_option("spec", gate.spec, "after --: a workload with knobs (cnn workers=2) or, with --cmd, a command");
  };
  c.rb = c.gate->add_subcommand("record-baseline", "Run trials of SPEC and store them as the baseline");
  c.rb->add_option("-o,--output", gate.output, "baseline file (JSON)")->required();
  c.rb->add_flag("--keep-trace", gate.keep_trace,
                 "also store one traced run beside the baseline (FILE.trace.json.gz): a later check diffs against it "
                 "to explain a fail");
  spec_opts(c.rb);
  auto* gc = c.gc = c.gate->add_subcommand("check", "Compare SPEC (or --current FILE) with the baseline: pass / fail / inconclusive");
  gc->add_option("--baseline", gate.baseline, "baseline file")->required();
  gc->add_option("--current", gate.current, "compare against this recorded file instead of running SPEC");
  gc->add_option("--budget", gate.run.budget_s, "seconds: keep adding trials while inconclusive, up to this");
  gc->add_option("--tolerance", a.tolerance_pct, "percent: slowdowns below this do not fail (default 3)");
  gc->add_option("--pass-below,--max-undetected", a.undetected_pct,
                 "percent: pass needs the CI to rule out a slowdown this large (default: the tolerance, so that a pass "
                 "never leaves a slowdown above the tolerance possible; a larger value passes sooner, with a warning "
                 "naming what the pass leaves possible)");
  gc->add_option("--fail-margin", a.fail_margin_pct,
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
  FormatOption(gc, gate.format, reports::Document::kGate);
  gc->add_option("-o,--report", gate.report, "write the report here instead of stdout");
  spec_opts(gc);
  c.st = c.gate->add_subcommand("self-test", "Measure the gate's false-alarm and detection rates on this machine");
  c.st->add_option("--repeats", gate.repeats, "gate decisions per case (default 20)");
  c.st->add_option("--slowdowns", gate.self_test_pcts, "injected slowdowns in % (0 = A/A; default 0 3 5 10)")
      ->expected(1)
      ->delimiter(',');
  c.st->add_flag("--across-processes", gate.across_processes,
                 "A and B in separate processes (--trials per side, interleaved; the two-sample rule) instead of paired "
                 "blocks in one process");
  c.st->add_flag("--compare-rules", gate.compare_rules,
                 "also judge the same samples by other rules (the CI only above 1, the rule before; alpha 0.01; the CI "
                 "above the tolerance) and print their rates beside the gate's");
  spec_opts(c.st);
}

// A mistyped command names itself, with the nearest command within two edits (CLI11 alone says
// "A subcommand is required"); -1 when argv[1] is a command or an option.
int UnknownCommand(CLI::App& app, int argc, char** argv) {
  if (argc <= 1 || argv[1][0] == '-') return -1;
  std::vector<std::string> names;
  for (const auto* c : app.get_subcommands([](CLI::App*) { return true; })) names.push_back(c->get_name());
  if (std::find(names.begin(), names.end(), argv[1]) != names.end()) return -1;
  std::string all, near;
  size_t best = 3;  // suggest within two edits
  for (const auto& n : names) {
    all += (all.empty() ? "" : ", ") + n;
    if (const size_t d = EditDistance(argv[1], n); d < best) best = d, near = n;
  }
  return Fail(argv[1], fmt::format("unknown command{}; the commands are {}",
                                   near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near), all));
}

// CLI11's parse errors in trainrx's shape, about the (sub)command being parsed: "trainrx: error:
// analyze: The following argument was not expected: --bogus; see trainrx analyze --help". --help
// and --version (exit code 0) print as CLI11 does.
int ParseFailure(CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == 0) return app.exit(e);
  std::string command;
  for (CLI::App* at = &app; !at->get_subcommands().empty();) {
    at = at->get_subcommands().front();
    command += (command.empty() ? "" : " ") + at->get_name();
  }
  const std::string help = "trainrx" + (command.empty() ? "" : " " + command) + " --help";
  return Fail(command.empty() ? "trainrx" : command, fmt::format("{}; see {}", e.what(), help));
}

}  // namespace

int Main(int argc, char** argv) {
  CLI::App app{"trainrx: profiler and performance doctor for PyTorch / LibTorch training loops"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "trainrx " TRAINRX_VERSION);
  Args a;
  Commands c{};
  AddAnalysisCommands(app, a, c);
  AddRecordCommands(app, a, c);
  AddExperimentCommands(app, a, c);
  AddGateCommands(app, a, c);
  if (const int rc = UnknownCommand(app, argc, argv); rc >= 0) return rc;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ExtrasError& e) {
    // Issue 34: `record -o run.json python3 train.py --epochs 1` said only "arguments were not
    // expected": the program's own options need the -- before the program.
    if (c.record->parsed())
      return Fail("record", fmt::format("{}; put the program after --, e.g. trainrx record -o run.json -- python3 "
                                        "train.py --epochs 1",
                                        e.what()));
    return ParseFailure(app, e);
  } catch (const CLI::ParseError& e) {
    return ParseFailure(app, e);
  }
  // TRAINRX_PARSE_ONLY=1: stop after the command line parsed (exit 0), for the test that parses every
  // command a finding suggests (tests/analyzers/catalog_test.cc; issue 49.6: compile.time's `ab`
  // command failed with "--a is required").
  if (const char* only = std::getenv("TRAINRX_PARSE_ONLY"); only != nullptr && std::string_view(only) == "1") return 0;
  return Dispatch(a, c);
}

// A bug (an analyzer asking for an unregistered threshold, ...) is said as one, with its own exit
// code, never as a crash dump or as the user's input error.
int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    return cli::FailInternal(e.what());
  }
}
