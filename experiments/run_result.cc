#include "trainrx/experiments/run_result.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>

#include "trainrx/analyzers/metrics.h"

namespace trainrx::experiments {

std::string RunResult::Summary() const {
  return fmt::format("rank {}: median step {:.2f} ms, {:.1f} samples/s, loss {:.4f} -> {:.4f}{}", rank, median_step_ms,
                     samples_per_s, first_loss, last_loss, changed.empty() ? "" : fmt::format(" (knobs: {})", changed));
}

Status ReadRunResult(const std::string& path, RunResult* out) {
  simdjson::padded_string text;
  if (auto e = simdjson::padded_string::load(path).get(text); e) {
    *out = {};
    return Status::Error(fmt::format("{}: not a readable run result: {}", path, simdjson::error_message(e)));
  }
  return ParseRunResult(std::string_view(text.data(), text.size()), path, out);
}

Status ParseRunResult(std::string_view text, const std::string& path, RunResult* out) {
  *out = {};
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto e = parser.parse(simdjson::padded_string(text)).get(doc); e)
    return Status::Error(fmt::format("{}: not a readable run result: {}", path, simdjson::error_message(e)));
  std::string_view schema;
  if (doc["schema"].get(schema) != simdjson::SUCCESS || schema != kRunSchema)
    return Status::Error(fmt::format("{}: expected \"schema\": \"{}\"", path, kRunSchema));
  if (doc["median_step_ms"].get(out->median_step_ms) != simdjson::SUCCESS ||
      doc["samples_per_s"].get(out->samples_per_s) != simdjson::SUCCESS)
    return Status::Error(fmt::format("{}: \"median_step_ms\" or \"samples_per_s\" missing or not a number", path));
  simdjson::dom::array steps;
  if (doc["steps"].get(steps) != simdjson::SUCCESS)
    return Status::Error(fmt::format("{}: \"steps\" missing or not an array", path));
  size_t i = 0;
  for (auto step : steps) {
    RunStep s;
    std::string_view arm;
    if (step["ms"].get(s.ms) != simdjson::SUCCESS)
      return Status::Error(fmt::format("{}: steps[{}]: \"ms\" missing or not a number", path, i));
    if (step["arm"].get(arm) == simdjson::SUCCESS && !arm.empty()) s.arm = arm[0];
    if (auto heap = step["heap_bytes"];
        heap.error() == simdjson::SUCCESS && heap.get(s.heap_bytes) != simdjson::SUCCESS)
      return Status::Error(fmt::format("{}: steps[{}]: \"heap_bytes\" is not an integer", path, i));
    out->steps.push_back(s);
    ++i;
  }
  // Optional (older documents, failed loss reads): zero.
  if (doc["rank"].get(out->rank) != simdjson::SUCCESS) out->rank = 0;
  if (doc["mean_step_ms"].get(out->mean_step_ms) != simdjson::SUCCESS) out->mean_step_ms = 0;
  if (doc["first_loss"].get(out->first_loss) != simdjson::SUCCESS) out->first_loss = 0;
  if (doc["last_loss"].get(out->last_loss) != simdjson::SUCCESS) out->last_loss = 0;
  std::string_view changed;
  if (doc["changed"].get(changed) == simdjson::SUCCESS) out->changed = std::string(changed);
  if (simdjson::dom::object cpu; doc["cpu"].get(cpu) == simdjson::SUCCESS)
    if (Status st = ParseCpuLoad(simdjson::minify(cpu), path, &out->cpu); !st.ok()) return st;
  out->json = simdjson::minify(doc);
  return Status::Ok();
}

Status ParseCpuLoad(std::string_view object_json, const std::string& path, profiler::CpuLoad* out) {
  *out = {};
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(simdjson::padded_string(object_json)).get(doc) != simdjson::SUCCESS || !doc.is_object())
    return Status::Error(fmt::format("{}: \"cpu\" is not an object", path));
  const std::pair<const char*, double*> fields[] = {{"wall_ns", &out->wall_ns},       {"run_ns", &out->run_ns},
                                                    {"wait_ns", &out->wait_ns},       {"involuntary", &out->involuntary},
                                                    {"children_ns", &out->children_ns}, {"others_ns", &out->others_ns},
                                                    {"cpus", &out->cpus}};
  for (const auto& [key, into] : fields) {
    auto v = doc[key];
    if (v.error() == simdjson::NO_SUCH_FIELD) continue;
    if (v.get(*into) != simdjson::SUCCESS)
      return Status::Error(fmt::format("{}: \"cpu\".\"{}\" is not a number", path, key));
  }
  out->measured = out->wall_ns > 0;
  return Status::Ok();
}

bool MemoryOfRun(const RunResult& r, double* growth, double* peak) {
  std::vector<int64_t> heap;
  for (const auto& s : r.steps) {
    if (s.heap_bytes < 0) return false;
    heap.push_back(s.heap_bytes);
  }
  if (heap.size() < 2) return false;
  *growth = analyzers::GrowthOf(heap).per_step;
  *peak = static_cast<double>(*std::max_element(heap.begin(), heap.end()));
  return true;
}

}  // namespace trainrx::experiments
