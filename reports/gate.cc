#include "trainrx/reports/gate.h"

#include "escape.h"
#include "trainrx/reports/diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "trainrx/experiments/stats.h"
#include "trainrx/profiler/json_writer.h"

namespace trainrx::reports {

using experiments::GateVerdict;
using experiments::GateVerdictName;
using experiments::kGateSchema;
using experiments::MetricDecision;


namespace {

// The current run against the baseline in the metric's own direction, with its 95 % CI: "12.0%
// slower [+10.1%, +14.0%]" for a time, "83.0% lower [-85.2%, -80.1%]" for a throughput (w, the
// "worse" ratio, is time B/A or throughput A/B: the throughput change is 1/w - 1).
std::string Change(const MetricDecision& d) {
  const auto inv = [](double x) { return x > 0 ? 1 / x : 0.0; };
  const double pct = 100 * (d.higher_is_better ? inv(d.worse) - 1 : d.worse - 1);
  const double lo = 100 * (d.higher_is_better ? inv(d.ci_high) - 1 : d.ci_low - 1);
  const double hi = 100 * (d.higher_is_better ? inv(d.ci_low) - 1 : d.ci_high - 1);
  const char* word = d.higher_is_better ? (pct < 0 ? "lower" : "higher") : (pct > 0 ? "slower" : "faster");
  return fmt::format("{:.1f}% {} [{:+.1f}%, {:+.1f}%]", std::abs(pct), word, lo, hi);
}

// "; rules out a slowdown of 2.4% or more" after a passed metric (what green means here).
std::string RulesOutText(const MetricDecision& d) {
  const std::optional<double> out = experiments::PassRulesOut(d);
  return out ? fmt::format("; rules out a slowdown of {:.1f}% or more", 100 * *out) : "";
}

std::string P(double p) { return p < 0.001 ? "<0.001" : fmt::format("{:.3f}", p); }

// "6 trials per side", or "28 current vs 6 baseline trials" when the counts differ.
std::string TrialCounts(const GateReport& r) {
  if (r.baseline_trials == 0 || r.baseline_trials == r.trials) return fmt::format("{} trials per side", r.trials);
  return fmt::format("{} current vs {} baseline trials", r.trials, r.baseline_trials);
}

}  // namespace

void WriteGateText(const GateReport& r, std::ostream& out) {
  out << fmt::format("trainrx gate: {} ({}, {}; tolerance {:.0f}%, a pass rules out a slowdown of {:.0f}% or more)\n",
                     GateVerdictName(r.verdict), TrialCounts(r), r.mode, 100 * r.rule.tolerance, 100 * r.rule.max_undetected);
  for (const auto& w : r.warnings) out << "warning: " << w << "\n";
  for (const auto& d : r.metrics) {
    out << fmt::format("  {:<18} {:<12} baseline {:.3f} {}, current {:.3f} {}: {}, p {} (Holm {}), "
                       "detectable {:.1f}%{}\n",
                       d.name, d.judged ? GateVerdictName(d.verdict) : "not judged", d.baseline_median, d.unit, d.current_median, d.unit, Change(d),
                       P(d.p_value), P(d.p_holm), 100 * (d.detectable - 1), RulesOutText(d));
  }
  if (r.explained) WriteDiffSummary(r.why, out, false, r.why_from);
}

void WriteGateMarkdown(const GateReport& r, std::ostream& out) {
  const char* icon = r.verdict == GateVerdict::kPass ? "✅" : r.verdict == GateVerdict::kFail ? "❌" : "⚠️";
  out << fmt::format("### {} trainrx gate: **{}**\n\n", icon, GateVerdictName(r.verdict));
  out << fmt::format("{} vs baseline {} — {}, {}; tolerance {:.0f}%.\n\n", MarkdownText(r.spec),
                     MarkdownText(r.baseline_file), TrialCounts(r), r.mode,
                     100 * r.rule.tolerance);
  out << "| metric | verdict | baseline | current | change [95% CI] | p (Holm) | detectable | a pass rules out |\n";
  out << "|---|---|---|---|---|---|---|---|\n";
  for (const auto& d : r.metrics) {
    out << fmt::format("| {} | {} | {:.3f} {} | {:.3f} {} | {} | {} | {:.1f}% | {} |\n", MarkdownText(d.name),
                       d.judged ? GateVerdictName(d.verdict) : "not judged", d.baseline_median, MarkdownText(d.unit), d.current_median,
                       MarkdownText(d.unit), Change(d), P(d.p_holm), 100 * (d.detectable - 1),
                       experiments::PassRulesOut(d) ? fmt::format("≥ {:.1f}% slower", 100 * *experiments::PassRulesOut(d))
                                                    : std::string("-"));
  }
  for (const auto& w : r.warnings) out << "\n> warning: " << MarkdownText(w) << "\n";
  if (r.explained) WriteDiffSummary(r.why, out, true, r.why_from);
}

void WriteGateJunit(const GateReport& r, std::ostream& out) {
  const auto esc = [](const std::string& s) { return XmlText(s); };
  int failures = 0, skipped = 0;
  for (const auto& d : r.metrics) {
    failures += d.judged && d.verdict == GateVerdict::kFail;
    skipped += !d.judged || d.verdict == GateVerdict::kInconclusive;
  }
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << fmt::format("<testsuite name=\"trainrx gate\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">\n", r.metrics.size(),
                     failures, skipped);
  // The explanation goes in each failure's text, where a CI job shows the failure.
  std::string why;
  if (r.explained) {
    std::ostringstream text;
    WriteDiffSummary(r.why, text, false, r.why_from);
    why = text.str();
  }
  for (const auto& d : r.metrics) {
    std::string detail = fmt::format("baseline {:.3f} {}, current {:.3f} {}, {}, p(Holm) {}", d.baseline_median, d.unit,
                                     d.current_median, d.unit, Change(d), P(d.p_holm));
    if (d.judged && d.verdict == GateVerdict::kFail) detail += why;
    out << fmt::format("  <testcase classname=\"trainrx.gate\" name=\"{}\">\n", esc(d.name));
    if (!d.judged) out << fmt::format("    <skipped message=\"not judged (the batches differ): {}\"/>\n", esc(detail));
    else if (d.verdict == GateVerdict::kFail) out << fmt::format("    <failure message=\"regression\">{}</failure>\n", esc(detail));
    else if (d.verdict == GateVerdict::kInconclusive) out << fmt::format("    <skipped message=\"inconclusive: {}\"/>\n", esc(detail));
    else out << fmt::format("    <system-out>{}</system-out>\n", esc(detail));
    out << "  </testcase>\n";
  }
  out << "</testsuite>\n";
}

void WriteGateJson(const GateReport& r, std::ostream& out) {
  profiler::JsonWriter w(out, /*pretty=*/true);
  w.BeginObject();
  w.Field("schema", kGateSchema);
  w.Field("verdict", GateVerdictName(r.verdict));
  w.Field("baseline", r.baseline_file);
  w.Field("spec", r.spec);
  w.Field("mode", r.mode);
  w.Field("trials", static_cast<int64_t>(r.trials));
  w.Field("tolerance", r.rule.tolerance, 4);
  w.Field("max_undetected", r.rule.max_undetected, 4);
  w.Objects("metrics", r.metrics, [&](const auto& d) {
    w.Field("name", d.name);
    w.Field("unit", d.unit);
    w.Field("verdict", GateVerdictName(d.verdict));
    w.Field("judged", d.judged);
    w.Field("baseline_median", d.baseline_median, 6);
    w.Field("current_median", d.current_median, 6);
    w.Field("worse_ratio", d.worse, 6);
    w.Field("ci_low", d.ci_low, 6);
    w.Field("ci_high", d.ci_high, 6);
    w.Field("p_value", d.p_value, 6);
    w.Field("p_holm", d.p_holm, 6);
    w.Field("detectable_ratio", d.detectable, 6);
    if (const auto out = experiments::PassRulesOut(d)) w.Field("rules_out_slowdown", *out, 6);
  });
  w.Object("baseline_fingerprint", [&] {
    for (const auto& [k, v] : r.baseline_fingerprint) w.Field(k, v);
  });
  w.Array("warnings", r.warnings, [&](const auto& s) { w.String(s); });
  if (r.explained) {
    if (!r.why_from.empty()) w.Field("why_from", r.why_from);
    w.Object("why", [&] {
      WriteDiffObject(r.why, w);
    });
  }
  w.EndObject();
  out << "\n";
}

void WriteSelfTestText(const experiments::SelfTestReport& r, const experiments::GateRun& run, int repeats,
                       bool across_processes, std::ostream& out) {
  out << fmt::format("trainrx gate self-test on `{}` (median step {:.2f} ms; {} decisions per case, each {}; "
                     "tolerance {:.0f}%)\n",
                     r.spec, r.median_ms, repeats,
                     across_processes ? fmt::format("{} processes per side, interleaved", run.trials)
                                      : fmt::format("up to {} processes of paired A/B blocks, a look after each", run.trials),
                     100 * run.rule.tolerance);
  for (const auto& c : r.cases) {
    const auto ci = experiments::stats::WilsonInterval(c.fail, c.repeats);
    out << fmt::format("  {:<13} fail {:>3}/{}  pass {:>3}/{}  inconclusive {:>3}/{}  -> {} rate {:.1f}% "
                       "[95% CI {:.1f}-{:.1f}%]; {:.1f} processes per decision; measured slowdown median {:+.1f}% "
                       "(CI half-width median {:.1f} points)\n",
                       c.name, c.fail, c.repeats, c.pass, c.repeats, c.inconclusive, c.repeats,
                       c.pct == 0 ? "false-alarm" : "detection", 100.0 * c.fail / std::max(1, c.repeats),
                       100 * ci.low, 100 * ci.high, static_cast<double>(c.processes) / std::max(1, c.repeats),
                       c.estimates.empty() ? 0.0 : 100 * experiments::stats::Median(c.estimates),
                       c.half_widths.empty() ? 0.0 : 100 * experiments::stats::Median(c.half_widths));
    for (const auto& v : c.variants) {
      const auto vi = experiments::stats::WilsonInterval(v.fail, c.repeats);
      out << fmt::format("    same samples, {:<27} fail {:>3}/{}  pass {:>3}/{}  inconclusive {:>3}/{}  -> {:.1f}% "
                         "[95% CI {:.1f}-{:.1f}%]\n",
                         v.rule, v.fail, c.repeats, v.pass, c.repeats, v.inconclusive, c.repeats,
                         100.0 * v.fail / std::max(1, c.repeats), 100 * vi.low, 100 * vi.high);
    }
  }
}

void WriteBaselineSummary(const experiments::Baseline& b, const std::string& path, std::ostream& out) {
  const auto ci = experiments::stats::MedianCi(b.trial_ms);
  out << fmt::format("trainrx: baseline {}: {} trials, median {:.3f} {} [{:.3f}, {:.3f}]\n", path, b.trial_ms.size(),
                     experiments::stats::Median(b.trial_ms), b.unit, ci.low, ci.high);
  for (const auto& t : b.trace) out << fmt::format("trainrx: baseline trace kept: {} ({} kB)\n", t.path, (t.bytes + 1023) / 1024);
}

}  // namespace trainrx::reports
