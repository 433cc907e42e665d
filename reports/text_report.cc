// Text (terminal) and Markdown (PR comment) reports. Both are produced by one builder,
// BuildDocument, writing through a Sink; only the sinks differ.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "trainrx/analyzers/catalog.h"
#include "trainrx/profiler/json_writer.h"
#include "trainrx/reports/report.h"

#include "escape.h"

namespace trainrx::reports {
namespace {


using analyzers::Finding;
using analyzers::Severity;

std::string Ms(int64_t ns) { return fmt::format("{:.2f} ms", static_cast<double>(ns) / 1e6); }
// A span for prose: ms below 10 s, else s.
std::string Span(int64_t ns) { return ns < 10'000'000'000 ? Ms(ns) : fmt::format("{:.1f} s", static_cast<double>(ns) / 1e9); }

// One sentence per rank whose recording did not finish (analyzers::UnfinishedRank).
std::string UnfinishedText(const analyzers::UnfinishedRank& u) {
  std::string s = fmt::format("the run did not finish: rank {} ({}) ended by {} after {} of recording, with {} complete steps",
                              u.rank, u.source, u.end_reason, Span(u.recorded_ns), u.steps);
  if (u.open_ranges > 0) s += fmt::format("; {} ranges were still open (the work in progress, cut)", u.open_ranges);
  if (u.behind_ns > 0) s += fmt::format("; its trace ends {} before the latest rank's", Span(u.behind_ns));
  return s + ". What the run would have done after that is not in the trace: the analysis covers only the recorded part.";
}
// One sentence per rank whose collector dropped records (analyzers::RecordingLoss).
std::string LossText(const analyzers::RecordingLoss& l) {
  const double total = static_cast<double>(l.kept + l.dropped);
  std::string s = fmt::format("the recording is incomplete: rank {}'s collector dropped {} records", l.rank, l.dropped);
  if (l.dropped > 0 && total > 0) s += fmt::format(" ({:.0f} % of those it made)", 100.0 * static_cast<double>(l.dropped) / total);
  if (l.max_events > 0) s += fmt::format(" past its cap of {} a process (TRAINRX_MAX_EVENTS)", l.max_events);
  if (l.gpu_dropped > 0) s += fmt::format("{}{} GPU records", l.dropped > 0 ? " and " : "", l.gpu_dropped);
  if (l.kept_ns >= 0 && l.run_ns > 0)
    s += fmt::format("; it kept what the first {} of the {} run made", Span(l.kept_ns), Span(l.run_ns));
  if (l.run_steps > 0) s += fmt::format(" (the run took {} steps by {})", l.run_steps, l.boundary);
  if (l.steps_cut > 0)
    s += fmt::format("; {} step{} that ran past the first dropped record {} left out", l.steps_cut,
                     l.steps_cut == 1 ? "" : "s", l.steps_cut == 1 ? "is" : "are");
  s += ". The figures and findings below are about the part it kept";
  if (l.dropped > 0) {
    s += ": to record it all, record fewer steps (record --steps N) or raise TRAINRX_MAX_EVENTS (each record holds "
         "~170 bytes of memory until the trace is written";
    if (l.kept_ns > 0) {
      const double per_s = static_cast<double>(l.kept) / (static_cast<double>(l.kept_ns) / 1e9);
      s += per_s >= 1e6 ? fmt::format("; the run made {:.1f} M records a second", per_s / 1e6)
                        : fmt::format("; the run made {:.0f} records a second", per_s);
    }
    s += ")";
  }
  return s + ".";
}
// What a step window (record --steps/--skip) left out of a rank's trace; "" when nothing.
std::string WindowText(const analyzers::RecordedWindow& w) {
  if (!w.opened)
    return fmt::format("rank {} recorded no step: the window skips {} steps (record --skip) and the run had {} ({})",
                       w.rank, w.skip, w.run_boundaries, w.boundary);
  if (w.boundary == "none")
    return fmt::format("rank {}: no step boundary (Optimizer.step, ProfilerStep, trainrx step marker) was seen, so the "
                       "step window did not apply: the whole run was recorded", w.rank);
  std::string s;
  if (w.closed)
    s = fmt::format("rank {} recorded a window of the run: steps {}-{} of the {} it ran (record --steps {}{}); the rest "
                    "of the run is not in the trace (--steps all records every step)",
                    w.rank, w.skip + 1, w.skip + w.steps, w.run_boundaries, w.steps,
                    w.skip > 0 ? fmt::format(" --skip {}", w.skip) : "");
  else if (w.skip > 0)
    s = fmt::format("rank {} skipped the first {} steps of the run (record --skip {}): start-up is not in the trace",
                    w.rank, w.skip, w.skip);
  if (!s.empty() && w.gpu_records_outside > 0)
    s += fmt::format("; {} GPU records made outside the window were left out", w.gpu_records_outside);
  return s;
}

// The clock alignment of a multi-rank set (analyzers::AlignRankClocks), one line per rank that
// was shifted or could not be aligned, the rest (same clock) in one line; empty with one rank.
std::vector<std::string> ClockLines(const profiler::Trace& trace) {
  std::vector<std::string> lines;
  std::map<std::string, std::vector<int32_t>> quiet;  // status -> ranks
  int32_t reference = -1;
  size_t said = 0;
  for (const auto& r : trace.ranks) {
    if (r.clock_status.empty()) continue;
    if (r.clock_status == "reference") {
      reference = r.rank;
    } else if (r.clock_status == "shifted" || r.clock_status == "not aligned") {
      if (said++ < 8) lines.push_back(fmt::format("clocks: rank {}: {}", r.rank, r.clock_note));
    } else {
      quiet[r.clock_status].push_back(r.rank);
    }
  }
  if (said > 8) lines.push_back(fmt::format("clocks: {} more ranks shifted or not aligned (the JSON report lists them)", said - 8));
  for (const auto& [status, ranks] : quiet) {
    if (ranks.size() == 1) {
      for (const auto& r : trace.ranks)
        if (r.rank == ranks[0]) lines.push_back(fmt::format("clocks: rank {}: {}", r.rank, r.clock_note));
      continue;
    }
    lines.push_back(fmt::format("clocks: {} ranks ({}{}) {} rank {}'s: not shifted", ranks.size(), ranks.front(),
                                ranks.size() > 1 ? fmt::format("-{}", ranks.back()) : "",
                                status == "same host" ? "are on the same host as" : "have clocks that agree with", reference));
  }
  return lines;
}

std::string Pct(double share) { return fmt::format("{:.1f}%", 100.0 * share); }

// Kineto kernel names run to hundreds of characters of template arguments; tables keep the head
// (the JSON report keeps the full name).
// The CUDA return type "void " says nothing and is dropped.
constexpr size_t kMaxNameChars = 72;
std::string ShortName(const std::string& full) {
  const std::string name = full.rfind("void ", 0) == 0 ? full.substr(5) : full;
  return name.size() <= kMaxNameChars ? name : name.substr(0, kMaxNameChars - 3) + "...";
}
std::string Us(double ns) { return fmt::format("{:.1f} us", ns / 1e3); }

class Sink {
 public:
  virtual ~Sink() = default;
  virtual void Title(const std::string& s) = 0;
  virtual void Heading(const std::string& s) = 0;
  virtual void Line(const std::string& s) = 0;
  virtual void Warning(const std::string& s) = 0;  // what must be read before any figure
  virtual void Bullet(const std::string& s) = 0;
  virtual void Table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows) = 0;
  virtual void FindingHead(const Finding& f, int index) = 0;
};

class TextSink final : public Sink {
 public:
  TextSink(std::ostream& out, bool color) : out_(out), color_(color) {}
  void Title(const std::string& s) override { out_ << Style("1", s) << "\n"; }
  void Heading(const std::string& s) override { out_ << "\n" << Style("1", s) << "\n"; }
  void Line(const std::string& s) override { out_ << "  " << s << "\n"; }
  void Warning(const std::string& s) override { out_ << "  " << Style("31;1", "WARNING: ") << s << "\n"; }
  void Bullet(const std::string& s) override { out_ << "    - " << s << "\n"; }
  void Table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows) override {
    std::vector<size_t> w(head.size());
    for (size_t c = 0; c < head.size(); ++c) w[c] = head[c].size();
    for (const auto& r : rows)
      for (size_t c = 0; c < r.size() && c < w.size(); ++c) w[c] = std::max(w[c], r[c].size());
    auto row = [&](const std::vector<std::string>& r) {
      out_ << "  ";
      for (size_t c = 0; c < r.size(); ++c) out_ << fmt::format("{:<{}}", r[c], w[c] + 2);
      out_ << "\n";
    };
    row(head);
    for (const auto& r : rows) row(r);
  }
  void FindingHead(const Finding& f, int index) override {
    const char* code = f.severity == Severity::kHigh ? "31;1" : f.severity == Severity::kMedium ? "33;1" : "36";
    out_ << fmt::format("\n  {}. {} {}  {}\n", index, Style(code, fmt::format("[{}]", analyzers::SeverityName(f.severity))),
                        Style("1", f.id), f.title);
  }

 private:
  std::string Style(const char* code, const std::string& s) const {
    return color_ ? fmt::format("\033[{}m{}\033[0m", code, s) : s;
  }
  std::ostream& out_;
  bool color_;
};

class MarkdownSink final : public Sink {
 public:
  explicit MarkdownSink(std::ostream& out) : out_(out) {}
  void Title(const std::string& s) override { out_ << "## " << Escape(s) << "\n"; }
  void Heading(const std::string& s) override { out_ << "\n### " << Escape(s) << "\n\n"; }
  void Line(const std::string& s) override { out_ << Escape(s) << "  \n"; }
  void Warning(const std::string& s) override { out_ << "\n> **Warning:** " << Escape(s) << "\n\n"; }
  void Bullet(const std::string& s) override { out_ << "- " << Escape(s) << "\n"; }
  void Table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows) override {
    out_ << "\n|";
    for (const auto& h : head) out_ << " " << Escape(h) << " |";
    out_ << "\n|";
    for (size_t i = 0; i < head.size(); ++i) out_ << "---|";
    out_ << "\n";
    for (const auto& r : rows) {
      out_ << "|";
      for (const auto& c : r) out_ << " " << Escape(c) << " |";
      out_ << "\n";
    }
    out_ << "\n";
  }
  void FindingHead(const Finding& f, int index) override {
    out_ << fmt::format("\n**{}. `{}`** ({}) {}\n\n", index, f.id, analyzers::SeverityName(f.severity), Escape(f.title));
  }

 private:
  static std::string Escape(const std::string& s) { return MarkdownText(s); }
  std::ostream& out_;
};

// "up to 12.0% of the mean step (1.20 ms per step, mean over 5 steps; at most the 3.00 ms of GPU
// idle time)"; without steps the total over the trace, with no share of a step.
std::string SavingText(const Finding& f) {
  const std::string bound = f.saving_bound.empty() ? std::string()
                                                   : fmt::format("; at most the {} of {}", Ms(f.saving_bound_ns), f.saving_bound);
  if (f.steps > 0) {
    // Below 0.05 % the share rounds to nothing: give the time alone.
    const std::string share = f.estimated_saving_pct >= 0.05 ? fmt::format("{:.1f}% of the mean step", f.estimated_saving_pct)
                                                             : "under 0.1% of the mean step";
    return fmt::format("estimated saving: up to {} ({} per step, mean over {} steps{})", share,
                       Ms(f.estimated_saving_ns), f.steps, bound);
  }
  return fmt::format("estimated saving: up to {} over the whole trace (no steps: no share of a step{})",
                     Ms(f.estimated_saving_ns), bound);
}

// "90 % interval: ...; " before a prediction's assumptions ("" where it says nothing of its calibration).
std::string CalibrationPrefix(const analyzers::Prediction& p) { return p.calibration.empty() ? "" : p.calibration + "; "; }

// "predicted saving: 27.0% [22.1, 31.4] of the step (replay: 40.0 ms -> 29.2 ms; replay error +0.3%; assumes ...)"
std::string PredictionText(const analyzers::Prediction& p) {
  if (p.method != "replay") return fmt::format("predicted saving: {} ({})", p.method, p.assumptions);
  return fmt::format("predicted saving: {:.1f}% [{:.1f}, {:.1f}] of the step ({}replay of {}: {} -> {} a step; replay error "
                     "{:+.1f}%; assumes {})",
                     p.saving_pct, p.low_pct, p.high_pct, CalibrationPrefix(p), p.transform,
                     Ms(p.step_ns_before), Ms(p.step_ns_after), p.replay_error_pct, p.assumptions);
}

std::string EvidenceText(const analyzers::EvidenceItem& e) {
  if (const auto* i = std::get_if<int64_t>(&e.value)) {
    // A time in ns is shown in ms: the key loses its "_ns" so the unit is said once.
    if (e.key.size() > 3 && e.key.compare(e.key.size() - 3, 3, "_ns") == 0)
      return fmt::format("{}={}", e.key.substr(0, e.key.size() - 3), Ms(*i));
    return fmt::format("{}={}", e.key, *i);
  }
  if (const auto* d = std::get_if<double>(&e.value)) return fmt::format("{}={:.4g}", e.key, *d);
  return fmt::format("{}={}", e.key, std::get<std::string>(e.value));
}

std::string OomText(const analyzers::DeviceMemory& m) {
  std::string text = fmt::format("rank {} ran out of memory on {}: {} allocation{} failed, the largest asking {}", m.rank, m.device,
                                 m.oom_events, m.oom_events == 1 ? "" : "s", analyzers::BytesText(static_cast<double>(m.oom_request_bytes)));
  if (!m.oom_op.empty()) text += fmt::format(" (first in {})", m.oom_op);
  // Without an allocator sample the peak is unknown, not 0 (a recording samples a device at optimizer
  // steps: a run that fails in its first step has none unless the failure's own mark came).
  if (m.samples == 0) text += "; allocated before it: not sampled";
  else text += fmt::format("; peak allocated {}", analyzers::BytesText(static_cast<double>(m.peak_allocated)));
  if (m.capacity > 0) text += fmt::format(" of {}", analyzers::BytesText(static_cast<double>(m.capacity)));
  if (m.peak_reserved > 0) text += fmt::format(", peak reserved {}", analyzers::BytesText(static_cast<double>(m.peak_reserved)));
  return text;
}

// The title, what must be read before any figure (an unfinished run, out of memory, input errors),
// what was read and left out, the clocks, and the run's own summary.
void WriteInputs(const profiler::Trace& trace, const analyzers::Report& report, const RenderOptions& options, Sink& sink) {
  std::string inputs;
  for (const auto& i : options.inputs) inputs += (inputs.empty() ? "" : ", ") + i;
  sink.Title(fmt::format("trainrx analysis of {}", inputs.empty() ? "trace" : inputs));
  // A run that did not finish first: every figure below is about a part of it.
  for (const auto& u : report.metrics.unfinished) sink.Warning(UnfinishedText(u));
  // A run that ran out of memory: what failed, and how full the device was.
  for (const auto& m : report.metrics.memory)
    if (m.oom_events > 0) sink.Warning(OomText(m));
  // Records the collector dropped: what follows is about the part it kept.
  for (const auto& l : report.metrics.losses) sink.Warning(LossText(l));
  // Then what the reader found wrong with the input as a whole (files of different jobs merged),
  // then data loss: the numbers are only as good as what could be read.
  const auto& stats = trace.stats;
  for (const auto& e : stats.entries)
    if (e.severity == profiler::IssueSeverity::kError) sink.Warning(e.example);
  sink.Line(fmt::format("{} events read from {} ranks ({:.1f} MB); {} skipped", stats.events_read, trace.ranks.size(),
                        static_cast<double>(stats.bytes_read) / 1e6, stats.TotalSkipped()));
  for (const auto& w : report.metrics.windows) {
    const std::string text = WindowText(w);
    if (text.empty()) continue;
    if (w.opened) sink.Bullet("note: " + text);
    else sink.Warning(text);
  }
  for (const auto& line : ClockLines(trace)) sink.Bullet(line);
  // Who recorded it, when not our probe (trainrx record's torch.profiler fallback says so).
  for (const auto& r : trace.ranks)
    if (const auto it = r.config.find("recorder"); it != r.config.end()) {
      sink.Bullet("note: recorded by " + it->second.Text());
      break;
    }
  for (const auto& e : stats.entries) {
    if (e.severity == profiler::IssueSeverity::kError) continue;  // said above
    sink.Bullet(fmt::format("{} {}: {} (first: {})",
                            e.severity == profiler::IssueSeverity::kInfo ? "note" : "skipped", e.kind, e.count, e.example));
  }

  if (!options.run_summary.empty()) {
    sink.Heading("Run");
    for (const auto& line : options.run_summary) sink.Line(line);
  }
}

// A busy machine (issue 60.5): where machine.busy flagged a rank, the caveat on every figure of
// its steps. A quiet run's text says nothing (its figures are in the JSON's metrics.cpu_load).
void WriteCpuWait(const analyzers::Report& report, Sink& sink) {
  for (const auto& c : report.metrics.cpu_load) {
    const bool flagged = std::any_of(report.findings.begin(), report.findings.end(),
                                     [&](const Finding& f) { return f.id == "machine.busy" && f.rank == c.rank; });
    if (!flagged) continue;
    const auto& l = c.load;
    const double others = l.OtherCpus();
    sink.Line(fmt::format("caveat: {}the program's threads waited for a CPU {} of the time they were ready to run ({:.1f} "
                          "threads waiting on average, {:.1f} of {:.0f} CPUs used by the program{}): every time above "
                          "includes that wait (machine.busy)",
                          report.metrics.cpu_load.size() > 1 ? fmt::format("rank {}: ", c.rank) : "", Pct(l.WaitShare()),
                          l.WaitingThreads(), l.OwnCpus(), l.cpus,
                          others >= 0 ? fmt::format(", {:.1f} by other programs", others) : ""));
  }
}

// The steps: how many, warm-up left out, the share of each phase, and the caveats on those shares.
void WriteSteps(const analyzers::Report& report, Sink& sink) {
  const auto& steps = report.metrics.steps;
  sink.Heading("Steps");
  if (steps.steps.empty()) {
    sink.Line("No training steps found (no ProfilerStep#N, trainrx step markers or repeated Optimizer.step ranges): "
              "rules that need a step to judge by stay silent, and the figures below are totals over the whole trace.");
  } else {
    // Several ranks: their steps in all, and per rank (issue 60: "399 steps" was two ranks' 199 + 200).
    std::map<int32_t, size_t> per_rank;
    for (const auto& row : steps.steps) ++per_rank[row.rank];
    std::string ranks;
    if (per_rank.size() > 1) {
      size_t lo = SIZE_MAX, hi = 0;
      for (const auto& [rank, n] : per_rank) lo = std::min(lo, n), hi = std::max(hi, n);
      ranks = lo == hi ? fmt::format(" in all on {} ranks, {} per rank", per_rank.size(), lo)
                       : fmt::format(" in all on {} ranks, {}-{} per rank", per_rank.size(), lo, hi);
    }
    std::string mean;
    if (steps.median_wall_ns > 0 &&
        std::abs(static_cast<double>(steps.mean_wall_ns - steps.median_wall_ns)) > 0.1 * static_cast<double>(steps.median_wall_ns))
      mean = fmt::format(", mean {} (uneven steps: throughput follows the mean)", Ms(steps.mean_wall_ns));
    sink.Line(fmt::format("{} steps ({}){}, median {}{}", steps.steps.size(), steps.source, ranks, Ms(steps.median_wall_ns), mean));
    for (const auto& p : report.metrics.critical_paths) {
      if (!p.DeviceBehind()) continue;
      sink.Line(fmt::format("  the device ran behind the loop{}: the steps' work finished on the device every {} (the "
                            "median gap between consecutive steps' last device work) while the loop started a step every {}: "
                            "the device's pace is the run's throughput; the step times and phase shares here are the "
                            "loop thread's (uneven: it runs ahead until the device's queue is full, then waits)",
                            report.metrics.critical_paths.size() > 1 ? fmt::format(" on rank {}", p.rank) : "",
                            Ms(p.device_pace_ns), Ms(p.host_pace_ns)));
    }
    if (!steps.warmup_steps.empty()) {
      std::string names;
      for (size_t i = 0; i < steps.warmup_steps.size() && i < 4; ++i) {
        const auto& w = steps.warmup_steps[i];
        names += fmt::format("{}{} {}{}", i ? ", " : "", w.name, Ms(w.wall_ns), w.rank ? fmt::format(" (rank {})", w.rank) : "");
      }
      if (steps.warmup_steps.size() > 4) names += fmt::format(", and {} more", steps.warmup_steps.size() - 4);
      sink.Line(fmt::format("  left out as warm-up (first steps over 3x the median: autotuning, lazy start-up): {}", names));
    }
    for (const auto& note : steps.warmup_notes) sink.Line("  " + note);
    std::vector<std::vector<std::string>> rows = {{"data wait", Pct(steps.data_wait_share)},
                                                  {"forward", Pct(steps.forward_share)},
                                                  {"backward", Pct(steps.backward_share)},
                                                  {"optimizer", Pct(steps.optimizer_share)},
                                                  {"other", Pct(steps.other_share)}};
    if (steps.has_gpu) {
      rows.push_back({"GPU kernels", Pct(steps.gpu_kernel_share)});
      rows.push_back({"GPU memcpy/memset", Pct(steps.gpu_memcpy_share)});
      rows.push_back({"GPU idle", Pct(steps.gpu_idle_share)});
      rows.push_back({"data wait, GPU idle", Pct(steps.data_exposed_share)});
    }
    sink.Table({"phase", "share of step"}, rows);
    if (steps.untrained_forward_share >= 0.01) {
      sink.Line(fmt::format("note: {} of the step time is forward that trains nothing (before the fetch of the batch the "
                            "backward trains on: evaluation or generation inside the steps); counted as other, not forward",
                            Pct(steps.untrained_forward_share)));
    }
    if (steps.fwd_bwd_overlap_share >= 0.01) {
      sink.Line(fmt::format("caveat: forward and backward run at once (on different threads) for {} of the step time; "
                            "the shares count that time as backward only, so forward is understated",
                            Pct(steps.fwd_bwd_overlap_share)));
    }
    // A few steps holding most of the data wait: say which, and what the other steps wait.
    const double data_share = steps.data_exposed_share;  // the data wait itself on CPU-only ranks
    if (!steps.data_worst_steps.empty() && data_share - steps.data_share_without_worst >= 0.01 &&
        data_share >= 1.5 * steps.data_share_without_worst) {
      const bool ranks = std::any_of(steps.steps.begin(), steps.steps.end(),
                                     [&](const auto& s) { return s.rank != steps.steps.front().rank; });
      std::string names;
      int64_t waited = 0;
      const size_t n = steps.data_worst_steps.size();
      constexpr size_t kNamed = 4;  // the first few by name, then how many more (issue 81.10: 50 names on one line)
      for (size_t k = 0; k < n; ++k) {
        const auto& s = steps.steps[static_cast<size_t>(steps.data_worst_steps[k])];
        if (k < kNamed)
          names += fmt::format("{}{}{}", names.empty() ? "" : ", ", s.name, ranks ? fmt::format(" rank {}", s.rank) : "");
        waited += s.data_exposed_ns;
      }
      if (n > kNamed) names += fmt::format(" and {} more", n - kNamed);
      sink.Line(fmt::format("caveat: {} ({}) waited {} for data{}; without {} data wait{} is {} of the step "
                            "(stalls in a few steps are not a loader bottleneck: input.dataloader_bound reads this share)",
                            n == 1 ? "one step" : fmt::format("{} steps", n), names, Ms(waited), n == 1 ? "" : " in all",
                            n == 1 ? "it" : "them", steps.has_gpu ? " with the GPU idle" : "", Pct(steps.data_share_without_worst)));
    }
  }
  WriteCpuWait(report, sink);
}

// The top CPU operators by self time.
void WriteOpTable(const analyzers::Report& report, Sink& sink) {
  const auto& ops = report.metrics.op_table;
  if (ops.rows.empty()) return;
  sink.Heading("Top operators (by self time)");
  // Without steps nothing may speak of steps: shares are of the trace span.
  if (ops.steps > 0) {
    sink.Line(fmt::format("CPU ops starting inside the {} steps, all ranks and threads merged; share = total / summed "
                          "step time ({})", ops.steps, Ms(ops.basis_ns)));
  } else {
    sink.Line(fmt::format("No steps: CPU ops of the whole trace, all ranks and threads merged; share = total / trace "
                          "span ({}, summed over ranks)", Ms(ops.basis_ns)));
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : ops.rows) {
    rows.push_back({ShortName(r.name), std::to_string(r.count), Ms(r.total_ns), Ms(r.self_ns), Us(r.mean_ns), Pct(r.share),
                    Pct(r.self_share)});
  }
  // Inclusive times nest across names: the other row has no total (analyzers::NameTable).
  if (ops.other_names > 0)
    rows.push_back({ops.other.name, std::to_string(ops.other.count), "-", Ms(ops.other.self_ns), "-", "-", Pct(ops.other.self_share)});
  const std::string of = ops.steps > 0 ? "step time" : "trace span";
  sink.Table({"operator", "count", "total", "self", "mean", "total % of " + of, "self % of " + of}, rows);
  sink.Line("names cut to " + std::to_string(kMaxNameChars) + " characters; the JSON report has them in full");
}

// The top nn.Module forward calls (host time).
void WriteModuleTable(const analyzers::Report& report, Sink& sink) {
  const auto& modules = report.metrics.module_table;
  if (modules.rows.empty()) return;
  sink.Heading("Top modules (forward, host time)");
  const auto all_steps = static_cast<int64_t>(report.metrics.steps.steps.size());
  sink.Line(fmt::format("nn.Module forward calls {}, named as in named_modules(); self = less the child modules; "
                        "backward runs on autograd's thread and is not split by module",
                        modules.steps > 0 ? fmt::format("starting inside the {} steps", modules.steps)
                                          : std::string("of the whole trace (no steps)")));
  if (modules.steps > 0 && modules.steps < all_steps)
    sink.Line(fmt::format("module ranges cover the model's first calls only: {} of the {} steps have them, and the "
                          "shares are of those {} steps' time",
                          modules.steps, all_steps, modules.steps));
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : modules.rows) {
    rows.push_back({ShortName(r.name), std::to_string(r.count), Ms(r.total_ns), Ms(r.self_ns), Us(r.mean_ns), Pct(r.share)});
  }
  if (modules.other_names > 0)
    rows.push_back({modules.other.name, std::to_string(modules.other.count), "-", Ms(modules.other.self_ns), "-", "-"});
  sink.Table({"module", "count", "total", "self", "mean", "total % of " + std::string(modules.steps > 0 ? "step time" : "trace span")},
             rows);
}

// The top GPU kernels.
void WriteKernelTable(const analyzers::Report& report, Sink& sink) {
  const auto& kernels = report.metrics.kernel_table;
  if (kernels.rows.empty()) return;
  sink.Heading("Top GPU kernels");
  sink.Line(kernels.steps > 0 ? fmt::format("kernels starting inside the {} steps, all ranks and streams merged", kernels.steps)
                              : std::string("No steps: kernels of the whole trace, all ranks and streams merged"));
  std::vector<std::vector<std::string>> rows;
  auto add = [&](const analyzers::NameRow& r) {
    rows.push_back({ShortName(r.name), std::to_string(r.count), Ms(r.total_ns), Us(r.mean_ns), Pct(r.share)});
  };
  for (const auto& r : kernels.rows) add(r);
  if (kernels.other_names > 0) add(kernels.other);
  sink.Table({"kernel", "count", "total", "mean", "% of kernel time"}, rows);
  sink.Line(fmt::format("kernel time {} (summed over streams); names cut to {} characters, in full in the JSON report",
                        Ms(kernels.basis_ns), kMaxNameChars));
}

// Memory per rank and device: peaks, capacity, growth, out-of-memory events, headroom.
void WriteMemory(const analyzers::Report& report, Sink& sink) {
  if (report.metrics.memory.empty()) return;
  sink.Heading("Memory");
  sink.Line("from the allocator samples in the trace (torch.profiler's profile_memory events; trainrx record samples "
            "the process heap at step boundaries and when backward starts, so its step peak is a lower bound); allocated "
            "at a step's start and the step's peak, over the steady steps; headroom: samples a step could hold in "
            "90 % of the capacity, from the memory one sample takes (the step's rise above its start)");
  std::vector<std::vector<std::string>> rows;
  const auto bytes = [](double b) { return b < 0 ? std::string("-") : analyzers::BytesText(b); };
  for (const auto& m : report.metrics.memory) {
    int64_t first = -1, last = -1;
    for (int64_t v : m.step_start)
      if (v >= 0) last = v, first = first < 0 ? v : first;
    rows.push_back({std::to_string(m.rank), m.device, std::to_string(m.samples), bytes(static_cast<double>(m.peak_allocated)),
                    m.peak_reserved > 0 ? bytes(static_cast<double>(m.peak_reserved)) : "-",
                    m.capacity > 0 ? bytes(static_cast<double>(m.capacity)) + " (" + m.capacity_source + ")" : "unknown",
                    m.capacity > 0 && m.median_step_peak >= 0
                        ? fmt::format("{} ({:.0f} %)", bytes(static_cast<double>(m.median_step_peak)),
                                      100.0 * static_cast<double>(m.median_step_peak) / static_cast<double>(m.capacity))
                        : bytes(static_cast<double>(m.median_step_peak)),
                    first < 0 ? "-" : bytes(static_cast<double>(first)) + " -> " + bytes(static_cast<double>(last)),
                    m.growth_steps >= 2 ? bytes(m.growth_per_step) : "-",
                    m.oom_events > 0 ? fmt::format("{} (asked {})", m.oom_events, bytes(static_cast<double>(m.oom_request_bytes)))
                                     : "0",
                    m.bytes_per_sample <= 0 ? "-"
                    : m.fits_samples > 0
                        ? fmt::format("{} a sample: {}{} fit ({:.1f}x {})", bytes(m.bytes_per_sample),
                                      m.median_step_samples <= 3 ? "up to " : "", m.fits_samples,
                                      static_cast<double>(m.fits_samples) / static_cast<double>(m.samples_per_step),
                                      analyzers::BatchLabel(m))
                        : fmt::format("{} a sample ({})", bytes(m.bytes_per_sample), analyzers::BatchLabel(m))});
  }
  sink.Table({"rank", "device", "samples", "peak allocated", "peak reserved", "capacity", "median step peak",
              "allocated at step start (first -> last)", "growth per step", "out of memory", "headroom"},
             rows);
}

// torch.compile per rank: compilations and their time, compiled regions per step, the eager time
// between graphs, the graph breaks and recompiles the start-up hook named.
void WriteCompile(const analyzers::Report& report, Sink& sink) {
  if (report.metrics.compile.empty()) return;
  sink.Heading("torch.compile");
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : report.metrics.compile)
    rows.push_back({std::to_string(c.rank), std::to_string(c.compiles), Ms(c.compile_ns),
                    c.steps_with_regions > 0 ? fmt::format("{:.0f}", c.regions_per_step) : "-",
                    c.steps_with_regions > 0 ? Ms(static_cast<int64_t>(c.eager_between_ns)) : "-",
                    std::to_string(c.graph_breaks.size()), std::to_string(c.recompiles),
                    c.marks ? "start-up hook" : "trace only (no lines, no guards)"});
  sink.Table({"rank", "compilations", "compile time", "regions per step", "eager between graphs / step", "graph breaks",
              "recompiles", "source"},
             rows);
  for (const auto& c : report.metrics.compile) {
    for (const auto& b : c.graph_breaks) sink.Bullet(fmt::format("graph break at {}: {}", b.where, b.reason));
    for (const auto& r : c.recompile_sites)
      sink.Bullet(fmt::format("{} ({}) compiled again {} time{}; last guard that failed: {}", r.function, r.where, r.count,
                              r.count == 1 ? "" : "s", r.reason));
  }
}

// GPU time by HTA's definitions: the temporal breakdown, idle per stream, launch statistics.
void WriteGpuTime(const analyzers::Report& report, Sink& sink) {
  if (report.metrics.temporal.empty()) return;
  sink.Heading("GPU time (HTA definitions)");
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : report.metrics.temporal) {
    rows.push_back({std::to_string(t.rank), Ms(t.kernel_time_ns), fmt::format("{:.2f}%", t.idle_pct),
                    fmt::format("{:.2f}%", t.compute_pct), fmt::format("{:.2f}%", t.non_compute_pct),
                    t.comm_ns > 0 ? fmt::format("{} ({:.2f}% hidden)", Ms(t.comm_ns), t.comm_overlap_pct) : "-"});
  }
  sink.Table({"rank", "active span", "idle", "compute", "non-compute", "communication (overlapping compute)"}, rows);
  rows.clear();
  for (const auto& t : report.metrics.temporal) {
    for (const auto& s : t.streams) {
      rows.push_back({std::to_string(t.rank), std::to_string(s.stream), Ms(s.host_wait_ns), Ms(s.kernel_wait_ns),
                      Ms(s.other_ns)});
    }
  }
  sink.Table({"rank", "stream", "idle: host wait", "kernel wait", "other"}, rows);
  rows.clear();
  for (const auto& l : report.metrics.launch) {
    rows.push_back({std::to_string(l.rank), std::to_string(l.kernels), fmt::format("{:.1f}", l.mean_cpu_us),
                    fmt::format("{:.1f}", l.mean_gpu_us), fmt::format("{:.1f}", l.mean_delay_us),
                    std::to_string(l.short_kernels)});
  }
  sink.Table({"rank", "GPU activities", "mean launch us", "mean GPU us", "mean delay us", "shorter than launch"}, rows);
  rows.clear();
  for (const auto& t : report.metrics.temporal) {
    const auto& c = t.idle_causes;
    const auto pct = [&](int64_t ns) { return t.idle_ns > 0 ? fmt::format("{} ({:.0f}%)", Ms(ns), 100.0 * static_cast<double>(ns) / static_cast<double>(t.idle_ns)) : Ms(ns); };
    std::string waited;
    for (size_t i = 0; i < c.queued_by_stream.size() && i < 3; ++i)
      waited += fmt::format("{}stream {} {}", i ? ", " : "", c.queued_by_stream[i].stream, Ms(c.queued_by_stream[i].ns));
    rows.push_back({std::to_string(t.rank), Ms(t.idle_ns), pct(c.host_starved_ns), pct(c.allocator_ns), pct(c.queued_ns),
                    pct(c.graph_ns), waited.empty() ? "-" : waited});
  }
  sink.Table({"rank", "device idle", "host-starved", "of it in allocator calls", "queued (work waiting)", "of it inside graphs",
              "queued work waited on"},
             rows);
}

// The critical path of the steps: what set the step's length, by class, and its largest items.
void WriteCriticalPath(const analyzers::Report& report, Sink& sink) {
  if (report.metrics.critical_paths.empty()) return;
  sink.Heading("Critical path (what set the step's length)");
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : report.metrics.critical_paths) {
    std::vector<std::pair<int64_t, int>> by;
    for (int k = 0; k < analyzers::kPathClasses; ++k)
      if (p.class_ns[k] > 0) by.push_back({p.class_ns[k], k});
    std::sort(by.rbegin(), by.rend());
    std::string shares;
    for (const auto& [ns, k] : by)
      shares += fmt::format("{}{} {:.1f}%", shares.empty() ? "" : ", ", analyzers::PathClassName(static_cast<analyzers::PathClass>(k)),
                            p.mean_ns > 0 ? 100.0 * static_cast<double>(ns) / static_cast<double>(p.mean_ns) : 0.0);
    const std::string unit = p.steps > 0 ? " a step" : " (the trace)";
    rows.push_back({std::to_string(p.rank), p.steps > 0 ? std::to_string(p.steps) : "none", Ms(p.mean_ns) + unit, shares});
  }
  sink.Table({"rank", "steps", "path", "by class"}, rows);
  rows.clear();
  for (const auto& p : report.metrics.critical_paths)
    for (size_t i = 0; i < p.top.size() && i < 6; ++i)
      rows.push_back({std::to_string(p.rank), analyzers::PathClassName(p.top[i].cls), p.top[i].what.substr(0, 90),
                      Ms(p.top[i].ns) + (p.steps > 0 ? " a step" : "")});
  sink.Table({"rank", "class", "on the path", "time"}, rows);
  for (const auto& p : report.metrics.critical_paths)
    if (!p.note.empty()) sink.Line(fmt::format("rank {}: {}", p.rank, p.note));
}

// How much of the hardware the steps use (issue 52): MFU with its peak named, FLOPs and bytes by op
// class, the costliest ops with their achieved throughput and roofline bound.
std::string Flops(double f) {
  if (f >= 1e12) return fmt::format("{:.2f} TFLOP", f / 1e12);
  if (f >= 1e9) return fmt::format("{:.2f} GFLOP", f / 1e9);
  if (f >= 1e6) return fmt::format("{:.2f} MFLOP", f / 1e6);
  return fmt::format("{:.0f} FLOP", f);
}
std::string Rate(double tflops) {
  return tflops >= 1 ? fmt::format("{:.1f} TFLOP/s", tflops) : fmt::format("{:.1f} GFLOP/s", tflops * 1e3);
}
void WriteUtilization(const analyzers::Report& report, Sink& sink) {
  if (report.metrics.utilization.empty()) return;
  sink.Heading("Hardware utilization (FLOPs from the recorded shapes)");
  std::vector<std::vector<std::string>> rows;
  for (const auto& u : report.metrics.utilization) {
    const std::string unit = u.steps > 0 ? " a step" : "";
    rows.push_back({std::to_string(u.rank), u.device, u.dtype.empty() ? "-" : u.dtype, Flops(u.model_flops) + unit,
                    u.steps > 0 ? Ms(static_cast<int64_t>(u.step_ns)) : "-", u.steps > 0 ? Rate(u.achieved_tflops) : "-",
                    u.peak_tflops > 0 ? Rate(u.peak_tflops) : "unknown",
                    u.mfu > 0 ? fmt::format("{}{:.{}f}%", u.mfu_lower_bound ? ">= " : "", 100 * u.mfu, u.mfu < 0.001 ? 3 : 1) : "-",
                    fmt::format("{:.0f}% of {}", 100 * u.covered_share, u.device_time ? "kernel time" : "op time")});
  }
  sink.Table({"rank", "device", "dtype", "model FLOPs", "step", "achieved", "dense peak", "MFU", "costed"}, rows);
  for (const auto& u : report.metrics.utilization) {
    if (!u.peak_source.empty()) sink.Line(fmt::format("rank {} peak: {}", u.rank, u.peak_source));
    if (!u.note.empty()) sink.Line(fmt::format("rank {}: {}", u.rank, u.note));
    if (u.six_n_tokens > 0)
      sink.Line(fmt::format("rank {}: 6 x N x tokens = 6 x {:.4g} parameters x {:.0f} tokens = {} a step (the dense-transformer "
                            "rule of thumb, beside the {} counted from the ops)",
                            u.rank, u.params, u.tokens, Flops(u.six_n_tokens), Flops(u.model_flops)));
    if (u.recompute_flops > 0)
      sink.Line(fmt::format("rank {}: activation recomputation: {} a step of forward ops run again in the backward ({:.0f}% on "
                            "top of the model FLOPs; not in MFU){}",
                            u.rank, Flops(u.recompute_flops), 100 * u.recompute_flops / std::max(u.model_flops, 1.0),
                            u.hfu > 0 ? fmt::format(": hardware FLOPs utilization (HFU) {:.1f}%", 100 * u.hfu) : ""));
    if (u.mfu > 0 && u.mfu_lower_bound)
      sink.Line(fmt::format("rank {}: MFU is a lower bound: {:.0f}% of the {} is in ops no FLOP model covers", u.rank,
                            100 * (1 - u.covered_share), u.device_time ? "kernel time" : "op time"));
  }
  rows.clear();
  for (const auto& u : report.metrics.utilization)
    for (const auto& c : u.classes)
      rows.push_back({std::to_string(u.rank), c.op_class, Flops(c.flops), fmt::format("{:.1f} MB", c.bytes / 1e6),
                      Ms(static_cast<int64_t>(c.time_ns)), c.time_ns > 0 ? Rate(c.tflops) : "-",
                      c.time_ns > 0 ? fmt::format("{:.0f} GB/s", c.gbps) : "-", fmt::format("{:.1f}", c.intensity),
                      c.bound.empty() ? "-" : c.bound});
  sink.Table({"rank", "class", "FLOPs", "bytes", "time", "achieved", "bandwidth", "FLOP/byte", "bound"}, rows);
  rows.clear();
  for (const auto& u : report.metrics.utilization)
    for (size_t i = 0; i < u.ops.size() && i < 8; ++i) {
      const auto& o = u.ops[i];
      rows.push_back({std::to_string(u.rank), o.name, o.dtype, fmt::format("{:g}", o.calls), Flops(o.flops),
                      Ms(static_cast<int64_t>(o.time_ns)), o.time_ns > 0 ? Rate(o.tflops) : "-",
                      fmt::format("{:.1f}", o.intensity), o.bound.empty() ? "-" : o.bound});
    }
  sink.Table({"rank", "op", "dtype", "calls", "FLOPs", "time", "achieved", "FLOP/byte", "bound"}, rows);
}

// The findings, by estimated saving: measured value, saving, evidence, examples and fixes.
void WriteFindings(const analyzers::Report& report, Sink& sink) {
  sink.Heading(report.findings.empty() ? "Findings: none" : fmt::format("Findings ({}), by predicted saving",
                                                                        report.findings.size()));
  if (report.findings.empty()) {
    sink.Line(!report.metrics.unfinished.empty()
                  ? "No problem crossed its threshold in the recorded part (the run did not finish: see above)."
              : !report.metrics.losses.empty()
                  ? "No problem crossed its threshold in the part the collector kept (it dropped records: see above)."
                  : "No problem crossed its threshold.");
  }
  // Several ranks: every finding of one rank says which (issue 60.7: per-rank cards had no label).
  std::set<int32_t> ranks;
  for (const auto& s : report.metrics.steps.steps) ranks.insert(s.rank);
  for (const auto& f : report.findings)
    if (f.rank >= 0) ranks.insert(f.rank);
  int index = 0;
  for (const auto& f : report.findings) {
    if (ranks.size() > 1 && f.rank >= 0) {
      Finding labelled = f;
      labelled.title = fmt::format("rank {}: {}", f.rank, f.title);
      sink.FindingHead(labelled, ++index);
    } else {
      sink.FindingHead(f, ++index);
    }
    sink.Line(fmt::format("measured {:.4g} {} (threshold {:.4g}); confidence {}", f.measured, f.measured_unit,
                          f.threshold, analyzers::ConfidenceName(f.confidence)));
    if (!f.predicted.method.empty()) sink.Line(PredictionText(f.predicted));
    if (f.estimated_saving_ns > 0) {
      sink.Line(SavingText(f));
    } else {
      sink.Line("estimated saving: not measurable from this trace (`trainrx fix` measures it)");
    }
    std::string ev;
    for (const auto& e : f.evidence) ev += (ev.empty() ? "" : ", ") + EvidenceText(e);
    sink.Line("evidence: " + ev);
    for (size_t i = 0; i < f.examples.size() && i < 5; ++i) sink.Bullet(f.examples[i]);
    sink.Line("fix (Python): " + f.fix_python);
    sink.Line("fix (C++):    " + f.fix_cpp);
    if (const auto* entry = analyzers::FindCatalogEntry(f.id); entry && *entry->outside_token && f.outside_fix)
      sink.Line(fmt::format("measure it on your unmodified script: trainrx fix --cmd \"python3 train.py ...\" "
                            "(applies {} from outside)",
                            entry->outside_token));
    if (!f.knob.empty()) sink.Line("workload knob: " + f.knob);
  }
}

// The what-if replays of several fixes together (docs/what-if.md): all the findings' fixes, and
// those `analyze --what-if` asked for.
void WriteWhatIf(const analyzers::Report& report, Sink& sink) {
  if (report.metrics.what_if.empty()) return;
  sink.Heading("What-if (the run's dependency graph replayed with fixes applied)");
  std::vector<std::vector<std::string>> rows;
  for (const auto& w : report.metrics.what_if) {
    std::string names;
    for (const auto& n : w.transforms) names += (names.empty() ? "" : " + ") + n;
    const analyzers::Prediction& p = w.prediction;
    rows.push_back({std::to_string(w.rank), w.label, names,
                    p.method == "replay" ? fmt::format("{:.1f}% [{:.1f}, {:.1f}]", p.saving_pct, p.low_pct, p.high_pct) : p.method,
                    p.method == "replay" ? fmt::format("{} -> {}", Ms(p.step_ns_before), Ms(p.step_ns_after)) : "-"});
  }
  sink.Table({"rank", "what", "fixes", "predicted saving [interval]", "step"}, rows);
  // Which of the three step figures the replay predicts (issue 81.10: the median, the mean and the
  // replayed step were printed with no word on which).
  const auto& steps = report.metrics.steps;
  sink.Line(fmt::format("step: the mean steady step before and after (the mean is what throughput follows: {} measured, "
                        "median {}); a saving is 1 - after / before",
                        Ms(steps.mean_wall_ns), Ms(steps.median_wall_ns)));
  for (const auto& w : report.metrics.what_if)
    sink.Line(fmt::format("{}: {}assumes {}", w.label, CalibrationPrefix(w.prediction), w.prediction.assumptions));
}

// The whole document, section by section, through `sink`.
void BuildDocument(const profiler::Trace& trace, const analyzers::Report& report, const RenderOptions& options,
                   Sink& sink) {
  WriteInputs(trace, report, options, sink);
  WriteSteps(report, sink);
  WriteOpTable(report, sink);
  WriteModuleTable(report, sink);
  WriteKernelTable(report, sink);
  WriteMemory(report, sink);
  WriteCompile(report, sink);
  WriteGpuTime(report, sink);
  WriteCriticalPath(report, sink);
  WriteUtilization(report, sink);
  WriteWhatIf(report, sink);
  WriteFindings(report, sink);
}

}  // namespace

void WriteText(const profiler::Trace& trace, const analyzers::Report& report, const analyzers::Thresholds&,
               const RenderOptions& options, std::ostream& out) {
  TextSink sink(out, options.color);
  BuildDocument(trace, report, options, sink);
}

void WriteMarkdown(const profiler::Trace& trace, const analyzers::Report& report, const analyzers::Thresholds&,
                   const RenderOptions& options, std::ostream& out) {
  MarkdownSink sink(out);
  BuildDocument(trace, report, options, sink);
}

}  // namespace trainrx::reports
