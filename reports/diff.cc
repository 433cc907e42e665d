#include "trainrx/reports/diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "escape.h"
#include "table.h"
#include "trainrx/profiler/json_writer.h"

namespace trainrx::reports {
namespace {

std::string Ms(double ns) { return fmt::format("{:.3f}", ns / 1e6); }
std::string Delta(double ns) { return fmt::format("{:+.3f}", ns / 1e6); }
std::string Share(double part, double whole) {
  return whole != 0 && std::isfinite(part / whole) ? fmt::format("{:.0f}%", 100 * part / whole) : "-";
}
std::string Calls(double c) { return c == 0 ? "0" : c < 10 ? fmt::format("{:.2g}", c) : fmt::format("{:.0f}", c); }
// "noise" / the row's own note, for the last column.
// "Net.head (Linear), Net.body.0 (Linear)": where an op row's op ran ("" : in no module).
std::string Modules(const analyzers::DiffRow& r) {
  std::string s;
  for (const auto& m : r.modules) s += (s.empty() ? "" : ", ") + m;
  return s;
}

bool AnyModules(const std::vector<analyzers::DiffRow>& rows) {
  return std::any_of(rows.begin(), rows.end(), [](const analyzers::DiffRow& r) { return !r.modules.empty(); });
}

std::string Mark(const analyzers::DiffRow& r) {
  std::string m = r.note;
  if (r.noise) m += std::string(m.empty() ? "" : ", ") + "noise";
  return m;
}

// One line of the verdict: within noise, or how many rows are beyond it and how much of the
// change in the mean step the operator rows beyond noise carry.
std::string Verdict(const analyzers::RunDiff& d) {
  if (!d.judged) return "not judged against noise (a side has fewer than two steps): every row is listed";
  if (d.within_noise)
    return "within noise: no row's change exceeds what its per-step variation explains" +
           std::string(d.ranked.empty() ? "" : " (the changes listed below are on one side only, their time within noise)");
  size_t beyond = 0;
  for (const auto& r : d.ranked) beyond += !r.noise;
  const analyzers::DiffRow* first = nullptr;
  for (const auto& r : d.ranked)
    if (!r.noise && !first) first = &r;
  return fmt::format("beyond noise: {} row{}, the first {}; the op, uniform and no-op rows beyond noise carry {} ms of "
                     "the {} ms change in the mean step, the rest ({} ms) is within noise (per-step variation, or a "
                     "uniform machine speed change)",
                     beyond, beyond == 1 ? "" : "s", first ? first->name : "-", Delta(d.beyond_noise_ns), Delta(d.delta_mean_ns),
                     Delta(d.delta_mean_ns - d.beyond_noise_ns));
}

}  // namespace

void WritePredictionChecks(const analyzers::RunDiff& d, std::ostream& out, bool md);

namespace {

// The operator, kernel, input-shape and per-rank collective tables of a diff (each where it has rows).
void WriteDiffDetailTables(const analyzers::RunDiff& d, std::ostream& out, bool md) {
  const char* h = md ? "### " : "";
  const auto rows_of = [&](const std::vector<analyzers::DiffRow>& rows, const char* what, double whole) {
    std::vector<std::vector<std::string>> t = {{what, "A ms/step", "B ms/step", "B - A", "of the change", ""}};
    for (const auto& r : rows) t.push_back({r.name, Ms(r.a), Ms(r.b), Delta(r.delta()), Share(r.delta(), whole), Mark(r)});
    Table(t, out, md);
  };
  if (!d.ops.empty()) {
    out << "\n" << h
        << fmt::format("By operator (self time per step; each op's change beyond the uniform x{:.2f}; all ops together "
                       "{} ms, {} of the change; with the uniform row and the time in no op the rows add up to the change)\n",
                       d.uniform_factor, Delta(d.ops_explained_ns), Share(d.ops_explained_ns, d.delta_mean_ns));
    std::vector<std::vector<std::string>> t = {
        {"operator", "calls A", "calls B", "A ms/step", "B ms/step", "B - A", "beyond uniform", ""}};
    const bool where = AnyModules(d.ops);
    if (where) t[0].push_back("in nn.Module");
    for (const auto& r : d.ops) {
      t.push_back({r.name, Calls(r.calls_a), Calls(r.calls_b), Ms(r.a), Ms(r.b), Delta(r.delta()), Delta(r.contribution_ns), Mark(r)});
      if (where) t.back().push_back(Modules(r));
    }
    for (const auto* r : {&d.uniform, &d.outside}) {
      t.push_back({r->name, "", "", Ms(r->a), Ms(r->b), Delta(r->delta()), Delta(r->contribution_ns), Mark(*r)});
      if (where) t.back().push_back("");
    }
    Table(t, out, md);
  }
  if (!d.kernels.empty()) {
    out << "\n" << h << "By GPU kernel (time per step)\n";
    rows_of(d.kernels, "kernel", d.delta_mean_ns);
  }
  if (!d.shapes.empty()) {
    out << "\n" << h << "Input shapes and dtypes that changed (the op's most frequent recorded inputs; time inclusive)\n";
    std::vector<std::vector<std::string>> t = {{"operator", "A inputs", "B inputs", "A ms/step", "B ms/step", "B - A", ""}};
    const bool where = AnyModules(d.shapes);
    if (where) t[0].push_back("in nn.Module");
    for (const auto& r : d.shapes) {
      t.push_back({r.name.substr(0, r.name.find(' ')), r.a_text, r.b_text, Ms(r.a), Ms(r.b), Delta(r.delta()), Mark(r)});
      if (where) t.back().push_back(Modules(r));
    }
    Table(t, out, md);
  }
  if (!d.collectives.empty()) {
    out << "\n" << h << "Per rank and collective (time per step of that rank)\n";
    std::vector<analyzers::DiffRow> top(d.collectives.begin(), d.collectives.begin() + std::min<size_t>(d.collectives.size(), 12));
    rows_of(top, "rank: collective", d.delta_mean_ns);
  }
}

// The configuration and findings that differ, and A's predictions against B.
void WriteDiffConfigAndFindings(const analyzers::RunDiff& d, std::ostream& out, bool md) {
  const char* h = md ? "### " : "";
  out << "\n" << h << "Configuration\n";
  if (d.config.empty()) {
    out << (md ? "" : "  ") << "nothing recorded differs\n";
  } else {
    std::vector<std::vector<std::string>> t = {{"setting", "A", "B"}};
    for (const auto& r : d.config) t.push_back({r.name, r.a_text, r.b_text});
    Table(t, out, md);
  }
  out << "\n" << h << "Findings\n";
  if (d.findings.empty()) {
    out << (md ? "" : "  ") << "the same findings in both\n";
  } else {
    std::vector<std::vector<std::string>> t = {{"finding", "", "saving A ms/step", "saving B ms/step", "title"}};
    for (const auto& r : d.findings)
      t.push_back({r.name, Mark(r), Ms(r.a), Ms(r.b), r.b_text.empty() ? r.a_text : r.b_text});
    Table(t, out, md);
  }
  WritePredictionChecks(d, out, md);
}


}  // namespace

void WriteDiffText(const analyzers::RunDiff& d, std::ostream& out, bool md) {
  const char* h = md ? "### " : "";
  out << h << "trainrx diff\n\n";
  const auto label = [&](const char* k, const std::string& v) { out << (md ? "- " : "  ") << k << ": " << (md ? MarkdownText(v) : v) << "\n"; };
  label("A", d.a.label);
  label("B", d.b.label);
  out << "\n";
  Table({{"", "steps", "median ms", "mean ms", "p10 ms", "p90 ms"},
         {"A", std::to_string(d.a.steps), Ms(d.a.median_step_ns), Ms(d.a.mean_step_ns), Ms(d.a.p10_step_ns), Ms(d.a.p90_step_ns)},
         {"B", std::to_string(d.b.steps), Ms(d.b.median_step_ns), Ms(d.b.mean_step_ns), Ms(d.b.p10_step_ns), Ms(d.b.p90_step_ns)}},
        out, md);
  const double base = d.a.mean_step_ns;
  out << fmt::format("\nB - A: {} ms per step in the mean ({}), {} ms in the median; the rows below add up to the "
                     "change in the mean, {} ms from the median's (the residual); per-step noise (standard error of "
                     "the difference of the means) {} ms\n",
                     Delta(d.delta_mean_ns), base > 0 ? fmt::format("{:+.1f}%", 100 * d.delta_mean_ns / base) : "-",
                     Delta(d.delta_median_ns), Delta(d.residual_ns), Ms(d.noise_ns));
  out << (md ? "\n**Verdict:** " : "verdict: ") << Verdict(d) << "\n";
  for (const auto& n : d.notes) out << (md ? "- note: " : "note: ") << n << "\n";

  out << "\n" << h
      << "Why, ranked (what changed in the program beyond noise, then within noise, then other rows beyond noise)\n";
  if (d.ranked.empty()) {
    out << (md ? "" : "  ") << "no row beyond noise\n";
  } else {
    std::vector<std::vector<std::string>> t = {{"#", "kind", "row", "A ms/step", "B ms/step", "adds ms", "3 se ms", ""}};
    const bool where = AnyModules(d.ranked);
    if (where) t[0].push_back("in nn.Module");
    for (size_t i = 0; i < d.ranked.size(); ++i) {
      const auto& r = d.ranked[i];
      t.push_back({std::to_string(i + 1), r.kind, r.name, Ms(r.a), Ms(r.b), Delta(r.contribution_ns), Ms(3 * r.se_ns), Mark(r)});
      if (where) t.back().push_back(Modules(r));
    }
    Table(t, out, md);
  }

  const auto rows_of = [&](const std::vector<analyzers::DiffRow>& rows, const char* what, double whole) {
    std::vector<std::vector<std::string>> t = {{what, "A ms/step", "B ms/step", "B - A", "of the change", ""}};
    for (const auto& r : rows) t.push_back({r.name, Ms(r.a), Ms(r.b), Delta(r.delta()), Share(r.delta(), whole), Mark(r)});
    Table(t, out, md);
  };
  out << "\n" << h << "By phase (rows add up to the change in the mean step)\n";
  rows_of(d.phases, "phase", d.delta_mean_ns);
  if (!d.gpu.empty()) {
    out << "\n" << h << "GPU per step\n";
    rows_of(d.gpu, "GPU", d.delta_mean_ns);
  }
  if (!d.critical_path.empty()) {
    out << "\n" << h << "Critical path per step (mean over each side's ranks; not judged against noise)\n";
    std::vector<std::vector<std::string>> t = {{"class", "A ms/step", "B ms/step", "B - A", ""}};
    for (const auto& r : d.critical_path) t.push_back({r.name, Ms(r.a), Ms(r.b), Delta(r.delta()), r.note});
    Table(t, out, md);
  }
  if (!d.utilization.empty()) {
    out << "\n" << h << "Hardware utilization (FLOPs from the recorded shapes; docs/utilization.md)\n";
    std::vector<std::vector<std::string>> t = {{"figure", "A", "B", "B - A", ""}};
    for (const auto& r : d.utilization)
      t.push_back({r.name, fmt::format("{:.2f}", r.a), fmt::format("{:.2f}", r.b), fmt::format("{:+.2f}", r.delta()), r.note});
    Table(t, out, md);
  }
  WriteDiffDetailTables(d, out, md);
  WriteDiffConfigAndFindings(d, out, md);
}

// A's predictions (docs/what-if.md) against B's change: the ones whose finding B lost are the fixes
// taken as applied.
void WritePredictionChecks(const analyzers::RunDiff& d, std::ostream& out, bool md) {
  if (d.predictions.empty()) return;
  const std::string h = md ? "### " : "";
  out << "\n" << h << "A's predictions against B\n";
  std::vector<std::vector<std::string>> t = {{"finding of A", "in B", "predicted saving [interval]", "B's median step", "held"}};
  int gone = 0;
  for (const auto& p : d.predictions) {
    gone += p.gone_in_b ? 1 : 0;
    t.push_back({p.id, p.gone_in_b ? "gone (fix applied)" : "still there",
                 fmt::format("{:.1f}% [{:.1f}, {:.1f}]", p.predicted.saving_pct, p.predicted.low_pct, p.predicted.high_pct),
                 fmt::format("{:.1f}% shorter", p.measured_pct),
                 !p.gone_in_b     ? "-"
                 : p.inside       ? "inside"
                 : p.close        ? "close (within 5 points / 25 %)"
                 : p.undecided    ? "undecided (runs differ +-15 %)"
                                  : "missed"});
  }
  Table(t, out, md);
  if (gone > 1)
    out << (md ? "\n" : "  ") << gone << " findings are gone from B: each prediction is held against the whole change "
        << "(replay them together with `trainrx analyze A --what-if ...`)\n";
}

void WriteDiffJson(const analyzers::RunDiff& d, std::ostream& out) {
  profiler::JsonWriter w(out, /*pretty=*/true);
  w.BeginObject();
  w.Field("schema", kDiffSchema);
  WriteDiffObject(d, w);
  w.EndObject();
  out << "\n";
}

void WriteDiffSummary(const analyzers::RunDiff& d, std::ostream& out, bool md, const std::string& from) {
  const char* item = md ? "- " : "  ";
  const auto text = [&](const std::string& v) { return md ? MarkdownText(Abbreviated(v)) : Abbreviated(v); };
  const std::string how = from.empty() ? "one more run of each side, recorded and compared" : from;
  out << (md ? "\n**Why** (" + MarkdownText(how) + "):\n\n" : "\nwhy (" + how + "):\n");
  out << item << fmt::format("step: A {} ms, B {} ms in the mean ({} ms{})\n", Ms(d.a.mean_step_ns), Ms(d.b.mean_step_ns),
                             Delta(d.delta_mean_ns), d.within_noise ? ", within this traced run's noise" : "");
  for (size_t i = 0; i < d.ranked.size() && i < 3; ++i) {
    const auto& r = d.ranked[i];
    std::string extra = r.note;
    if (r.kind == "op" && r.calls_a != r.calls_b)
      extra += fmt::format("{}{} -> {} calls per step", extra.empty() ? "" : ", ", Calls(r.calls_a), Calls(r.calls_b));
    if (!r.modules.empty()) extra += std::string(extra.empty() ? "" : ", ") + "in " + Modules(r);
    if (r.noise) extra += std::string(extra.empty() ? "" : ", ") + "time within noise";
    out << item << fmt::format("{} {}: {} ms per step{}\n", r.kind, text(r.name), Delta(r.contribution_ns),
                               extra.empty() ? "" : " (" + extra + ")");
  }
  if (d.ranked.empty()) out << item << "no row beyond noise\n";
  auto moved = d.phases;
  std::stable_sort(moved.begin(), moved.end(), [](const auto& x, const auto& y) { return std::abs(x.delta()) > std::abs(y.delta()); });
  for (size_t i = 0; i < moved.size() && i < 2; ++i)
    out << item << fmt::format("{}: {} ms per step ({} of the change{})\n", moved[i].name, Delta(moved[i].delta()),
                               Share(moved[i].delta(), d.delta_mean_ns), moved[i].noise ? ", noise" : "");
  for (const auto& r : d.config) out << item << fmt::format("setting {}: {} -> {}\n", text(r.name), text(r.a_text), text(r.b_text));
  for (const auto& r : d.findings)
    if (r.note != "saving changed") out << item << fmt::format("finding {} {}\n", r.name, r.note);
}

namespace {

void WriteRow(const analyzers::DiffRow& r, profiler::JsonWriter& w) {
  w.BeginObject();
  w.Field("name", r.name);
  if (!r.kind.empty()) w.Field("kind", r.kind);
  if (r.kind == "config") {
    w.Field("a", r.a_text);
    w.Field("b", r.b_text);
  } else {
    w.Field("a_ns", r.a, 12);
    w.Field("b_ns", r.b, 12);
    w.Field("delta_ns", r.delta(), 12);
    w.Field("contribution_ns", r.contribution_ns, 12);
    w.Field("se_ns", r.se_ns, 12);
    w.Field("noise", r.noise);
    w.Field("structural", r.structural);
    if (!r.explains.empty()) {
      w.Array("explains", r.explains, [&](const auto& e) { w.String(e); });
    }
    if (r.kind == "op") {
      w.Field("calls_a", r.calls_a, 6);
      w.Field("calls_b", r.calls_b, 6);
    }
    if (!r.modules.empty()) {
      w.Array("modules", r.modules, [&](const auto& m) { w.String(m); });
    }
    if (r.rank >= 0) w.Field("rank", static_cast<int64_t>(r.rank));
    if (!r.a_text.empty()) w.Field("a_text", r.a_text);
    if (!r.b_text.empty()) w.Field("b_text", r.b_text);
  }
  if (!r.note.empty()) w.Field("note", r.note);
  w.EndObject();
}

}  // namespace

void WriteDiffObject(const analyzers::RunDiff& d, profiler::JsonWriter& w) {
  for (const auto& [key, side_of] : {std::pair{"a", &d.a}, std::pair{"b", &d.b}}) {
    const auto* side = side_of;  // a lambda may not capture a structured binding before C++20's clang 16
    w.Object(key, [&] {
      w.Field("label", side->label);
      w.Field("steps", side->steps);
      w.Field("median_step_ns", side->median_step_ns, 12);
      w.Field("mean_step_ns", side->mean_step_ns, 12);
      w.Field("p10_step_ns", side->p10_step_ns, 12);
      w.Field("p90_step_ns", side->p90_step_ns, 12);
      w.Field("stddev_step_ns", side->stddev_step_ns, 12);
      w.Object("phases_ns", [&] {
        w.Field("data_wait", side->data_wait_ns, 12);
        w.Field("forward", side->forward_ns, 12);
        w.Field("backward", side->backward_ns, 12);
        w.Field("optimizer", side->optimizer_ns, 12);
        w.Field("other", side->other_ns, 12);
      });
    });
  }
  w.Field("delta_mean_ns", d.delta_mean_ns, 12);
  w.Field("delta_median_ns", d.delta_median_ns, 12);
  w.Field("residual_ns", d.residual_ns, 12);
  w.Field("noise_ns", d.noise_ns, 12);
  w.Field("within_noise", d.within_noise);
  w.Field("judged", d.judged);
  w.Field("beyond_noise_ns", d.beyond_noise_ns, 12);
  w.Field("ops_explained_ns", d.ops_explained_ns, 12);
  w.Field("uniform_factor", d.uniform_factor, 6);
  w.Key("uniform");
  WriteRow(d.uniform, w);
  w.Key("outside");
  WriteRow(d.outside, w);
  for (const auto& [key, rows] : {std::pair{"ranked", &d.ranked}, std::pair{"phases", &d.phases}, std::pair{"gpu", &d.gpu}, std::pair{"critical_path", &d.critical_path}, std::pair{"utilization", &d.utilization},
                                  std::pair{"ops", &d.ops}, std::pair{"kernels", &d.kernels}, std::pair{"shapes", &d.shapes},
                                  std::pair{"collectives", &d.collectives}, std::pair{"config", &d.config},
                                  std::pair{"findings", &d.findings}}) {
    w.Array(key, *rows, [&](const auto& r) { WriteRow(r, w); });
  }
  w.Objects("predictions", d.predictions, [&](const auto& p) {
    w.Field("finding", p.id);
    w.Field("gone_in_b", p.gone_in_b);
    w.Field("predicted_saving_pct", p.predicted.saving_pct);
    w.Field("predicted_low_pct", p.predicted.low_pct);
    w.Field("predicted_high_pct", p.predicted.high_pct);
    w.Field("measured_pct", p.measured_pct);
    w.Field("inside", p.inside);
    w.Field("close", p.close);
    w.Field("undecided", p.undecided);
  });
  w.Array("notes", d.notes, [&](const auto& n) { w.String(n); });
}

}  // namespace trainrx::reports
