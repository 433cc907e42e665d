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
  out << fmt::format("\nB - A: {} ms per step in the mean ({}), {} ms in the median; per-step noise (standard error of "
                     "the difference of the means) {} ms{}\n",
                     Delta(d.delta_mean_ns), base > 0 ? fmt::format("{:+.1f}%", 100 * d.delta_mean_ns / base) : "-",
                     Delta(d.delta_median_ns), Ms(d.noise_ns),
                     d.noise_ns > 0 && std::abs(d.delta_mean_ns) < 2 * d.noise_ns ? ": within the noise" : "");
  for (const auto& n : d.notes) out << (md ? "- note: " : "note: ") << n << "\n";

  const auto rows_of = [&](const std::vector<analyzers::DiffRow>& rows, const char* what, double whole) {
    std::vector<std::vector<std::string>> t = {{what, "A ms/step", "B ms/step", "B - A", "of the change", ""}};
    for (const auto& r : rows) t.push_back({r.name, Ms(r.a), Ms(r.b), Delta(r.delta()), Share(r.delta(), whole), r.note});
    Table(t, out, md);
  };
  out << "\n" << h << "By phase (rows add up to the change in the mean step)\n";
  rows_of(d.phases, "phase", d.delta_mean_ns);
  if (!d.gpu.empty()) {
    out << "\n" << h << "GPU per step\n";
    rows_of(d.gpu, "GPU", d.delta_mean_ns);
  }
  if (!d.ops.empty()) {
    out << "\n" << h << fmt::format("By operator (self time per step; all ops together {} ms, {} of the change)\n",
                                    Delta(d.ops_explained_ns), Share(d.ops_explained_ns, d.delta_mean_ns));
    rows_of(d.ops, "operator", d.delta_mean_ns);
  }
  if (!d.kernels.empty()) {
    out << "\n" << h << "By GPU kernel (time per step)\n";
    rows_of(d.kernels, "kernel", d.delta_mean_ns);
  }
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
    std::vector<std::vector<std::string>> t = {{"finding", "", "estimated saving ms/step", "title"}};
    for (const auto& r : d.findings)
      t.push_back({r.name, r.note, Ms(r.note == "new in B" ? r.b : r.a), r.note == "new in B" ? r.b_text : r.a_text});
    Table(t, out, md);
  }
}

void WriteDiffJson(const analyzers::RunDiff& d, std::ostream& out) {
  profiler::JsonWriter w(out, /*pretty=*/true);
  w.BeginObject();
  w.Field("schema", kDiffSchema);
  WriteDiffObject(d, w);
  w.EndObject();
  out << "\n";
}

void WriteDiffSummary(const analyzers::RunDiff& d, std::ostream& out, bool md) {
  const char* item = md ? "- " : "  ";
  out << (md ? "\n**Why** (one more run of each side, recorded and compared):\n\n"
             : "\nwhy (one more run of each side, recorded and compared):\n");
  out << item << fmt::format("step: A {} ms, B {} ms in the mean ({} ms{})\n", Ms(d.a.mean_step_ns), Ms(d.b.mean_step_ns),
                             Delta(d.delta_mean_ns),
                             d.noise_ns > 0 && std::abs(d.delta_mean_ns) < 2 * d.noise_ns ? ", within this traced run's noise" : "");
  auto moved = d.phases;
  std::stable_sort(moved.begin(), moved.end(), [](const auto& x, const auto& y) { return std::abs(x.delta()) > std::abs(y.delta()); });
  for (size_t i = 0; i < moved.size() && i < 2; ++i)
    out << item << fmt::format("{}: {} ms per step ({} of the change)\n", moved[i].name, Delta(moved[i].delta()),
                               Share(moved[i].delta(), d.delta_mean_ns));
  for (size_t i = 0; i < d.ops.size() && i < 3; ++i) {
    const auto& r = d.ops[i];
    const std::string name = md ? MarkdownText(r.name) : r.name;
    out << item << fmt::format("{}: {} ms per step{}\n", name, Delta(r.delta()), r.note.empty() ? "" : " (" + r.note + ")");
  }
  for (const auto& r : d.config) {
    const auto text = [&](const std::string& v) { return md ? MarkdownText(Abbreviated(v)) : Abbreviated(v); };
    out << item << fmt::format("setting {}: {} -> {}\n", text(r.name), text(r.a_text), text(r.b_text));
  }
  for (const auto& r : d.findings) out << item << fmt::format("finding {} {}\n", r.name, r.note);
}

void WriteDiffObject(const analyzers::RunDiff& d, profiler::JsonWriter& w) {
  for (const auto& [key, side] : {std::pair{"a", &d.a}, std::pair{"b", &d.b}}) {
    w.Key(key);
    w.BeginObject();
    w.Field("label", side->label);
    w.Field("steps", side->steps);
    w.Field("median_step_ns", side->median_step_ns, 12);
    w.Field("mean_step_ns", side->mean_step_ns, 12);
    w.Field("p10_step_ns", side->p10_step_ns, 12);
    w.Field("p90_step_ns", side->p90_step_ns, 12);
    w.Field("stddev_step_ns", side->stddev_step_ns, 12);
    w.EndObject();
  }
  w.Field("delta_mean_ns", d.delta_mean_ns, 12);
  w.Field("delta_median_ns", d.delta_median_ns, 12);
  w.Field("noise_ns", d.noise_ns, 12);
  w.Field("ops_explained_ns", d.ops_explained_ns, 12);
  for (const auto& [key, rows] : {std::pair{"phases", &d.phases}, std::pair{"gpu", &d.gpu}, std::pair{"ops", &d.ops},
                                  std::pair{"kernels", &d.kernels}, std::pair{"config", &d.config},
                                  std::pair{"findings", &d.findings}}) {
    w.Key(key);
    w.BeginArray();
    for (const auto& r : *rows) {
      w.BeginObject();
      w.Field("name", r.name);
      if (rows == &d.config) {
        w.Field("a", r.a_text);
        w.Field("b", r.b_text);
      } else {
        w.Field("a_ns", r.a, 12);
        w.Field("b_ns", r.b, 12);
        w.Field("delta_ns", r.delta(), 12);
      }
      if (!r.note.empty()) w.Field("note", r.note);
      w.EndObject();
    }
    w.EndArray();
  }
  w.Key("notes");
  w.BeginArray();
  for (const auto& n : d.notes) w.String(n);
  w.EndArray();
}

}  // namespace trainrx::reports
