// torch.compile (issue 39): compile.graph_break, compile.recompiles, compile.time and the compile
// figures of Metrics. Two sources, one per recorder:
//  * the start-up hook's marks (trainrx record; probes/python/sitecustomize.py), written at compile
//    time only: "trainrx::compile <id>" ranges (their length is the compile time),
//    "trainrx::graph_break <file>:<line> <reason>", "trainrx::recompile <file>:<line> <function>
//    <guard that failed>";
//  * the compiled regions every trace of a compiled model has ("Torch-Compiled Region: F/R", one
//    per call of a compiled frame; torch.profiler traces too): a step that runs two or more has
//    eager Python between them, the graph break's cost.
// A trace with neither says nothing: no compile figure is a guess.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "families.h"
#include "ops.h"
#include "runtime_names.h"
#include "trainrx/analyzers/compile.h"

namespace trainrx::analyzers {
namespace {

constexpr std::string_view kCompileMark = "trainrx::compile ";
constexpr std::string_view kBreakMark = "trainrx::graph_break ";
constexpr std::string_view kRecompileMark = "trainrx::recompile ";
constexpr std::string_view kRegion = "Torch-Compiled Region";
// torch.profiler traces: dynamo times each frame's compilation in a range of this name (only while
// a profiler runs: our recordings have the hook's marks instead).
constexpr std::string_view kCompileSpan = "_compile.compile_inner";

// "a b rest of it" -> {"a", "b rest of it"}.
std::pair<std::string_view, std::string_view> FirstWord(std::string_view s) {
  const size_t sp = s.find(' ');
  if (sp == std::string_view::npos) return {s, {}};
  return {s.substr(0, sp), s.substr(sp + 1)};
}

// "/home/u/train.py:33" -> "train.py:33" (the report names the file as the user knows it).
std::string ShortWhere(std::string_view where) {
  const size_t slash = where.rfind('/');
  return std::string(slash == std::string_view::npos ? where : where.substr(slash + 1));
}

void AddSite(std::vector<CompileSite>& sites, CompileSite site) {
  for (CompileSite& s : sites)
    if (s.where == site.where && s.function == site.function) {
      ++s.count;
      s.reason = std::move(site.reason);  // the latest guard that failed
      return;
    }
  site.count = 1;
  sites.push_back(std::move(site));
}

// "1/0" (a compile id, as in "Torch-Compiled Region: 1/0", "trainrx::compile 1/0" or "compile_id=1/0")
// -> {frame 1, recompile 0}; {-1, -1} when it is none.
std::pair<int64_t, int64_t> CompileId(std::string_view id) {
  const size_t slash = id.find('/');
  if (slash == std::string_view::npos || slash == 0) return {-1, -1};
  char* end = nullptr;
  const std::string frame(id.substr(0, slash)), again(id.substr(slash + 1));
  const long long f = std::strtoll(frame.c_str(), &end, 10);
  if (*end != '\0') return {-1, -1};
  const long long r = std::strtoll(again.c_str(), &end, 10);
  if (end == again.c_str()) return {-1, -1};
  return {f, r};
}

// The compile id after "key" in a name ("..., compile_id=1/0" -> "1/0"); "" when none.
std::string_view IdAfter(std::string_view name, std::string_view key) {
  const size_t at = name.find(key);
  if (at == std::string_view::npos) return {};
  std::string_view id = name.substr(at + key.size());
  const size_t stop = id.find_first_of(" ,)");
  return stop == std::string_view::npos ? id : id.substr(0, stop);
}

// One of our start-up hook's marks (trainrx::compile / graph_break / recompile ...): counted into
// `c`; `compile_frame` is the frame of the latest compile mark on the thread, `break_frames` each
// break's.
void ReadMark(std::string_view name, int64_t dur_ns, int64_t step, CompileSummary& c, int64_t& compile_frame,
              std::vector<int64_t>& break_frames) {
  if (name.starts_with(kCompileMark)) {
    c.marks = true;
    ++c.compiles;
    c.compile_ns += dur_ns;
    const auto [frame, again] = CompileId(name.substr(kCompileMark.size()));
    compile_frame = frame;
    if (step >= 0) {
      c.compile_in_steps_ns += dur_ns;
      if (again == 0) ++c.first_compiles_in_steps;
      else c.recompile_in_steps_ns += dur_ns;  // a recompile, or an id the hook could not read
    }
  } else if (name.starts_with(kBreakMark)) {
    c.marks = true;
    const auto [where, reason] = FirstWord(name.substr(kBreakMark.size()));
    AddSite(c.graph_breaks, {ShortWhere(where), "", std::string(reason), 0, compile_frame >= 0 ? std::to_string(compile_frame) : ""});
    break_frames.push_back(compile_frame);
  } else if (name.starts_with(kRecompileMark)) {
    c.marks = true;
    const auto [where, rest] = FirstWord(name.substr(kRecompileMark.size()));
    const auto [function, reason] = FirstWord(rest);
    AddSite(c.recompile_sites, {ShortWhere(where), std::string(function), std::string(reason), 0, ""});
    ++c.recompiles;
    if (step >= 0) ++c.recompiles_in_steps;
  }
}

// The steady steps' medians: regions a step and a call, eager time between a call's graphs.
void SetPerStepFigures(const std::map<int64_t, int64_t>& region_count, std::map<int64_t, int64_t>& region_between,
                       std::vector<int64_t>& per_call, CompileSummary& c) {
  std::vector<int64_t> counts, gaps;
  for (const auto& [step, n] : region_count) {
    counts.push_back(n);
    gaps.push_back(region_between[step]);
  }
  c.steps_with_regions = static_cast<int64_t>(counts.size());
  c.regions_per_step = static_cast<double>(Quantile(counts, 0.5));
  c.regions_per_call = per_call.empty() ? 0 : static_cast<double>(Quantile(per_call, 0.5));
  c.eager_between_ns = static_cast<double>(Quantile(gaps, 0.5));
}

CompileSummary Summarize(const AnalysisContext& ctx, int32_t rank) {
  const profiler::Trace& trace = ctx.trace;
  const StepWindows windows(ctx.steps, rank);
  CompileSummary c;
  c.rank = rank;
  // Per steady step and thread: the compiled regions (a graph break's resume function runs as a
  // region inside its caller's, so nested ones count) and the compiled graphs that ran inside the
  // outermost ones ("CompiledFunction": AOTAutograd's forward; "## Call CompiledFxGraph": inductor
  // without autograd). The eager time of a break is the gap between consecutive graphs of one call.
  int64_t spans = 0, span_ns = 0, span_in_steps = 0, span_in_steps_ns = 0;
  std::map<int64_t, int64_t> region_count;   // step -> regions
  std::map<int64_t, int64_t> region_between;  // step -> ns between consecutive graphs
  std::set<int64_t> frames_in_steps;          // compiled frames whose regions run in the steady steps
  std::vector<int64_t> break_frames;          // the frame of each graph break mark (-1: unknown)
  // Per outermost region in the steps: the regions it holds, itself included. A break makes a call
  // run 2+ (the resume function runs inside its caller's region); gradient accumulation makes a step
  // run the same 1-region call once per micro-batch (nanoGPT: 40 a step, no break).
  std::vector<int64_t> per_call;
  // A compile span in the steps is a recompile (F/R, R >= 1) or the first compile of a frame first
  // called there (F/0): its id from torch.profiler's "entire_frame_compile_data: ...
  // compile_id=F/R" just before it, else from the first compiled region that runs after it.
  int64_t span_recompiles = 0, span_first = 0, span_unknown = 0, span_recompile_ns = 0;
  const auto count_span = [&](int64_t again, int64_t dur) {
    if (again < 0) ++span_unknown, span_recompile_ns += dur;
    else if (again == 0) ++span_first;
    else ++span_recompiles, span_recompile_ns += dur;
  };
  for (uint32_t track : TracksOf(trace, rank, profiler::TrackKind::kCpuThread)) {
    int64_t outer_end = INT64_MIN, outer_step = -1, last_graph_end = INT64_MIN, graph_end = INT64_MIN;
    int64_t compile_frame = -1;                // the frame of the hook's latest compile mark on this thread
    std::string_view span_id;                  // torch.profiler's id for the next compile span
    std::set<std::string> regions_seen;        // the compiled-region ids run so far on this thread
    int64_t waiting_span_end = -1, waiting_dur = 0;  // a span in the steps whose id the next region tells
    for (const profiler::Event& e : trace.TrackEvents(track)) {
      const std::string_view name = trace.Name(e);
      // Every op of the thread passes here: the step is looked up for the few this reads.
      const bool region = name.starts_with(kRegion), span = !region && name.starts_with(kCompileSpan);
      const bool graph = name == "CompiledFunction" || name.starts_with("## Call CompiledFxGraph");
      const bool mark = e.kind == profiler::EventKind::kUserAnnotation && name.starts_with("trainrx::");
      if (name.starts_with("entire_frame_compile_data")) span_id = IdAfter(name, "compile_id=");
      if (!region && !span && !graph && !mark) continue;
      const int64_t step = windows.empty() ? -1 : windows.Index(e.ts_ns);
      if (region) {
        const std::string_view id = IdAfter(name, ": ");
        const auto [frame, again] = CompileId(id);
        if (step >= 0 && frame >= 0) frames_in_steps.insert(frame);
        // The span compiled this region's code when the id is new here; an id that ran before it
        // tells nothing (the span's own region may come later).
        const bool fresh = regions_seen.insert(std::string(id)).second;
        if (waiting_span_end >= 0 && e.ts_ns >= waiting_span_end) count_span(fresh ? again : -1, waiting_dur), waiting_span_end = -1;
        if (step >= 0) ++region_count[step];
        if (e.ts_ns >= outer_end) {
          outer_end = e.end_ns(), outer_step = step, last_graph_end = INT64_MIN;
          if (step >= 0) per_call.push_back(1);
        } else if (outer_step >= 0 && !per_call.empty()) {
          ++per_call.back();
        }
        continue;
      }
      if (graph && e.ts_ns < outer_end && e.ts_ns >= graph_end && outer_step >= 0) {
        if (last_graph_end != INT64_MIN) region_between[outer_step] += std::max<int64_t>(0, e.ts_ns - last_graph_end);
        last_graph_end = graph_end = e.end_ns();
        continue;
      }
      if (span) {
        ++spans, span_ns += e.dur_ns;
        if (step >= 0) {
          ++span_in_steps, span_in_steps_ns += e.dur_ns;
          if (waiting_span_end >= 0) count_span(-1, waiting_dur);  // two spans, no region between
          waiting_span_end = -1;
          if (!span_id.empty()) count_span(CompileId(span_id).second, e.dur_ns);
          else waiting_span_end = e.end_ns(), waiting_dur = e.dur_ns;
        }
        span_id = {};
        continue;
      }
      if (mark) ReadMark(name, e.dur_ns, step, c, compile_frame, break_frames);
    }
    if (waiting_span_end >= 0) count_span(-1, waiting_dur);
  }
  if (!c.marks && spans > 0) {  // a torch.profiler trace: its compile spans
    c.compiles = spans, c.compile_ns = span_ns, c.compile_in_steps_ns = span_in_steps_ns;
    // A span whose id is unknown is counted as a recompile, as before ids were read (medium confidence).
    c.recompiles = c.recompiles_in_steps = span_recompiles + span_unknown;
    c.first_compiles_in_steps = span_first;
    c.recompile_in_steps_ns = span_recompile_ns;
  }
  // A break whose frame runs in the steady steps costs every step, whatever the region count (a
  // break whose resume function has no graph leaves one region a step; issue 49.3).
  for (int64_t frame : break_frames) c.breaks_in_steps += frame >= 0 && frames_in_steps.count(frame) > 0;
  SetPerStepFigures(region_count, region_between, per_call, c);
  return c;
}

// compile.graph_break's fix (catalog variant) for the commonest graph breaks, by dynamo's reason.
const char* BreakFix(std::string_view reason) {
  if (reason.find("item()") != std::string_view::npos || reason.find("capture_scalar_outputs") != std::string_view::npos)
    return "scalar";
  if (reason.find("print") != std::string_view::npos || reason.find("builtin operator") != std::string_view::npos ||
      reason.find("logging") != std::string_view::npos)
    return "logging";
  if (reason.find("data-dependent") != std::string_view::npos || reason.find("Data-dependent") != std::string_view::npos ||
      reason.find("jump") != std::string_view::npos)
    return "control_flow";
  return "other";
}

// A guard on the training mode (grad mode switched for evaluation under no_grad, a module's
// `.training` flipped by train()/eval()): torch.compile keeps one graph per mode, each compiled once
// and reused at every later switch. A recompile there is the price of the second mode, once, and
// nothing in the program removes it (issue 49.6).
bool ModeSwitchGuard(std::string_view guard) {
  return guard.find("grad_mode") != std::string_view::npos || guard.find(".training") != std::string_view::npos ||
         guard.find("['training']") != std::string_view::npos || guard.find("inference_mode") != std::string_view::npos;
}

// compile.recompiles' fix (catalog variant), by the guard that failed.
const char* RecompileFix(std::string_view guard) {
  if (guard.find("size") != std::string_view::npos || guard.find("stride") != std::string_view::npos ||
      guard.find("dim") != std::string_view::npos)
    return "shapes";
  if (guard.find("___stack") != std::string_view::npos) return "scalar";
  return "value";
}

void FlagGraphBreaks(const AnalysisContext& ctx, const CompileSummary& c, Report& out) {
  const double min_regions = ctx.thresholds.Get("compile.graph_break.min_regions_per_step");
  // A break the hook saw in a frame whose compiled code runs in the steady steps: every step pays
  // for it, whatever the region count says (issue 49.3: a print of `.item()` at the end of forward
  // leaves a resume function with no graph, one region a step).
  const bool in_steps = c.breaks_in_steps > 0;
  if (!in_steps) {
    if (c.steps_with_regions == 0 || c.regions_per_step < min_regions) {
      // The hook saw breaks, but no step runs several regions: breaks outside the loop (evaluation,
      // set-up) or before the steady steps. Not a per-step cost.
      return;
    }
    // Several regions a step, but each call of the compiled code is one region: the same graph run
    // once per micro-batch (gradient accumulation) or several compiled functions, not a break. With
    // the start-up hook's marks a break would also have been seen.
    if (c.regions_per_call < 2 && (c.marks ? c.graph_breaks.empty() : true)) return;
  }
  const StepBasis basis(ctx.steps, c.rank);
  Finding f;
  f.id = "compile.graph_break";
  f.rank = c.rank;
  f.steps = basis.steps();
  f.measured = c.regions_per_step;
  f.threshold = min_regions;
  f.measured_unit = "compiled regions per step (median)";
  const int64_t breaks = static_cast<int64_t>(c.graph_breaks.size());
  if (breaks > 0) {
    const CompileSite& first = c.graph_breaks.front();
    f.confidence = Confidence::kHigh;
    const std::string reason = first.reason.substr(0, std::min<size_t>(first.reason.size(), 90));
    if (c.regions_per_step >= 2)
      f.title = fmt::format("torch.compile's graph breaks split each step into {:.0f} compiled regions: {} break{}, first at {} ({})",
                            c.regions_per_step, breaks, breaks == 1 ? "" : "s", first.where, reason);
    else
      f.title = fmt::format("torch.compile breaks the graph at {} in code every steady step runs ({}): {} break{}; what follows the "
                            "break runs eagerly",
                            first.where, reason, breaks, breaks == 1 ? "" : "s");
    for (const CompileSite& s : c.graph_breaks) f.examples.push_back(fmt::format("{}: {}", s.where, s.reason));
    SetFix(f, BreakFix(first.reason));
  } else {
    f.confidence = Confidence::kMedium;
    f.title = fmt::format("Each step runs {:.0f} compiled regions with eager Python between them: graph breaks, or several "
                          "compiled functions (trainrx record names each break and its line)",
                          c.regions_per_step);
    SetFix(f, BreakFix(""));
  }
  f.evidence = {{"regions_per_step", c.regions_per_step},
                {"regions_per_call", c.regions_per_call},
                {"steps_with_regions", c.steps_with_regions},
                {"eager_between_regions_per_step_ns", c.eager_between_ns},
                {"graph_breaks", breaks},
                {"graph_breaks_in_steady_steps_frames", c.breaks_in_steps}};
  SetSaving(f, basis, c.eager_between_ns, c.eager_between_ns, "eager time between the compiled regions of a step");
  f.severity = std::max(SeverityForSaving(f), Severity::kLow);
  out.findings.push_back(std::move(f));
}

// compile.recompiles' common part; its saving: the compile time inside the steady steps.
Finding RecompileFinding(const CompileSummary& c, const StepBasis& basis, Confidence confidence) {
  Finding f;
  f.id = "compile.recompiles";
  f.rank = c.rank;
  f.steps = basis.steps();
  f.confidence = confidence;
  const double cost = basis.Per(static_cast<double>(c.recompile_in_steps_ns));
  SetSaving(f, basis, cost, cost, "recompile time inside the steady steps");
  return f;
}

// From a trace without the hook's marks: frames compiled inside the steady steps (torch.profiler's
// compile spans), without the function or the guard.
void FlagRecompilesFromSpans(const AnalysisContext& ctx, const CompileSummary& c, Report& out) {
  if (c.recompiles_in_steps == 0) return;
  const StepBasis basis(ctx.steps, c.rank);
  Finding f = RecompileFinding(c, basis, Confidence::kMedium);
  f.measured = static_cast<double>(c.recompiles_in_steps);
  f.threshold = 1;
  f.measured_unit = "compilations inside the steady steps";
  f.title = fmt::format("torch.compile recompiled {} time{} inside the steady steps ({:.2f} s): a frame whose guards failed "
                        "(trainrx record names the function and the guard)",
                        c.recompiles_in_steps, c.recompiles_in_steps == 1 ? "" : "s", static_cast<double>(c.recompile_in_steps_ns) / 1e9);
  f.evidence = {{"compilations", c.compiles}, {"recompiles_in_steady_steps", c.recompiles_in_steps},
                {"first_compiles_in_steady_steps", c.first_compiles_in_steps},
                {"recompile_time_in_steady_steps_ns", c.recompile_in_steps_ns}};
  f.severity = std::max(SeverityForSaving(f), Severity::kLow);
  SetFix(f, "value");
  f.fix_python = FormatFix(f.id, "guard_unknown").python + f.fix_python;
  out.findings.push_back(std::move(f));
}

void FlagRecompiles(const AnalysisContext& ctx, const CompileSummary& c, Report& out) {
  if (!c.marks) return FlagRecompilesFromSpans(ctx, c, out);
  if (c.recompile_sites.empty()) return;
  const CompileSite* worst = &c.recompile_sites.front();
  for (const CompileSite& s : c.recompile_sites)
    if (s.count > worst->count) worst = &s;
  const double min_recompiles = ctx.thresholds.Get("compile.recompiles.min_recompiles");
  if (static_cast<double>(worst->count) < min_recompiles && c.recompiles_in_steps == 0) return;
  const StepBasis basis(ctx.steps, c.rank);
  // Every recompile a mode switch, once per function and mode: said, with no saving.
  const bool mode_switch = std::all_of(c.recompile_sites.begin(), c.recompile_sites.end(),
                                       [](const CompileSite& s) { return s.count <= 2 && ModeSwitchGuard(s.reason); });
  if (mode_switch) {
    Finding f;
    f.id = "compile.recompiles";
    f.rank = c.rank;
    f.steps = basis.steps();
    f.confidence = Confidence::kHigh;
    f.severity = Severity::kInfo;
    f.measured = static_cast<double>(c.recompiles);
    f.threshold = min_recompiles;
    f.measured_unit = "recompiles";
    f.title = fmt::format("{} ({}) was compiled again when the mode switched ({}): torch.compile keeps one graph per mode, "
                          "compiled once and reused; a one-off {:.2f} s that nothing removes",
                          worst->function, worst->where, worst->reason.substr(0, std::min<size_t>(worst->reason.size(), 80)),
                          static_cast<double>(c.recompile_in_steps_ns) / 1e9);
    for (const CompileSite& s : c.recompile_sites)
      f.examples.push_back(fmt::format("{} ({}): {} recompile{}, guard: {}", s.function, s.where, s.count, s.count == 1 ? "" : "s", s.reason));
    f.evidence = {{"recompiles", c.recompiles}, {"mode_switch", std::string("yes")},
                  {"recompile_time_in_steady_steps_ns", c.recompile_in_steps_ns}};
    f.saving_bound = "none: each mode's graph is compiled once; the recording's steps pay it, a long run does not";
    SetFix(f, "mode_switch");
    out.findings.push_back(std::move(f));
    return;
  }
  Finding f = RecompileFinding(c, basis, Confidence::kHigh);
  f.measured = static_cast<double>(c.recompiles);
  f.threshold = min_recompiles;
  f.measured_unit = "recompiles";
  f.title = fmt::format("{} ({}) was compiled again {} time{}{}: the guard that failed: {}", worst->function, worst->where,
                        worst->count, worst->count == 1 ? "" : "s",
                        c.recompiles_in_steps > 0 ? fmt::format(", {} inside the steady steps", c.recompiles_in_steps) : "",
                        worst->reason.substr(0, std::min<size_t>(worst->reason.size(), 120)));
  for (const CompileSite& s : c.recompile_sites)
    f.examples.push_back(fmt::format("{} ({}): {} recompile{}, last guard: {}", s.function, s.where, s.count, s.count == 1 ? "" : "s",
                                     s.reason));
  f.evidence = {{"recompiles", c.recompiles},
                {"recompiles_in_steady_steps", c.recompiles_in_steps},
                {"compile_time_ns", c.compile_ns},
                {"recompile_time_in_steady_steps_ns", c.recompile_in_steps_ns}};
  f.severity = std::max(SeverityForSaving(f), worst->count >= 8 ? Severity::kMedium : Severity::kLow);
  SetFix(f, RecompileFix(worst->reason));
  out.findings.push_back(std::move(f));
}

void FlagCompileTime(const AnalysisContext& ctx, const CompileSummary& c, Report& out) {
  if (c.compile_ns <= 0) return;
  // The recorded span of the rank: first to last event of its CPU threads.
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (uint32_t t : TracksOf(ctx.trace, c.rank, profiler::TrackKind::kCpuThread)) {
    const auto events = ctx.trace.TrackEvents(t);
    for (const profiler::Event& e : events) lo = std::min(lo, e.ts_ns), hi = std::max(hi, e.end_ns());
  }
  if (hi <= lo) return;
  const double pct = 100.0 * static_cast<double>(c.compile_ns) / static_cast<double>(hi - lo);
  const double min_pct = ctx.thresholds.Get("compile.time.min_pct");
  if (pct < min_pct) return;
  const StepBasis basis(ctx.steps, c.rank);
  const double step = static_cast<double>(ctx.steps.median_wall_ns);
  Finding f;
  f.id = "compile.time";
  f.rank = c.rank;
  f.severity = pct >= 50 ? Severity::kLow : Severity::kInfo;
  f.confidence = Confidence::kHigh;
  f.measured = pct;
  f.threshold = min_pct;
  f.measured_unit = "% of the recorded time";
  f.title = step > 0 ? fmt::format("torch.compile took {:.2f} s in {} compilation{} ({:.0f} % of the recording): {:.0f} median steps "
                                   "({:.2f} ms); the recording holds {} steady steps",
                                   static_cast<double>(c.compile_ns) / 1e9, c.compiles, c.compiles == 1 ? "" : "s", pct, static_cast<double>(c.compile_ns) / step,
                                   step / 1e6, basis.steps())
                     : fmt::format("torch.compile took {:.2f} s in {} compilation{} ({:.0f} % of the recording)",
                                   static_cast<double>(c.compile_ns) / 1e9, c.compiles, c.compiles == 1 ? "" : "s", pct);
  f.evidence = {{"compile_time_ns", c.compile_ns}, {"compilations", c.compiles}, {"recorded_ns", hi - lo},
                {"median_step_ns", ctx.steps.median_wall_ns}};
  f.saving_bound = "not from one run: compiling pays back only when the job's steps times the time each saves exceed it";
  SetFix(f);
  out.findings.push_back(std::move(f));
}

// The ranks compiled some other way (inductor's Triton kernels without the regions: AOTInductor)
// and those replaying CUDA graphs: then neither compile suggestion is ours to make. One pass over
// the trace (FlagCompileForLaunches, FlagCompileForFusion).
struct GeneratedCode {
  std::set<int32_t> triton_ranks, graph_ranks;
  // A finding of every rank (-1) is on the set's ranks where any is.
  static bool On(const std::set<int32_t>& ranks, int32_t rank) { return rank == -1 ? !ranks.empty() : ranks.count(rank) > 0; }
};
GeneratedCode ScanGeneratedCode(const profiler::Trace& trace) {
  GeneratedCode out;
  for (const profiler::Event& e : trace.events) {
    if (e.track >= trace.tracks.size()) continue;
    const int32_t rank = trace.tracks[e.track].rank;
    if (e.kind == profiler::EventKind::kKernel && trace.Name(e).starts_with("triton_")) out.triton_ranks.insert(rank);
    if (e.kind == profiler::EventKind::kCudaRuntime) {
      const std::string_view n = trace.Name(e);
      if (n == "cudaGraphLaunch" || n == "hipGraphLaunch") out.graph_ranks.insert(rank);
    }
  }
  return out;
}

}  // namespace

// A launch-bound GPU (gpu.launch_bound: kernels shorter than their launches) is what torch.compile
// addresses: fused kernels are fewer launches, and mode="reduce-overhead" replays a step's kernels
// as a CUDA graph. Not compiled: compile.not_compiled; compiled and still launch-bound:
// compile.reduce_overhead. A suggestion to measure, never a claimed saving (compiling can lose:
// compile.time). Run after the families (it reads their findings).
void FlagCompileForLaunches(const AnalysisContext& ctx, Report& report) {
  if (std::none_of(report.findings.begin(), report.findings.end(), [](const Finding& f) { return f.id == "gpu.launch_bound"; }))
    return;
  const GeneratedCode generated = ScanGeneratedCode(ctx.trace);
  std::vector<Finding> found;
  for (const Finding& g : report.findings) {
    if (g.id != "gpu.launch_bound") continue;
    const CompileSummary* c = nullptr;
    for (const CompileSummary& s : report.metrics.compile)
      if (s.rank == g.rank || g.rank == -1) c = &s;
    if (GeneratedCode::On(generated.graph_ranks, g.rank)) continue;
    const bool triton = GeneratedCode::On(generated.triton_ranks, g.rank);
    const bool compiled = triton || (c != nullptr && c->steps_with_regions > 0);
    Finding f;
    if (compiled) f.id = "compile.reduce_overhead";
    else f.id = "compile.not_compiled";
    f.rank = g.rank;
    f.measured = g.measured;  // gpu.launch_bound's figure, beside its threshold
    f.threshold = g.threshold;
    f.measured_unit = g.measured_unit;
    f.severity = Severity::kLow;
    f.confidence = Confidence::kMedium;
    f.steps = g.steps;
    f.title = compiled ? "The compiled model is still launch-bound: mode=\"reduce-overhead\" replays each step's kernels as a "
                         "CUDA graph (one launch)"
                       : "The GPU waits on kernel launches and the model is not compiled: torch.compile fuses kernels "
                         "(fewer launches)";
    f.evidence = {{"launch_bound", g.title}};
    f.saving_bound = "not estimated: measure it (see the fix); up to gpu.launch_bound's saving";
    SetFix(f);
    found.push_back(std::move(f));
  }
  std::move(found.begin(), found.end(), std::back_inserter(report.findings));
}

namespace {

// The median step's critical path split by what torch.compile(model) would do to its kernels.
struct FusablePath {
  int64_t path_ns = 0, fusable_ns = 0, layout_ns = 0;
  int64_t host_ns = 0;  // host work (PathClass::kCpu)
  std::map<std::string, int64_t> by_kernel;  // the fusable and layout kernels' time on the path
};

// The forward and backward's share of a rank's steps: 0 without steps, or without a backward (ops
// on the loop's thread count as forward: without autograd's nodes they need not be a model's).
double ModelShare(const StepModel& steps, int32_t rank) {
  int64_t model = 0, backward = 0, wall = 0;
  for (const StepRow& r : steps.steps)
    if (r.rank == rank) model += r.forward_ns + r.backward_ns, backward += r.backward_ns, wall += r.wall_ns;
  return wall > 0 && backward > 0 ? std::min(1.0, static_cast<double>(model) / static_cast<double>(wall)) : 0.0;
}
FusablePath SplitPath(const CriticalPath& p) {
  FusablePath out;
  for (const PathSegment& s : p.segments) {
    const int64_t d = s.end_ns - s.start_ns;
    out.path_ns += d;
    if (s.cls == PathClass::kCpu) out.host_ns += d;
    if (s.cls != PathClass::kCompute) continue;
    // torch.compile(model) leaves the optimizer eager: its foreach kernels stay.
    if (s.what.find("multi_tensor_apply") != std::string::npos) continue;
    if (IsLayoutConversionKernel(s.what)) out.layout_ns += d, out.by_kernel[s.what] += d;
    else if (IsFusableKernel(s.what) || IsCudnnBatchNormKernel(s.what)) out.fusable_ns += d, out.by_kernel[s.what] += d;
  }
  return out;
}

}  // namespace

// A step whose critical path runs through the kernels inductor regenerates (elementwise, reduction
// and norm kernels, cuDNN's batch norm, cuDNN's layout conversions around NCHW convolutions: what
// torch.compile fuses, brings near the memory bandwidth or lays out channels-last) on a rank that is
// not compiled: compile.not_compiled, whether or not the GPU waits on launches (found on an H200,
// 2026-11-28: a device-bound CNN that compile made 4.5x faster and a ResNet-18 it made 1.3x faster
// were flagged for nothing but matmul alignment). The evidence is the median step's critical path:
// kernels off it save nothing. The saving is the replay's (compile_fusion); the estimate is half of
// those kernels' time on the path, the transform's point. Run after FlagCompileForLaunches.
void FlagCompileForFusion(const AnalysisContext& ctx, Report& report) {
  const double min_pct = ctx.thresholds.Get("compile.fusable_path.min_pct");
  const auto ms = [](int64_t ns) { return static_cast<double>(ns) / 1e6; };
  std::optional<GeneratedCode> generated;  // scanned for the first rank over the threshold only
  std::vector<Finding> found;
  for (const CriticalPath& p : report.metrics.critical_paths) {
    if (!p.linked || p.segments.empty() || p.steps == 0) continue;
    if (std::any_of(report.findings.begin(), report.findings.end(), [&](const Finding& f) {
          return (f.id == "compile.not_compiled" || f.id == "compile.reduce_overhead") && (f.rank == p.rank || f.rank == -1);
        }))
      continue;
    if (std::any_of(report.metrics.compile.begin(), report.metrics.compile.end(), [&](const CompileSummary& s) {
          return s.rank == p.rank && (s.steps_with_regions > 0 || s.compiles > 0);
        }))
      continue;  // compiled
    const FusablePath split = SplitPath(p);
    if (split.path_ns <= 0) continue;
    const int64_t kernels = split.fusable_ns + split.layout_ns;
    // A host-bound step (most of its path host work): the model's share of it, the forward and
    // backward's share of the rank's steps, is what the compiled code replaces (the Python between
    // ops, the ops it fuses, views, the autograd engine's work per node: a ViT-S on an H200 ran 49 ms
    // eager, 35 ms compiled, as many kernels launched; docs/what-if.md).
    const int64_t host_ns = static_cast<int64_t>(static_cast<double>(split.host_ns) * ModelShare(ctx.steps, p.rank));
    // On a rank with device work only: on a CPU, inductor's gain is in code it generates for the ops
    // themselves, which no trace holds (compile_fusion says "not predictable" there).
    const bool host_bound = p.device && 2 * split.host_ns >= split.path_ns;
    const bool host_part = host_bound && host_ns > 0;  // the claim names the model's host work
    const int64_t regenerated = kernels + (host_part ? host_ns : 0);
    const double pct = 100.0 * static_cast<double>(regenerated) / static_cast<double>(split.path_ns);
    if (pct < min_pct) continue;
    if (!generated) generated = ScanGeneratedCode(ctx.trace);
    if (GeneratedCode::On(generated->triton_ranks, p.rank) || GeneratedCode::On(generated->graph_ranks, p.rank)) continue;
    Finding f;
    f.id = "compile.not_compiled";
    f.rank = p.rank;
    f.measured = pct;
    f.threshold = min_pct;
    f.measured_unit = "% of the median step's critical path";
    f.confidence = Confidence::kMedium;
    f.title = host_part
                  ? fmt::format(
                        "{:.0f} % of the median step's critical path ({:.2f} of {:.2f} ms) is what torch.compile "
                        "replaces: the model's forward and backward on the host ({:.2f} ms: Python and the framework "
                        "between kernels) and the kernels it regenerates ({:.2f} ms), and the model is not compiled",
                        pct, ms(regenerated), ms(split.path_ns), ms(host_ns), ms(kernels))
                  : fmt::format(
                        "{:.0f} % of the median step's critical path ({:.2f} of {:.2f} ms) is kernels torch.compile "
                        "regenerates (elementwise, reduction and norm kernels{}), and the model is not compiled",
                        pct, ms(regenerated), ms(split.path_ns),
                        split.layout_ns > 0 ? fmt::format("; cuDNN's layout conversions {:.2f} ms", ms(split.layout_ns)) : "");
    std::vector<std::pair<int64_t, std::string>> top;
    for (const auto& [name, ns] : split.by_kernel) top.emplace_back(ns, name);
    std::sort(top.begin(), top.end(), std::greater<>());
    for (size_t i = 0; i < top.size() && i < 3; ++i)
      f.examples.push_back(fmt::format("{:.2f} ms on the path: {}", ms(top[i].first), top[i].second.substr(0, 160)));
    f.evidence = {{"path_ns", split.path_ns}, {"fusable_path_ns", split.fusable_ns}, {"layout_conversion_path_ns", split.layout_ns}};
    if (host_bound) f.evidence.push_back({"model_host_path_ns", host_ns});
    SetSaving(f, StepBasis(ctx.steps, p.rank), 0.5 * static_cast<double>(regenerated), static_cast<double>(regenerated),
              host_part
                  ? "the median step's critical-path time in the model's host work and the kernels torch.compile "
                    "regenerates (the generated code keeps part of each)"
                  : "the median step's critical-path time in kernels torch.compile regenerates (a fused kernel keeps "
                    "part of it)");
    // A suggestion to measure: what compiling gains depends on the code inductor generates (and it
    // costs compile time), so never above medium, whatever the path's share.
    f.severity = std::min(SeverityForSaving(f), Severity::kMedium);
    SetFix(f);
    found.push_back(std::move(f));
  }
  std::move(found.begin(), found.end(), std::back_inserter(report.findings));
}

void AnalyzeCompile(const AnalysisContext& ctx, Report& out) {
  std::vector<int32_t> ranks;
  for (const auto& t : ctx.trace.tracks)
    if (std::find(ranks.begin(), ranks.end(), t.rank) == ranks.end()) ranks.push_back(t.rank);
  for (int32_t rank : ranks) {
    CompileSummary c = Summarize(ctx, rank);
    if (!c.marks && c.steps_with_regions == 0 && c.compiles == 0) continue;
    FlagGraphBreaks(ctx, c, out);
    FlagRecompiles(ctx, c, out);
    FlagCompileTime(ctx, c, out);
    out.metrics.compile.push_back(std::move(c));
  }
}

int64_t CompileTimeNs(const profiler::Trace& trace, int32_t rank) {
  int64_t marks = 0, spans = 0;
  for (uint32_t track : TracksOf(trace, rank, profiler::TrackKind::kCpuThread)) {
    int64_t mark_end = INT64_MIN, span_end = INT64_MIN;  // outermost only: a nested one is inside its time
    for (const profiler::Event& e : trace.TrackEvents(track)) {
      const std::string_view name = trace.Name(e);
      if (e.kind == profiler::EventKind::kUserAnnotation && name.starts_with(kCompileMark) && e.ts_ns >= mark_end) {
        marks += e.dur_ns, mark_end = e.end_ns();
      } else if (name.starts_with(kCompileSpan) && e.ts_ns >= span_end) {
        spans += e.dur_ns, span_end = e.end_ns();
      }
    }
  }
  return marks > 0 ? marks : spans;
}

}  // namespace trainrx::analyzers
