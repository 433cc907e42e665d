#include "trainrx/reports/experiment.h"

#include "escape.h"
#include "table.h"
#include "trainrx/reports/diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "trainrx/analyzers/catalog.h"
#include "trainrx/analyzers/finding.h"
#include "trainrx/experiments/plans.h"
#include "trainrx/profiler/json_writer.h"

namespace trainrx::reports {

using experiments::kExperimentSchema;
namespace {

using profiler::JsonWriter;

const char* Heading(bool md) { return md ? "### " : ""; }
const char* NotePrefix(bool md) { return md ? "- note: " : "note: "; }

std::string P(double p) { return p < 0.001 ? "<0.001" : fmt::format("{:.3f}", p); }

// 0.99088 -> "99.1", 0.99998 -> "99.998": enough digits to tell the level from 100 %.
std::string CiLevel(double level) {
  for (int digits = 1; digits < 6; ++digits) {
    const std::string s = fmt::format("{:.{}f}", 100 * level, digits);
    if (s.rfind("100", 0) != 0) return s;
  }
  return fmt::format("{:.6f}", 100 * level);
}

void WriteComparison(JsonWriter& w, const stats::Comparison& c) {
  w.Field("median_a", c.median_a, 6);
  w.Field("median_b", c.median_b, 6);
  w.Field("speedup", c.speedup, 6);
  w.Field("ci_low", c.ci_low, 6);
  w.Field("ci_high", c.ci_high, 6);
  w.Field("p_value", c.p_value, 6);
  w.Field("detectable_speedup", c.detectable, 6);
  w.Field("verdict", stats::VerdictName(c.verdict));
  w.Field("n_a", static_cast<int64_t>(c.n_a));
  w.Field("n_b", static_cast<int64_t>(c.n_b));
}

void WriteArm(JsonWriter& w, const Arm& a) {
  w.BeginObject();
  w.Field("label", a.label);
  w.Field("trial_ms", a.trial_ms, 6);
  w.Field("samples_per_s", a.samples_per_s, 3);
  if (!a.compile_s.empty()) w.Field("compile_s", a.compile_s, 3);
  if (!a.memory_growth.empty()) {
    w.Field("memory_growth_bytes_per_step", a.memory_growth, 10);
    w.Field("memory_peak_bytes", a.memory_peak, 12);
  }
  w.EndObject();
}

void WriteDifference(JsonWriter& w, const char* key, const stats::Difference& d) {
  w.Object(key, [&] {
    w.Field("median_a", d.median_a, 12);
    w.Field("median_b", d.median_b, 12);
    w.Field("difference", d.diff, 12);
    w.Field("ci_low", d.ci_low, 12);
    w.Field("ci_high", d.ci_high, 12);
    w.Field("p_value", d.p_value, 6);
    w.Field("significant", d.significant);
  });
}

// "memory": growth a step and peak, B - A (bytes), when both sides measured them.
void WriteMemory(JsonWriter& w, const experiments::MemoryComparison& m) {
  if (!m.measured) return;
  w.Object("memory", [&] {
    WriteDifference(w, "growth_bytes_per_step", m.growth);
    WriteDifference(w, "peak_bytes", m.peak);
    w.Field("notable", m.Notable());
  });
}

// A busy machine (issue 60.5): the caveat on the verdict, before the notes; nothing on a quiet one.
void WriteMachineText(const experiments::MachineLoad& m, std::ostream& out, bool md) {
  const std::string note = experiments::MachineNote(m);
  if (!note.empty()) out << (md ? "- **warning:** " : "warning: ") << (md ? MarkdownText(note) : note) << "\n";
}
// "machine": the trials' CPU wait, when any trial measured it.
void WriteMachineJson(JsonWriter& w, const experiments::MachineLoad& m) {
  if (m.measured == 0) return;
  w.Object("machine", [&] {
    w.Field("trials", static_cast<int64_t>(m.trials));
    w.Field("measured", static_cast<int64_t>(m.measured));
    w.Field("starved", static_cast<int64_t>(m.starved));
    w.Field("starved_above_wait_pct", profiler::kBusyWaitPct, 2);
    w.Field("median_wait_pct", m.median_wait_pct, 3);
    w.Field("max_wait_pct", m.max_wait_pct, 3);
    w.Field("median_other_cpus", m.median_other_cpus, 3);
    w.Field("cpus", m.cpus, 0);
    w.Field("busy", m.busy());
  });
}

std::string PValue(double p) { return p < 0.001 ? "p < 0.001" : fmt::format("p = {:.3f}", p); }

// One line on memory for a comparison (issue 36): "memory: grows 2.2 MB a step in A, 0 B in B:
// -2.2 MB a step [-2.3, -2.1], p = 0.008; peak 120.0 MB -> 64.0 MB: -56.0 MB [...], p = ...".
std::string MemoryLine(const experiments::MemoryComparison& m, const std::string& a, const std::string& b) {
  using analyzers::BytesText;
  const auto& g = m.growth;
  const auto& p = m.peak;
  return fmt::format("memory (median of trials): grows {} a step in {}, {} in {}: {} a step [{}, {}], {}{}; peak {} -> {}: "
                     "{} [{}, {}], {}{}",
                     BytesText(g.median_a), a, BytesText(g.median_b), b, BytesText(g.diff), BytesText(g.ci_low),
                     BytesText(g.ci_high), PValue(g.p_value), g.significant ? "" : " (no significant change)",
                     BytesText(p.median_a), BytesText(p.median_b), BytesText(p.diff), BytesText(p.ci_low),
                     BytesText(p.ci_high), PValue(p.p_value), p.significant ? "" : " (no significant change)");
}

}  // namespace

std::string FormatSpeedup(const stats::Comparison& c) {
  return fmt::format("{:.2f}x [{:.2f}, {:.2f}]", c.speedup, c.ci_low, c.ci_high);
}

// The measured speedup as the share of the step it removed, beside the finding's prediction:
// "12.3% [9.1, 15.0]" (1 - 1/speedup, its interval from the speedup's; positive when the fix is
// faster, as every saving trainrx prints); "-" when unmeasured.
double SavingPct(double speedup) { return speedup > 0 ? 100.0 * (1.0 - 1.0 / speedup) : 0.0; }

// The replay's predicted saving with its interval, else the estimate's bound ("<= 12.0%").
std::string PredictedText(const experiments::FixRow& row) {
  // The same sign as the measured saving beside it and as analyze's "predicted saving": positive
  // when the fix is faster.
  if (row.predicted)
    return fmt::format("{:.1f}% [{:.1f}, {:.1f}]", row.predicted_saving_pct + 0.0, row.predicted_low_pct + 0.0,
                       row.predicted_high_pct + 0.0);
  return "not predictable";  // why: under the table (the bound, where there is one, with it)
}
std::string MeasuredSaving(const stats::Comparison& c) {
  if (!(c.speedup > 0) || !(c.ci_low > 0) || !(c.ci_high > 0)) return "-";
  return fmt::format("{:.1f}% [{:.1f}, {:.1f}]", SavingPct(c.speedup) + 0.0, SavingPct(c.ci_low) + 0.0,
                     SavingPct(c.ci_high) + 0.0);
}

// Under fix's table: how many measured savings fell inside their predicted interval, and what the
// rounds column means (sequential rows) with the looks' nominal levels.
// The what-if transform behind a row's prediction: its first finding's, from the catalog ("": none).
static std::string_view RowTransform(const FixRow& row) {
  if (!row.transform.empty()) return row.transform;
  const analyzers::CatalogEntry* e = row.findings.empty() ? nullptr : analyzers::FindCatalogEntry(row.findings.front());
  return e != nullptr ? std::string_view(e->transform) : std::string_view();
}

static void WritePredictionsAndRounds(const FixReport& r, bool sequential, std::ostream& out) {
  int inside = 0, close = 0, predicted = 0;
  for (const auto& row : r.rows)
    if (const auto c = experiments::CheckPrediction(row)) {
      ++predicted;
      inside += c->inside ? 1 : 0;
      close += c->close ? 1 : 0;
    }
  if (predicted > 0)
    out << fmt::format("predictions: {} of {} measured savings inside their interval, {} of {} within max(5 points, 25 %) "
                       "of the point\n",
                       inside, predicted, close, predicted);
  for (const auto& row : r.rows)
    if (!row.predicted)
      out << fmt::format("not predictable: {}: {}\n", row.all ? "all of the above" : row.change,
                         row.not_predictable.empty() ? "no reason given" : row.not_predictable);
  // How often each transform's intervals held where they were measured before: the level a user can
  // read the intervals at (prediction_record.cc; none: never measured).
  std::vector<std::string> said;
  for (const auto& row : r.rows) {
    const std::string_view t = RowTransform(row);
    if (!row.predicted || row.all || t.empty() || std::find(said.begin(), said.end(), t) != said.end()) continue;
    said.emplace_back(t);
    out << "record: " << experiments::RecordText(experiments::FindTransformRecord(t), t) << "\n";
    if (!row.predicted_calibration.empty()) out << "interval: " << row.predicted_calibration << "\n";
  }
  if (sequential) {
    out << (r.sequential.used ? fmt::format("rounds: after which round a row measured across processes stopped "
                                            "getting trials (at most {}; {} spending, alpha {:g}; an in-process row: "
                                            "after which of its processes, each a look)",
                                            r.sequential.max_rounds, r.sequential.spending, r.sequential.alpha)
                              : fmt::format("rounds: after which of its processes (at most {}, each a look) an "
                                            "in-process row stopped",
                                            r.trials))
        << ": decided = significant at that look's nominal level (its CI is at that level too); precise = no effect "
           "as large as the detectable one; futile = could no longer reach significance; max rounds / budget = the "
           "last look.";
    if (!r.sequential.looks.empty()) {
      out << " Looks (round: nominal alpha):";
      for (const auto& l : r.sequential.looks) out << fmt::format(" {}: {:.4f}", l.round, l.nominal_alpha);
    }
    out << "\n";
  }
}

void WriteFixText(const FixReport& r, std::ostream& out, bool md) {
  if (r.rows.empty()) {  // nothing was measured: no trial counts, no median
    out << Heading(md) << fmt::format("trainrx fix {}: baseline {}\n\n", r.workload, r.baseline_label);
  } else {
    bool paired_stops = false;  // in-process rows that stop when decided (issue 40)
    for (const auto& row : r.rows) paired_stops = paired_stops || (row.paired && row.stop != FixRow::Stop::kNotSequential);
    const std::string design =
        r.sequential.used ? fmt::format("rounds of interleaved trials until each row stops, at most {}",
                                        r.sequential.max_rounds)
        : paired_stops    ? fmt::format("in-process trials until each row stops, at most {}", r.trials)
                          : fmt::format("{} interleaved trials per comparison", r.trials);
    out << Heading(md)
        << fmt::format("trainrx fix {}: baseline {} ({}{})\n\n", r.workload, r.baseline_label, design,
                       // Every row in-process: no baseline trial of its own (the rows' A steps are the baseline).
                       r.baseline.trial_ms.empty() ? std::string()
                                                   : fmt::format("; median {:.2f} {}", stats::Median(r.baseline.trial_ms), r.unit));
  }
  bool sequential = r.sequential.used;
  for (const auto& row : r.rows) sequential = sequential || row.stop != FixRow::Stop::kNotSequential;
  std::vector<std::vector<std::string>> rows = {
      {"finding", "change", "design", "predicted", "measured saving", sequential ? "measured speedup [CI]" : "measured speedup [95% CI]",
       "p", "detectable", "verdict"}};
  if (sequential) rows[0].push_back("rounds");
  for (const auto& row : r.rows) {
    std::string ids;
    for (const auto& f : row.findings) ids += (ids.empty() ? "" : ", ") + f;
    // A sequential row's test and CI are at its last look's nominal level: say which when not 95 %.
    std::string speedup = FormatSpeedup(row.cmp);
    if (std::abs(row.level - 0.95) > 5e-4) speedup += fmt::format(" {}%", CiLevel(row.level));
    rows.push_back({row.all ? "(all)" : row.asked ? "(--also)" : ids.empty() ? "-" : ids, row.change, row.paired ? "in-process" : "processes",
                    PredictedText(row),
                    MeasuredSaving(row.cmp), speedup,
                    P(row.cmp.p_value), fmt::format("{:.2f}x", row.cmp.detectable), stats::VerdictName(row.cmp.verdict)});
    if (sequential)
      rows.back().push_back(row.stop == FixRow::Stop::kNotSequential
                                ? "-"
                                : fmt::format("{} ({})", row.stop_round, experiments::StopName(row.stop)));
  }
  if (!r.rows.empty()) {
    Table(rows, out, md);
    out << (r.unit == "ms per sample" ? "\nspeedup = baseline median time per sample / fixed median time per sample (the "
                                        "ratio of throughputs; > 1: the fix is faster); design: "
                                      : "\nspeedup = baseline step time / fixed step time (each the median over trials of a trial's mean "
                                        "step; > 1: the fix is faster); design: ")
        << "in-process = baseline and fix alternate step by step inside each process (paired blocks of steps, "
           "bootstrap CI, Wilcoxon signed-rank p), processes = separate processes interleaved with the baseline "
           "(bootstrap CI over trials, Mann-Whitney U p); detectable: the smallest speedup this run could have "
           "detected; predicted: the saving of the step the what-if replay of the baseline's trace predicts, with its "
           "interval (docs/what-if.md), or, for a fix without a transform, the findings' bound (the time the fix "
           "could remove at most); measured saving: 1 - 1/speedup, beside it (both positive when the fix is faster, "
           "negative when it is slower).\n";
    WritePredictionsAndRounds(r, sequential, out);
    for (const auto& row : r.rows)
      if (row.stop == FixRow::Stop::kFutile)
        out << NotePrefix(md)
            << fmt::format("{}: stopped after {} {}: it could no longer reach significance by {} {} (conditional "
                           "power {:.0f}%); the smallest speedup it could still have detected there: {:.2f}x\n",
                           md ? MarkdownText(row.change) : row.change, row.paired ? "process" : "round", row.stop_round,
                           row.paired ? "process" : "round", row.paired ? r.trials : r.sequential.max_rounds,
                           100 * row.conditional_power, row.detectable_at_max);
  }
  for (const auto& row : r.rows) {
    bool memory_finding = false;
    for (const auto& f : row.findings) memory_finding = memory_finding || f.rfind("memory.", 0) == 0;
    if (row.memory.measured && (memory_finding || row.memory.Notable()))
      out << NotePrefix(md) << (md ? MarkdownText(row.change) : row.change) << ": "
          << MemoryLine(row.memory, "the baseline", "the fixed run") << "\n";
  }
  bool any_code = false;
  for (const auto& row : r.rows) any_code = any_code || !row.code.empty();
  if (any_code) {
    out << (md ? "\n**The code change that makes each fix permanent:**\n\n"
               : "\ncode changes (the measured fixes were applied from outside the script):\n");
    for (const auto& row : r.rows)
      if (!row.code.empty()) out << (md ? "- `" : "  ") << row.change << (md ? "`: " : ": ") << row.code << "\n";
  }
  WriteMachineText(r.machine, out, md);
  for (const auto& n : r.notes) out << NotePrefix(md) << (md ? MarkdownText(n) : n) << "\n";
}

namespace {

// One row of `fix --format json`: its findings and change, the estimate and the prediction, the
// measurement and how the sequential design stopped it, memory, the trials.
void WriteFixRowJson(JsonWriter& w, const FixRow& row) {
  w.BeginObject();
  w.Field("finding", row.findings.empty() ? std::string() : row.findings.front());
  w.Array("findings", row.findings, [&](const auto& f) { w.String(f); });
  w.Field("knob", row.change);
  w.Field("all", row.all);
  if (row.asked) w.Field("asked", true);
  w.Field("transform", row.all ? std::string("all") : std::string(RowTransform(row)));
  if (!row.code.empty()) w.Field("code", row.code);
  w.Field("method", row.paired ? "in-process paired" : "separate processes");
  w.Field("estimated_saving_pct", row.estimated_saving_pct, 3);
  if (row.predicted) {
    w.Field("predicted_saving_pct", row.predicted_saving_pct, 3);
    w.Field("predicted_low_pct", row.predicted_low_pct, 3);
    w.Field("predicted_high_pct", row.predicted_high_pct, 3);
    w.Field("predicted_level", row.predicted_level, 3);  // 0: the replay's range, uncalibrated
    w.Field("predicted_margin_points", row.predicted_margin, 3);  // the range widened by, each side
    if (!row.predicted_calibration.empty()) w.Field("predicted_calibration", row.predicted_calibration);
    if (const auto c = experiments::CheckPrediction(row)) {
      w.Field("prediction_inside", c->inside);
      w.Field("prediction_close", c->close);
    }
  } else {
    w.Field("not_predictable", row.not_predictable);
  }
  if (row.cmp.speedup > 0) w.Field("measured_saving_pct", SavingPct(row.cmp.speedup), 3);
  WriteComparison(w, row.cmp);
  w.Field("ci_level", row.level, 6);
  if (row.stop != FixRow::Stop::kNotSequential) {
    w.Field("stop", experiments::StopName(row.stop));
    w.Field("stop_round", static_cast<int64_t>(row.stop_round));
    if (row.stop == FixRow::Stop::kFutile) {
      w.Field("conditional_power", row.conditional_power, 6);
      w.Field("detectable_at_max_rounds", row.detectable_at_max, 6);
    }
  }
  WriteMemory(w, row.memory);
  w.Key("fixed_trials");
  WriteArm(w, row.fixed);
  w.EndObject();
}

// The sequential design of `fix --format json`: its spending, rounds and looks.
void WriteSequentialJson(JsonWriter& w, const FixReport& r) {
  w.Object("sequential", [&] {
    w.Field("spending", r.sequential.spending);
    w.Field("alpha", r.sequential.alpha, 6);
    w.Field("max_rounds", static_cast<int64_t>(r.sequential.max_rounds));
    w.Field("rounds", static_cast<int64_t>(r.sequential.rounds));
    w.Objects("looks", r.sequential.looks, [&](const auto& l) {
      w.Field("round", static_cast<int64_t>(l.round));
      w.Field("information_fraction", l.t, 6);
      w.Field("critical_z", std::isfinite(l.z) ? l.z : 99.0, 6);
      w.Field("nominal_alpha", l.nominal_alpha, 8);
    });
  });
}

}  // namespace

void WriteFixJson(const FixReport& r, std::ostream& out) {
  JsonWriter w(out, /*pretty=*/true);
  w.BeginObject();
  w.Field("schema", kExperimentSchema);
  w.Field("kind", "fix");
  w.Field("unit", r.unit);
  w.Field("workload", r.workload);
  w.Field("baseline", r.baseline_label);
  w.Field("trials", static_cast<int64_t>(r.trials));
  w.Field("family_alpha", r.family_alpha, 6);
  w.Field("row_alpha", r.row_alpha, 6);
  w.Field("order", r.order);
  w.Key("baseline_trials");
  WriteArm(w, r.baseline);
  w.Array("fixes", r.rows, [&](const auto& row) { WriteFixRowJson(w, row); });
  if (r.sequential.used) WriteSequentialJson(w, r);
  WriteMachineJson(w, r.machine);
  w.Array("notes", r.notes, [&](const auto& n) { w.String(n); });
  w.EndObject();
  out << "\n";
}

void WriteSweepText(const SweepReport& r, std::ostream& out, bool md) {
  out << Heading(md) << fmt::format("trainrx sweep {}: {} cells x {} trials, interleaved\n\n",
                                     r.command.empty() ? r.workload : md ? MarkdownText(r.command) : "`" + r.command + "`",
                                     r.cells.size(), r.trials);
  const bool by_time = !r.by_throughput;  // commands whose samples per step are not known
  bool per_step_known = false;  // commands: a samples/step column where any cell has one
  for (const auto& c : r.cells) per_step_known = per_step_known || (!r.command.empty() && c.samples_per_step > 0);
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head = r.grid_keys;
  head.push_back(fmt::format("median {} [95% CI]", r.unit));
  const std::string& unit = r.throughput_unit;  // a token model's cells count tokens (issue 81.1)
  if (per_step_known) head.push_back(unit + "/step");
  int most_ranks = 1;
  for (const auto& c : r.cells) most_ranks = std::max(most_ranks, c.ranks);
  // Several ranks (issue 60.7): a workload's throughput is its ranks' sum, a command's the first rank's.
  if (!by_time) head.push_back(unit + (most_ranks == 1 ? "/s" : r.command.empty() ? "/s (all ranks)" : "/s (rank 0)"));
  head.insert(head.end(), {by_time ? "time vs best" : "best/this", ""});
  rows.push_back(head);
  const double best = r.cells.empty() ? 0 : r.cells[r.best].samples_per_s;
  for (size_t i = 0; i < r.cells.size(); ++i) {
    const auto& c = r.cells[i];
    std::vector<std::string> row;
    for (const auto& [k, v] : c.knobs) row.push_back(v);
    if (c.out_of_memory) {  // a result of the sweep: this cell does not fit
      row.push_back(c.oom_request_bytes > 0 ? fmt::format("out of memory (asked {:.1f} MB)", c.oom_request_bytes / 1e6)
                                            : std::string("out of memory"));
      if (per_step_known) row.push_back("-");
      if (!by_time) row.push_back("-");
      row.insert(row.end(), {"-", ""});
      rows.push_back(row);
      continue;
    }
    row.push_back(fmt::format("{:.2f} [{:.2f}, {:.2f}]", c.median_ms, c.ci.low, c.ci.high));
    if (per_step_known) row.push_back(c.samples_per_step > 0 ? fmt::format("{:g}", c.samples_per_step) : "?");
    if (!by_time) row.push_back(fmt::format("{:.1f}", c.samples_per_s));
    if (by_time) row.push_back(r.cells[r.best].median_ms > 0 ? fmt::format("{:.2f}x", c.median_ms / r.cells[r.best].median_ms) : "-");
    else row.push_back(c.samples_per_s > 0 ? fmt::format("{:.2f}x", best / c.samples_per_s) : "-");
    row.push_back(i == r.best && r.best_significant ? "<- best"
                  : i == r.best || c.tied_with_best ? "not separated from the best"
                                                    : "");
    rows.push_back(row);
  }
  Table(rows, out, md);
  if (!r.notes.empty() || r.machine.busy()) out << "\n";
  WriteMachineText(r.machine, out, md);
  for (const auto& n : r.notes) out << NotePrefix(md) << (md ? MarkdownText(n) : n) << "\n";
  if (!r.best_significant && r.cells.size() > 1) {
    out << fmt::format("\nno cell is significantly faster than every other: the cells marked \"not separated from the best\" "
                       "are not distinguishable from the fastest with these trials ({}, p >= 0.05), which is not evidence "
                       "that they are equal; more --trials can separate them.\n",
                       r.few_trials ? "Welch's t on log trial medians" : "Mann-Whitney U");
  }
}

void WriteSweepJson(const SweepReport& r, std::ostream& out) {
  JsonWriter w(out, /*pretty=*/true);
  w.BeginObject();
  w.Field("schema", kExperimentSchema);
  w.Field("kind", "sweep");
  w.Field("unit", r.unit);
  if (!r.command.empty()) w.Field("command", r.command);
  w.Field("workload", r.workload);
  w.Field("trials", static_cast<int64_t>(r.trials));
  w.Field("best", static_cast<int64_t>(r.best));
  w.Field("best_significant", r.best_significant);
  w.Field("test", r.few_trials ? "welch_t_few_trials" : "mann_whitney");
  w.Field("smallest_p", r.smallest_p, 6);
  w.Field("ranked_by", r.by_throughput ? "samples_per_s" : "median_time");
  w.Field("throughput_unit", r.throughput_unit);  // what the cells' samples_per_step and samples_per_s count
  w.Field("memory_cap_bytes", static_cast<int64_t>(r.memory_cap_bytes));
  WriteMachineJson(w, r.machine);
  w.Array("notes", r.notes, [&](const auto& n) { w.String(n); });
  w.Objects("cells", r.cells, [&](const auto& c) {
    w.Object("knobs", [&] {
      for (const auto& [k, v] : c.knobs) w.Field(k, v);
    });
    w.Field("median_ms", c.median_ms, 6);
    w.Field("ci_low", c.ci.low, 6);
    w.Field("ci_high", c.ci.high, 6);
    w.Field("samples_per_s", c.samples_per_s, 3);
    if (c.samples_per_step > 0) {
      w.Field("samples_per_step", c.samples_per_step, 3);
      w.Field("ranks", static_cast<int64_t>(c.ranks));
      w.Field("samples_from", c.samples_from);
      w.Field("throughput_unit", c.throughput_unit);
    }
    w.Field("tied_with_best", c.tied_with_best);
    w.Field("out_of_memory", c.out_of_memory);
    if (c.out_of_memory) {
      w.Field("oom_request_bytes", c.oom_request_bytes);
      w.Field("oom_message", c.oom_message);
    }
    w.Key("trials");
    WriteArm(w, c.arm);
  });
  w.EndObject();
  out << "\n";
}

// Why `ab` stopped measuring (issue 60.6), and what it could detect when it stopped undecided.
std::string AbStopText(const AbReport& r) {
  const char* unit = r.paired ? "process" : "round";
  const double detectable = 100 * (r.cmp.detectable - 1);
  switch (r.stop) {
    case FixRow::Stop::kNotSequential: return "";
    case FixRow::Stop::kDecided:
      return fmt::format("stopped after {} {}: decided (significant at that look's level; the interval is at that level too)",
                         unit, r.stop_round);
    case FixRow::Stop::kPrecise:
      return fmt::format("stopped after {} {}: precise, no difference of {:.1f}% or more, and none measured above that",
                         unit, r.stop_round, detectable);
    case FixRow::Stop::kFutile:
      return fmt::format("stopped after {} {} without deciding: futile (conditional power {:.0f}%); by the planned maximum it "
                         "could have detected {:.3f}x at best",
                         unit, r.stop_round, 100 * r.conditional_power, r.detectable_at_max);
    case FixRow::Stop::kMaxRounds:
    case FixRow::Stop::kBudget:
      return fmt::format("stopped after {} {}s ({}) without deciding: the smallest change it could detect is {:.1f}%; more "
                         "--trials{} can decide it",
                         r.stop_round, unit, r.stop == FixRow::Stop::kBudget ? "the --budget" : "the planned maximum",
                         detectable, r.machine.busy() ? " on a quieter machine" : "");
  }
  return "";
}

void WriteAbText(const AbReport& r, std::ostream& out, bool md) {
  const auto& c = r.cmp;
  const std::string design =
      r.paired ? fmt::format("in-process, {} process{} (a look after each, at most {})", r.trials, r.trials == 1 ? "" : "es",
                             std::max(r.trials, r.stop_round))
      : r.sequential.used ? fmt::format("{} interleaved trials per side, in rounds until decided (at most {}; order {})", r.trials,
                                        r.sequential.max_rounds, r.order)
                          : fmt::format("{} interleaved trials per side (order {})", r.trials, r.order);
  out << Heading(md) << fmt::format("trainrx ab: {}\n", design);
  if (md) out << "\n";
  std::vector<std::vector<std::string>> rows = {{"", "config", fmt::format("median {}", r.unit), "95% CI"}};
  const auto ci_a = stats::MedianCi(r.a.trial_ms), ci_b = stats::MedianCi(r.b.trial_ms);
  rows.push_back({"A", r.a.label, fmt::format("{:.3f}", c.median_a), fmt::format("[{:.3f}, {:.3f}]", ci_a.low, ci_a.high)});
  rows.push_back({"B", r.b.label, fmt::format("{:.3f}", c.median_b), fmt::format("[{:.3f}, {:.3f}]", ci_b.low, ci_b.high)});
  Table(rows, out, md);
  if (!md) FullLabels({{"A", r.a.label}, {"B", r.b.label}}, out, md);
  // One number: B's time as a multiple of A's, with its CI (the speedup is its inverse).
  const auto inv = [](double x) { return x > 0 ? 1 / x : 0.0; };
  const double ratio = inv(c.speedup);
  out << fmt::format("\nB vs A: B takes {:.3f}x A's time [{:.3f}, {:.3f}]{} ({} {:.1f}%), {}, smallest detectable "
                     "change {:.1f}%: {}\n",
                     ratio, inv(c.ci_high), inv(c.ci_low),
                     std::abs(r.level - 0.95) > 5e-4 ? fmt::format(" ({}% CI)", CiLevel(r.level)) : std::string(),
                     ratio <= 1 ? "faster by" : "slower by",
                     100 * std::abs(ratio - 1), PValue(c.p_value),
                     100 * (c.detectable - 1),
                     c.verdict == stats::Verdict::kFaster   ? "B is faster"
                     : c.verdict == stats::Verdict::kSlower ? "B is slower"
                                                            : "no significant difference");
  if (const std::string stop = AbStopText(r); !stop.empty()) out << stop << "\n";
  if (r.memory.Notable()) out << NotePrefix(md) << MemoryLine(r.memory, "A", "B") << "\n";
  WriteMachineText(r.machine, out, md);
  for (const auto& n : r.notes) out << NotePrefix(md) << (md ? MarkdownText(n) : n) << "\n";
  if (r.explained) WriteDiffSummary(r.why, out, md);
}

void WriteAbJson(const AbReport& r, std::ostream& out) {
  JsonWriter w(out, /*pretty=*/true);
  w.BeginObject();
  w.Field("schema", kExperimentSchema);
  w.Field("kind", "ab");
  w.Field("trials", static_cast<int64_t>(r.trials));
  w.Field("order", r.order);
  w.Field("unit", r.unit);
  w.Key("a");
  WriteArm(w, r.a);
  w.Key("b");
  WriteArm(w, r.b);
  WriteComparison(w, r.cmp);
  if (r.stop != FixRow::Stop::kNotSequential) {
    w.Field("stop", experiments::StopName(r.stop));
    w.Field("stop_round", static_cast<int64_t>(r.stop_round));
    w.Field("level", r.level, 6);
    if (r.sequential.used) w.Field("max_rounds", static_cast<int64_t>(r.sequential.max_rounds));
    if (r.stop == FixRow::Stop::kFutile) {
      w.Field("conditional_power", r.conditional_power, 6);
      w.Field("detectable_at_max_rounds", r.detectable_at_max, 6);
    }
  }
  WriteMemory(w, r.memory);
  WriteMachineJson(w, r.machine);
  w.Array("notes", r.notes, [&](const auto& n) { w.String(n); });
  if (r.explained) {
    w.Object("why", [&] {
      WriteDiffObject(r.why, w);
    });
  }
  w.EndObject();
  out << "\n";
}

}  // namespace trainrx::reports
