// The gate's decision rule and baseline format (see trainrx/experiments/gate.h).
#include "trainrx/experiments/gate.h"
#include "trainrx/experiments/spec.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "trainrx/profiler/json_writer.h"
#include "trainrx/profiler/kineto_writer.h"
#include "trainrx/profiler/trace_names.h"

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
    d.judged = m.judged;
    out.push_back(d);
  }
  // Holm step-down over the judged metrics (a metric shown only is corrected as if alone).
  std::vector<size_t> idx;
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].judged) idx.push_back(i);
  for (auto& d : out)
    if (!d.judged) d.p_holm = d.p_value;
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

std::optional<double> PassRulesOut(const MetricDecision& d) {
  if (!d.judged || d.verdict != GateVerdict::kPass) return std::nullopt;
  return std::max(0.0, d.ci_high - 1);
}

std::string PassAboveToleranceWarning(const MetricDecision& d, const GateRule& rule) {
  const std::optional<double> out = PassRulesOut(d);
  if (!out || *out <= rule.tolerance) return "";
  return fmt::format("{} passed although it rules out only a slowdown of {:.1f}% or more (--pass-below {:.0f}%): a "
                     "slowdown between the tolerance, {:.0f}%, and {:.1f}% is not ruled out",
                     d.name, 100 * *out, 100 * rule.max_undetected, 100 * rule.tolerance, 100 * *out);
}

GateVerdict Overall(const std::vector<MetricDecision>& decisions) {
  bool inconclusive = true;
  for (const auto& d : decisions) inconclusive = inconclusive && !d.judged;  // nothing judged: no verdict
  for (const auto& d : decisions) {
    if (!d.judged) continue;
    if (d.verdict == GateVerdict::kFail) return GateVerdict::kFail;
    inconclusive = inconclusive || d.verdict == GateVerdict::kInconclusive;
  }
  return inconclusive ? GateVerdict::kInconclusive : GateVerdict::kPass;
}

void JudgeByThroughputWhereBatchesDiffer(const std::string& baseline_spec, const std::string& current_spec, bool command,
                                         std::vector<MetricSamples>* metrics, std::vector<std::string>* warnings) {
  Spec a, b;
  if (command || !ParseSpec(baseline_spec, &a).ok() || !ParseSpec(current_spec, &b).ok()) return;
  if (a.SamplesPerStep() == b.SamplesPerStep()) return;
  bool throughput = false;
  for (const auto& m : *metrics) throughput = throughput || m.higher_is_better;
  if (!throughput) return;
  for (auto& m : *metrics)
    if (!m.higher_is_better) m.judged = false;
  warnings->push_back(fmt::format("the baseline processes {} samples a step, this check {}: the gate decides by "
                                  "throughput; time a step is shown, not judged (it would call the larger batch slower "
                                  "for doing more)",
                                  a.SamplesPerStep(), b.SamplesPerStep()));
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
  if (!b.trace.empty()) {
    w.Key("trace");
    w.BeginArray();
    for (const auto& t : b.trace) {
      w.BeginObject();
      w.Field("file", t.file);
      w.Field("bytes", static_cast<int64_t>(t.bytes));
      w.Field("fnv1a64", t.fnv1a64);
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
  out << "\n";
}

namespace {

// "trace": [{"file": "base.trace.json.gz", "bytes": 48211, "fnv1a64": "9c3f..."}] (optional).
Status ParseStoredTrace(simdjson::dom::element doc, const std::string& file, Baseline* b) {
  simdjson::dom::element field;
  if (doc["trace"].get(field) != simdjson::SUCCESS) return Status::Ok();
  simdjson::dom::array arr;
  if (field.get(arr) != simdjson::SUCCESS || arr.size() == 0)
    return Status::Error(fmt::format("{}: field \"trace\" is not a non-empty array of stored trace files", file));
  const std::filesystem::path folder = std::filesystem::path(file).parent_path();
  size_t i = 0;
  for (auto x : arr) {
    std::string_view name, hash;
    uint64_t bytes = 0;
    if (x["file"].get(name) != simdjson::SUCCESS || name.empty() || x["bytes"].get(bytes) != simdjson::SUCCESS ||
        x["fnv1a64"].get(hash) != simdjson::SUCCESS || hash.size() != 16) {
      return Status::Error(fmt::format(
          "{}: \"trace\"[{}] needs \"file\" (a name), \"bytes\" (a count) and \"fnv1a64\" (16 hex digits)", file, i));
    }
    StoredTrace t;
    t.file = std::string(name);
    t.path = (folder / t.file).string();
    t.bytes = bytes;
    t.fnv1a64 = std::string(hash);
    b->trace.push_back(std::move(t));
    ++i;
  }
  return Status::Ok();
}

// FNV-1a 64 of a file's bytes, as 16 hex digits, and its size; false when it cannot be read.
bool HashFile(const std::string& path, std::string* hex, uint64_t* bytes) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  uint64_t h = 0xcbf29ce484222325ull;
  *bytes = 0;
  char buf[1 << 16];
  while (f) {
    f.read(buf, sizeof buf);
    const std::streamsize n = f.gcount();
    for (std::streamsize k = 0; k < n; ++k) {
      h ^= static_cast<unsigned char>(buf[k]);
      h *= 0x100000001b3ull;
    }
    *bytes += static_cast<uint64_t>(n);
  }
  if (f.bad()) return false;
  *hex = fmt::format("{:016x}", h);
  return true;
}

}  // namespace

Status ParseBaseline(const std::string& text, const std::string& file, Baseline* b) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto e = parser.parse(text).get(doc); e) {
    return Status::Error(
        fmt::format("{}: not a trainrx baseline: invalid JSON ({})", file, simdjson::error_message(e)));
  }
  std::string_view schema;
  if (doc["schema"].get(schema) != simdjson::SUCCESS) {
    return Status::Error(
        fmt::format("{}: not a trainrx baseline: no \"schema\" field (expected \"{}\")", file, kBaselineSchema));
  }
  if (schema != kBaselineSchema) {
    return Status::Error(fmt::format("{}: schema \"{}\" is not supported (this trainrx reads \"{}\"; a newer major "
                                     "version needs a newer trainrx)",
                                     file, schema, kBaselineSchema));
  }
  std::string_view spec, unit;
  if (doc["spec"].get(spec) != simdjson::SUCCESS)
    return Status::Error(fmt::format("{}: field \"spec\" missing or not a string", file));
  b->spec = std::string(spec);
  bool command = false;
  if (doc["command"].get(command) == simdjson::SUCCESS) b->command = command;
  if (doc["unit"].get(unit) == simdjson::SUCCESS) b->unit = std::string(unit);
  auto numbers = [&](const char* key, std::vector<double>* v, bool required) {
    simdjson::dom::array arr;
    if (doc[key].get(arr) != simdjson::SUCCESS) {
      if (!required) return Status::Ok();
      return Status::Error(fmt::format("{}: field \"{}\" missing or not an array of numbers", file, key));
    }
    size_t i = 0;
    for (auto x : arr) {
      double d = 0;
      if (x.get(d) != simdjson::SUCCESS || !(d > 0) || !std::isfinite(d))
        return Status::Error(fmt::format("{}: \"{}\"[{}] is not a positive number", file, key, i));
      v->push_back(d);
      ++i;
    }
    return Status::Ok();
  };
  if (Status st = numbers("trial_ms", &b->trial_ms, true); !st.ok()) return st;
  if (Status st = numbers("samples_per_s", &b->samples_per_s, false); !st.ok()) return st;
  if (b->trial_ms.size() < 4) {
    return Status::Error(
        fmt::format("{}: \"trial_ms\" has {} trials; a baseline needs at least 4", file, b->trial_ms.size()));
  }
  simdjson::dom::object fp;
  if (doc["fingerprint"].get(fp) == simdjson::SUCCESS) {
    for (auto [k, v] : fp) {
      std::string_view s;
      if (v.get(s) == simdjson::SUCCESS) b->fingerprint[std::string(k)] = std::string(s);
    }
  }
  return ParseStoredTrace(doc, file, b);
}

Status ReadBaselineFile(const std::string& path, Baseline* b) {
  std::ifstream f(path);
  if (!f) return Status::Error(path + ": cannot open the baseline");
  std::stringstream ss;
  ss << f.rdbuf();
  return ParseBaseline(ss.str(), path, b);
}

Status PrepareBaselineFile(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto parent = fs::absolute(path, ec).parent_path();
  // The nearest folder on the way that exists must be a folder: "-o notes.txt/b.json" where
  // notes.txt is a file says so, rather than "cannot create the folder: Not a directory".
  for (fs::path p = parent; !p.empty(); p = p.parent_path()) {
    if (fs::exists(p, ec)) {
      if (!fs::is_directory(p, ec))
        return Status::Error(fmt::format("{}: {} is a file, not a folder", path, p.string()));
      break;
    }
    if (p == p.parent_path()) break;
  }
  if (!parent.empty() && !fs::exists(parent, ec) && !fs::create_directories(parent, ec))
    return Status::Error(fmt::format("{}: cannot create the folder {}: {}", path, parent.string(), ec.message()));
  if (fs::is_directory(path, ec))
    return Status::Error(path + ": is a folder; give a file name (e.g. " + path + "/baseline.json)");
  const bool existed = fs::exists(path, ec);
  errno = 0;
  const bool writable = static_cast<bool>(std::ofstream(path, std::ios::app));
  const int error = errno;
  if (!existed) fs::remove(path, ec);
  if (!writable)
    return Status::Error(
        fmt::format("{}: cannot open for writing{}", path, error != 0 ? std::string(": ") + std::strerror(error) : ""));
  return Status::Ok();
}

std::string BaselineTracePath(const std::string& baseline_path) {
  std::string stem = baseline_path;
  if (stem.size() > 5 && stem.ends_with(".json")) stem.resize(stem.size() - 5);
  return stem + ".trace.json.gz";
}

Status StoreBaselineTrace(const sets::SetAnalysis& traced, const std::string& trace_path, Baseline* b) {
  if (traced.strategy != sets::Strategy::kMerged) {
    return Status::Error(fmt::format("{}: the traced run has {} trace files, read rank by rank: only a run read as one "
                                     "trace can be stored with the baseline",
                                     trace_path, traced.files.size()));
  }
  const auto ranks = traced.trace.RankIds();
  if (ranks.empty()) return Status::Error(trace_path + ": the traced run recorded nothing to store");
  b->trace.clear();
  for (const int32_t rank : ranks) {
    const std::string path = ranks.size() > 1 ? profiler::RankTracePath(trace_path, rank) : trace_path;
    if (Status st = profiler::ReplaceKinetoFile(traced.trace, rank, path); !st.ok()) return st;
    StoredTrace t;
    t.path = path;
    t.file = std::filesystem::path(path).filename().string();
    if (!HashFile(path, &t.fnv1a64, &t.bytes)) return Status::Error(path + ": cannot read back the stored trace");
    b->trace.push_back(std::move(t));
  }
  return Status::Ok();
}

Status CheckBaselineTrace(const Baseline& b, const std::string& baseline_file) {
  for (const auto& t : b.trace) {
    std::string hex;
    uint64_t bytes = 0;
    std::string what;
    if (!std::filesystem::exists(t.path)) what = "missing";
    else if (!HashFile(t.path, &hex, &bytes)) what = "unreadable";
    else if (bytes != t.bytes) what = fmt::format("not the one stored: {} bytes, the baseline recorded {}", bytes, t.bytes);
    else if (hex != t.fnv1a64)
      what = fmt::format("not the one stored: its content changed (checksum {}, the baseline recorded {})", hex, t.fnv1a64);
    if (what.empty()) continue;
    return Status::Error(fmt::format("{}: its stored trace {} is {}: a diff against it would not explain against the "
                                     "baseline's own run; record the baseline again (gate record-baseline "
                                     "--keep-trace) or check with --explain never",
                                     baseline_file, t.path, what));
  }
  return Status::Ok();
}

}  // namespace trainrx::experiments
