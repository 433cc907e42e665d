// The gate's decision rule and baseline format (see trainrx/experiments/gate.h).
#include "trainrx/experiments/gate.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "trainrx/profiler/json_writer.h"

namespace trainrx::experiments {

const char* GateVerdictName(GateVerdict v) {
  switch (v) {
    case GateVerdict::kPass: return "pass";
    case GateVerdict::kFail: return "fail";
    case GateVerdict::kInconclusive: return "inconclusive";
  }
  return "inconclusive";
}

std::vector<MetricDecision> DecideGate(const std::vector<MetricSamples>& metrics, const GateRule& rule) {
  std::vector<MetricDecision> out;
  for (const auto& m : metrics) {
    MetricDecision d;
    d.name = m.name;
    d.unit = m.unit;
    d.higher_is_better = m.higher_is_better;
    // Compare(a, b).speedup = median(a) / median(b). "Worse" ratio w: time B/A, throughput A/B.
    stats::CompareOptions co;
    co.alpha = rule.alpha;
    co.resamples = rule.resamples;
    co.seed = rule.seed;
    const auto& first = m.higher_is_better ? m.current : m.baseline;
    const auto& second = m.higher_is_better ? m.baseline : m.current;
    // Paired: ComparePaired's speedup is exp(-median log(current/baseline)) = baseline/current,
    // the same orientation as Compare(baseline, current) for a time metric.
    const stats::Comparison c = m.paired_log_ratios.empty() ? stats::Compare(first, second, co)
                                                            : stats::ComparePaired(m.paired_log_ratios, co);
    d.baseline_median = stats::Median(m.baseline);
    d.current_median = stats::Median(m.current);
    d.worse = c.speedup > 0 ? 1 / c.speedup : 1;
    d.ci_low = c.ci_high > 0 ? 1 / c.ci_high : 1;
    d.ci_high = c.ci_low > 0 ? 1 / c.ci_low : 1;
    // One-sided p for "current is worse" from the two-sided U test.
    d.p_value = d.worse > 1 ? c.p_value / 2 : 1 - c.p_value / 2;
    d.detectable = c.detectable;
    out.push_back(d);
  }
  // Holm step-down over the metrics.
  std::vector<size_t> idx(out.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return out[a].p_value < out[b].p_value; });
  double running = 0;
  for (size_t k = 0; k < idx.size(); ++k) {
    running = std::max(running, std::min(1.0, out[idx[k]].p_value * static_cast<double>(idx.size() - k)));
    out[idx[k]].p_holm = running;
  }
  for (auto& d : out) {
    const bool significant = d.p_holm < rule.alpha && d.ci_low > 1 + rule.fail_ci_margin;
    if (significant && d.worse > 1 + rule.tolerance) d.verdict = GateVerdict::kFail;
    else if (d.ci_high < 1 + rule.max_undetected) d.verdict = GateVerdict::kPass;
    else d.verdict = GateVerdict::kInconclusive;
  }
  return out;
}

GateVerdict Overall(const std::vector<MetricDecision>& decisions) {
  bool inconclusive = decisions.empty();
  for (const auto& d : decisions) {
    if (d.verdict == GateVerdict::kFail) return GateVerdict::kFail;
    inconclusive = inconclusive || d.verdict == GateVerdict::kInconclusive;
  }
  return inconclusive ? GateVerdict::kInconclusive : GateVerdict::kPass;
}

void WriteBaseline(const Baseline& b, std::ostream& out) {
  profiler::JsonWriter w(out, /*pretty=*/true);
  w.BeginObject();
  w.Field("schema", kBaselineSchema);
  w.Field("spec", b.spec);
  w.Field("command", b.command);
  w.Field("unit", b.unit);
  w.Key("fingerprint");
  w.BeginObject();
  for (const auto& [k, v] : b.fingerprint) w.Field(k, v);
  w.EndObject();
  w.Field("trial_ms", b.trial_ms, 6);
  w.Field("samples_per_s", b.samples_per_s, 3);
  w.Field("median", stats::Median(b.trial_ms), 6);
  w.EndObject();
  out << "\n";
}

bool ParseBaseline(const std::string& text, const std::string& file, Baseline* b, std::string* error) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto e = parser.parse(text).get(doc); e) {
    *error = fmt::format("{}: not a trainrx baseline: invalid JSON ({})", file, simdjson::error_message(e));
    return false;
  }
  std::string_view schema;
  if (doc["schema"].get(schema) != simdjson::SUCCESS) {
    *error = fmt::format("{}: not a trainrx baseline: no \"schema\" field (expected \"{}\")", file, kBaselineSchema);
    return false;
  }
  if (schema != kBaselineSchema) {
    *error = fmt::format("{}: schema \"{}\" is not supported (this trainrx reads \"{}\"; a newer major version needs "
                         "a newer trainrx)",
                         file, schema, kBaselineSchema);
    return false;
  }
  std::string_view spec, unit;
  if (doc["spec"].get(spec) != simdjson::SUCCESS) {
    *error = fmt::format("{}: field \"spec\" missing or not a string", file);
    return false;
  }
  b->spec = std::string(spec);
  bool command = false;
  if (doc["command"].get(command) == simdjson::SUCCESS) b->command = command;
  if (doc["unit"].get(unit) == simdjson::SUCCESS) b->unit = std::string(unit);
  auto numbers = [&](const char* key, std::vector<double>* v, bool required) {
    simdjson::dom::array arr;
    if (doc[key].get(arr) != simdjson::SUCCESS) {
      if (required) *error = fmt::format("{}: field \"{}\" missing or not an array of numbers", file, key);
      return !required;
    }
    size_t i = 0;
    for (auto x : arr) {
      double d = 0;
      if (x.get(d) != simdjson::SUCCESS || !(d > 0) || !std::isfinite(d)) {
        *error = fmt::format("{}: \"{}\"[{}] is not a positive number", file, key, i);
        return false;
      }
      v->push_back(d);
      ++i;
    }
    return true;
  };
  if (!numbers("trial_ms", &b->trial_ms, true) || !numbers("samples_per_s", &b->samples_per_s, false)) return false;
  if (b->trial_ms.size() < 4) {
    *error = fmt::format("{}: \"trial_ms\" has {} trials; a baseline needs at least 4", file, b->trial_ms.size());
    return false;
  }
  simdjson::dom::object fp;
  if (doc["fingerprint"].get(fp) == simdjson::SUCCESS) {
    for (auto [k, v] : fp) {
      std::string_view s;
      if (v.get(s) == simdjson::SUCCESS) b->fingerprint[std::string(k)] = std::string(s);
    }
  }
  return true;
}

bool ReadBaselineFile(const std::string& path, Baseline* b, std::string* error) {
  std::ifstream f(path);
  if (!f) {
    *error = path + ": cannot open the baseline";
    return false;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return ParseBaseline(ss.str(), path, b, error);
}

bool PrepareBaselineFile(const std::string& path, std::string* error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto parent = fs::absolute(path, ec).parent_path();
  if (!parent.empty() && !fs::exists(parent, ec) && !fs::create_directories(parent, ec)) {
    *error = fmt::format("{}: cannot create the folder {}: {}", path, parent.string(), ec.message());
    return false;
  }
  const bool existed = fs::exists(path, ec);
  const bool writable = static_cast<bool>(std::ofstream(path, std::ios::app));
  if (!existed) fs::remove(path, ec);
  if (!writable) {
    *error = path + ": cannot open for writing";
    return false;
  }
  return true;
}

}  // namespace trainrx::experiments
