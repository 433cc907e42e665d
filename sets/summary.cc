// Per-rank summaries (trainrx.summary/1): the writer, and the reader with simdjson's DOM parser (a
// summary is small: steps, collectives, findings of one rank).
#include <simdjson.h>

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "trainrx/profiler/json_writer.h"
#include "trainrx/sets/analysis_json.h"
#include "trainrx/sets/summary.h"
#include "rank_sides.h"

namespace trainrx::sets {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

// Field readers: false with `error` "<file>: not a trainrx summary: field '<field>' <what>".
struct Fields {
  const std::string& file;
  Status error;
  const char* kind = "a trainrx summary";  // what the document should be
  bool Fail(std::string_view field, std::string_view what) {
    error = Status::Error(fmt::format("{}: not {}: field '{}' {}", file, kind, field, what));
    return false;
  }
  bool Int(element e, std::string_view key, int64_t* out) {
    if (e[key].get_int64().get(*out) != simdjson::SUCCESS) return Fail(key, "is missing or not an integer");
    return true;
  }
  bool Uint(element e, std::string_view key, uint64_t* out) {
    if (e[key].get_uint64().get(*out) != simdjson::SUCCESS) return Fail(key, "is missing or not a count");
    return true;
  }
  bool Num(element e, std::string_view key, double* out) {
    if (e[key].get_double().get(*out) == simdjson::SUCCESS) return true;
    int64_t i = 0;
    if (e[key].get_int64().get(i) == simdjson::SUCCESS) {
      *out = static_cast<double>(i);
      return true;
    }
    return Fail(key, "is missing or not a number");
  }
  bool Str(element e, std::string_view key, std::string* out) {
    std::string_view v;
    if (e[key].get_string().get(v) != simdjson::SUCCESS) return Fail(key, "is missing or not a string");
    *out = std::string(v);
    return true;
  }
  bool Bool(element e, std::string_view key, bool* out) {
    if (e[key].get_bool().get(*out) != simdjson::SUCCESS) return Fail(key, "is missing or not true/false");
    return true;
  }
  bool Arr(element e, std::string_view key, array* out) {
    if (e[key].get_array().get(*out) != simdjson::SUCCESS) return Fail(key, "is missing or not an array");
    return true;
  }
};

bool ReadStepRow(Fields& f, element e, analyzers::StepRow* r) {
  using W = analyzers::StepField::When;
  int64_t rank = 0;
  if (!f.Int(e, "rank", &rank) || !f.Str(e, "name", &r->name)) return false;
  r->rank = static_cast<int32_t>(rank);
  // Summaries write steady rows: every figure but those a row may leave out (StepField::CarriedBy).
  for (const analyzers::StepField& d : analyzers::StepFields())
    if (d.when == W::kGpu && e[d.name].error() == simdjson::SUCCESS) r->has_gpu = true;
  for (const analyzers::StepField& d : analyzers::StepFields()) {
    if (d.when == W::kNonZero && e[d.name].error() != simdjson::SUCCESS) continue;  // 0
    if (d.when == W::kGpu && !r->has_gpu) continue;
    if (!f.Int(e, d.name, &(r->*d.member))) return false;
  }
  if (!r->has_gpu) r->data_exposed_ns = r->data_wait_ns;  // no GPU: all of the data wait is exposed
  return true;
}

template <typename Enum>
bool ReadEnum(Fields& f, element e, std::string_view key, const char* (*name)(Enum), int count, Enum* out) {
  std::string v;
  if (!f.Str(e, key, &v)) return false;
  for (int i = 0; i < count; ++i)
    if (v == name(static_cast<Enum>(i))) {
      *out = static_cast<Enum>(i);
      return true;
    }
  return f.Fail(key, "is not a known value, got '" + v + "'");
}

bool ReadFinding(Fields& f, element e, analyzers::Finding* x) {
  int64_t rank = 0;
  if (!f.Str(e, "id", &x->id) || !ReadEnum(f, e, "severity", analyzers::SeverityName, 4, &x->severity) ||
      !ReadEnum(f, e, "confidence", analyzers::ConfidenceName, 3, &x->confidence) || !f.Str(e, "title", &x->title) ||
      !f.Int(e, "rank", &rank) || !f.Num(e, "measured", &x->measured) || !f.Num(e, "threshold", &x->threshold) ||
      !f.Str(e, "unit", &x->measured_unit) || !f.Num(e, "estimated_saving_pct", &x->estimated_saving_pct) ||
      !f.Int(e, "estimated_saving_ns", &x->estimated_saving_ns) || !f.Int(e, "saving_bound_ns", &x->saving_bound_ns) ||
      !f.Str(e, "saving_bound", &x->saving_bound) || !f.Int(e, "steps", &x->steps))
    return false;
  x->rank = static_cast<int32_t>(rank);
  object evidence;
  if (e["evidence"].get_object().get(evidence) != simdjson::SUCCESS) return f.Fail("evidence", "is missing or not an object");
  for (auto [k, v] : evidence) {
    int64_t i = 0;
    double d = 0;
    std::string_view s;
    if (v.get_int64().get(i) == simdjson::SUCCESS) x->evidence.push_back({std::string(k), i});
    else if (v.get_double().get(d) == simdjson::SUCCESS) x->evidence.push_back({std::string(k), d});
    else if (v.get_string().get(s) == simdjson::SUCCESS) x->evidence.push_back({std::string(k), std::string(s)});
    else return f.Fail("evidence." + std::string(k), "is not a number or a string");
  }
  array examples;
  if (!f.Arr(e, "examples", &examples)) return false;
  for (auto ex : examples) {
    std::string_view s;
    if (ex.get_string().get(s) != simdjson::SUCCESS) return f.Fail("examples", "holds a non-string");
    x->examples.emplace_back(s);
  }
  element fix;
  if (e["fix"].get(fix) != simdjson::SUCCESS) return f.Fail("fix", "is missing");
  if (!f.Str(fix, "python", &x->fix_python) || !f.Str(fix, "cpp", &x->fix_cpp) || !f.Str(fix, "knob", &x->knob)) return false;
  element predicted;
  if (e["predicted"].get(predicted) != simdjson::SUCCESS) return true;  // optional: none predicted
  analyzers::Prediction& p = x->predicted;
  if (!f.Str(predicted, "method", &p.method) || !f.Str(predicted, "transform", &p.transform) ||
      !f.Str(predicted, "assumptions", &p.assumptions))
    return false;
  if (p.method != "replay") return true;
  // "level" and "calibration" came after the first summaries (issue 79.5): optional.
  if (double level = 0; predicted["level"].get_double().get(level) == simdjson::SUCCESS) p.level = level;
  if (double margin = 0; predicted["margin"].get_double().get(margin) == simdjson::SUCCESS) p.margin = margin;
  if (std::string_view c; predicted["calibration"].get_string().get(c) == simdjson::SUCCESS) p.calibration = c;
  return f.Num(predicted, "saving_pct", &p.saving_pct) && f.Num(predicted, "low_pct", &p.low_pct) &&
         f.Num(predicted, "high_pct", &p.high_pct) && f.Int(predicted, "step_ns_before", &p.step_ns_before) &&
         f.Int(predicted, "step_ns_after", &p.step_ns_after) && f.Num(predicted, "replay_error_pct", &p.replay_error_pct);
}

}  // namespace

void WriteSummary(const analyzers::RankSide& side, std::ostream& out) {
  profiler::JsonWriter w(out, /*pretty=*/false);
  w.BeginObject();
  w.Field("schema", kSummarySchema);
  const auto& info = side.info;
  w.Object("rank_info", [&] {
    w.Field("rank", info.rank);
    w.Field("world_size", info.world_size);
    w.Field("backend", info.backend);
    w.Field("source", info.source);
    w.Field("rank_source", info.rank_source);
    w.Field("job", info.job);
    w.Field("base_time_ns", info.base_time_ns);
    w.Objects("devices", info.devices, [&](const auto& d) {
      w.Field("id", d.id);
      w.Field("name", d.name);
      w.Field("total_global_mem", d.total_global_mem);
      w.Field("compute_major", d.compute_major);
      w.Field("compute_minor", d.compute_minor);
      w.Field("num_sms", d.num_sms);
    });
    w.Object("config", [&] {  // the collector's block, values as JSON text
      for (const auto& [k, v] : info.config) w.Field(k, v.json());  // the JSON text, as a string
    });
  });
  w.Field("events", side.events);
  w.Field("bytes", side.bytes);
  w.Field("skipped", side.skipped);
  w.Object("machine", [&] {
    w.Field("cpu_count", side.cpu_count);
    w.Field("intra_op_threads", side.intra_op_threads);
    w.Field("local_ranks", side.local_ranks);
  });
  w.Key("inputs");  // the rank's model input shape (RankSide::input_shape)
  w.BeginObject();
  w.Field("shape", side.input_shape);
  w.Field("steps_with_shape", side.input_shape_steps);
  w.Field("steps_with_shapes", side.shaped_steps);
  w.EndObject();
  w.Object("steps", [&] {
    w.Field("source", side.steps_source);
    w.Field("has_gpu", side.steps_have_gpu);
    w.Array("rows", side.steps, [&](const auto& r) { WriteStepRow(w, r, true); });
    w.Array("warmup", side.warmup_steps, [&](const auto& r) { WriteStepRow(w, r, true); });
  });
  // Collectives as [name index, ts_ns, dur_ns, in_steps (0/1)], names listed once.
  std::vector<std::string_view> names(side.names->begin(), side.names->end());
  w.Key("collective_names");
  w.BeginArray();
  for (auto n : names) w.String(n);
  w.EndArray();
  for (const auto& [key, list] : {std::pair{"gpu_collectives", &side.gpu}, std::pair{"gloo_collectives", &side.gloo}}) {
    w.Key(key);
    w.BeginArray();
    for (const auto& c : *list) {
      w.BeginArray();
      w.Int(std::lower_bound(names.begin(), names.end(), c.name) - names.begin());
      w.Int(c.ts_ns);
      w.Int(c.dur_ns);
      w.Int(c.in_steps ? 1 : 0);
      w.EndArray();
    }
    w.EndArray();
  }
  w.Array("findings", side.findings, [&](const auto& f) { WriteFinding(w, f); });
  w.Array("unfinished", side.unfinished, [&](const auto& u) { WriteUnfinished(w, u); });
  w.Array("windows", side.windows, [&](const auto& win) { WriteWindow(w, win); });
  w.EndObject();
  out << "\n";
}


bool IsSummaryPath(const std::string& path) {
  constexpr std::string_view kSuffix = ".summary.json";
  return path.size() >= kSuffix.size() && path.compare(path.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

namespace {

// ReadSummary's fields, false with f.error set.
bool ReadFields(element doc, analyzers::RankSide* side, Fields& f) {
  std::string schema;
  if (!f.Str(doc, "schema", &schema)) return false;
  if (schema != kSummarySchema) return f.Fail("schema", fmt::format("is '{}', expected '{}'", schema, kSummarySchema));
  *side = {};
  element info;
  if (doc["rank_info"].get(info) != simdjson::SUCCESS) return f.Fail("rank_info", "is missing");
  int64_t rank = 0, world = 0;
  if (!f.Int(info, "rank", &rank) || !f.Int(info, "world_size", &world) || !f.Str(info, "backend", &side->info.backend) ||
      !f.Str(info, "source", &side->info.source) || !f.Str(info, "rank_source", &side->info.rank_source) ||
      !f.Str(info, "job", &side->info.job) || !f.Int(info, "base_time_ns", &side->info.base_time_ns))
    return false;
  side->info.rank = static_cast<int32_t>(rank);
  side->info.world_size = static_cast<int32_t>(world);
  // "devices" came after the first summaries: optional, but whole when present.
  if (array devices; info["devices"].get_array().get(devices) == simdjson::SUCCESS) {
    for (auto d : devices) {
      profiler::DeviceProperties p;
      int64_t id = 0, major = 0, minor = 0, sms = 0;
      if (!f.Int(d, "id", &id) || !f.Str(d, "name", &p.name) || !f.Int(d, "total_global_mem", &p.total_global_mem) ||
          !f.Int(d, "compute_major", &major) || !f.Int(d, "compute_minor", &minor) || !f.Int(d, "num_sms", &sms))
        return false;
      p.id = static_cast<int32_t>(id), p.compute_major = static_cast<int32_t>(major);
      p.compute_minor = static_cast<int32_t>(minor), p.num_sms = static_cast<int32_t>(sms);
      side->info.devices.push_back(std::move(p));
    }
  }
  object config;
  if (info["config"].get_object().get(config) != simdjson::SUCCESS) return f.Fail("rank_info.config", "is not an object");
  for (auto [k, v] : config) {
    std::string_view s;
    if (v.get_string().get(s) != simdjson::SUCCESS) return f.Fail("rank_info.config." + std::string(k), "is not a string");
    side->info.config.emplace(std::string(k), profiler::ConfigValue::Json(std::string(s)));
  }
  element machine, steps;
  if (!f.Uint(doc, "events", &side->events) || !f.Uint(doc, "bytes", &side->bytes) || !f.Uint(doc, "skipped", &side->skipped))
    return false;
  if (doc["machine"].get(machine) != simdjson::SUCCESS) return f.Fail("machine", "is missing");
  if (!f.Num(machine, "cpu_count", &side->cpu_count) || !f.Num(machine, "intra_op_threads", &side->intra_op_threads) ||
      !f.Num(machine, "local_ranks", &side->local_ranks))
    return false;
  // "inputs" came after the first summaries: optional, but whole when present.
  if (element inputs; doc["inputs"].get(inputs) == simdjson::SUCCESS) {
    if (!f.Str(inputs, "shape", &side->input_shape) || !f.Int(inputs, "steps_with_shape", &side->input_shape_steps) ||
        !f.Int(inputs, "steps_with_shapes", &side->shaped_steps))
      return false;
  }
  if (doc["steps"].get(steps) != simdjson::SUCCESS) return f.Fail("steps", "is missing");
  if (!f.Str(steps, "source", &side->steps_source) || !f.Bool(steps, "has_gpu", &side->steps_have_gpu)) return false;
  for (const auto& [key, rows] : {std::pair{"rows", &side->steps}, std::pair{"warmup", &side->warmup_steps}}) {
    array a;
    if (!f.Arr(steps, key, &a)) return false;
    for (auto r : a) {
      analyzers::StepRow row;
      if (!ReadStepRow(f, r, &row)) return false;
      rows->push_back(std::move(row));
    }
  }
  array names;
  if (!f.Arr(doc, "collective_names", &names)) return false;
  std::vector<std::string_view> interned;
  for (auto n : names) {
    std::string_view s;
    if (n.get_string().get(s) != simdjson::SUCCESS) return f.Fail("collective_names", "holds a non-string");
    interned.push_back(side->Intern(s));
  }
  for (const auto& [key, list] : {std::pair{"gpu_collectives", &side->gpu}, std::pair{"gloo_collectives", &side->gloo}}) {
    array a;
    if (!f.Arr(doc, key, &a)) return false;
    for (auto c : a) {
      array t;
      int64_t v[4];
      size_t i = 0;
      if (c.get_array().get(t) != simdjson::SUCCESS || t.size() != 4) return f.Fail(key, "holds an entry that is not [name, ts, dur, in_steps]");
      for (auto x : t)
        if (x.get_int64().get(v[i++]) != simdjson::SUCCESS) return f.Fail(key, "holds a non-integer");
      if (v[0] < 0 || static_cast<size_t>(v[0]) >= interned.size()) return f.Fail(key, "names a collective beyond collective_names");
      list->push_back({interned[static_cast<size_t>(v[0])], v[1], v[2], v[3] != 0});
    }
  }
  array findings;
  if (!f.Arr(doc, "findings", &findings)) return false;
  for (auto e : findings) {
    analyzers::Finding x;
    if (!ReadFinding(f, e, &x)) return false;
    side->findings.push_back(std::move(x));
  }
  array unfinished, windows;
  if (!f.Arr(doc, "unfinished", &unfinished) || !f.Arr(doc, "windows", &windows)) return false;
  for (auto e : unfinished) {
    analyzers::UnfinishedRank u;
    int64_t r = 0;
    if (!f.Int(e, "rank", &r) || !f.Str(e, "source", &u.source) || !f.Str(e, "end_reason", &u.end_reason) ||
        !f.Int(e, "recorded_ns", &u.recorded_ns) || !f.Int(e, "steps", &u.steps) || !f.Int(e, "open_ranges", &u.open_ranges))
      return false;
    if (e["behind_ns"].get_int64().get(u.behind_ns) != simdjson::SUCCESS) u.behind_ns = -1;  // written only when known
    u.rank = static_cast<int32_t>(r);
    side->unfinished.push_back(std::move(u));
  }
  for (auto e : windows) {
    analyzers::RecordedWindow w;
    int64_t r = 0;
    if (!f.Int(e, "rank", &r) || !f.Int(e, "skip", &w.skip) || !f.Int(e, "steps", &w.steps) ||
        !f.Str(e, "boundary", &w.boundary) || !f.Int(e, "run_boundaries", &w.run_boundaries) ||
        !f.Bool(e, "opened", &w.opened) || !f.Bool(e, "closed", &w.closed) ||
        !f.Int(e, "gpu_records_outside", &w.gpu_records_outside))
      return false;
    w.rank = static_cast<int32_t>(r);
    side->windows.push_back(std::move(w));
  }
  return true;
}

}  // namespace

Status ReadSummary(const std::string& path, analyzers::RankSide* side) {
  Fields f{path, {}};
  simdjson::dom::parser parser;
  element doc;
  if (auto e = parser.load(path).get(doc); e != simdjson::SUCCESS)
    return Status::Error(fmt::format("{}: cannot read a summary: {}", path, simdjson::error_message(e)));
  if (!ReadFields(doc, side, f)) return f.error;
  return {};
}

void WriteFileSides(const FileSides& file, const std::string& path, std::ostream& out) {
  profiler::JsonWriter w(out, /*pretty=*/false);
  w.BeginObject();
  w.Field("schema", kFileSidesSchema);
  w.Field("file", path);
  w.Object("ingest", [&] {
    w.Field("events", file.stats.events_read);
    w.Field("bytes", file.stats.bytes_read);
    w.Objects("issues", file.stats.entries, [&](const auto& e) {
      w.Field("kind", e.kind);
      w.Field("severity", static_cast<int64_t>(e.severity));
      w.Field("count", e.count);
      w.Field("example", e.example);
    });
  });
  w.Key("sides");
  w.BeginArray();
  for (const auto& side : file.sides) {
    std::ostringstream one;
    WriteSummary(side, one);
    std::string text = std::move(one).str();
    while (!text.empty() && text.back() == '\n') text.pop_back();
    w.Raw(text);
  }
  w.EndArray();
  w.EndObject();
}

Status ParseFileSides(std::string_view json, const std::string& name, FileSides* out) {
  *out = {};
  Fields f{name, {}, "the sides of a trace file (trainrx.file_sides/1)"};
  simdjson::dom::parser parser;
  element doc;
  if (auto e = parser.parse(json.data(), json.size()).get(doc); e != simdjson::SUCCESS)
    return Status::Error(fmt::format("{}: not the sides of a trace file: {}", name, simdjson::error_message(e)));
  std::string schema;
  if (!f.Str(doc, "schema", &schema)) return f.error;
  if (schema != kFileSidesSchema)
    return Status::Error(fmt::format("{}: schema is '{}', expected '{}'", name, schema, kFileSidesSchema));
  element ingest;
  array issues, sides;
  if (doc["ingest"].get(ingest) != simdjson::SUCCESS) return Status::Error(name + ": field 'ingest' is missing");
  if (!f.Uint(ingest, "events", &out->stats.events_read) || !f.Uint(ingest, "bytes", &out->stats.bytes_read) ||
      !f.Arr(ingest, "issues", &issues) || !f.Arr(doc, "sides", &sides))
    return f.error;
  for (auto e : issues) {
    std::string kind, example;
    int64_t severity = 0;
    uint64_t count = 0;
    if (!f.Str(e, "kind", &kind) || !f.Int(e, "severity", &severity) || !f.Uint(e, "count", &count) ||
        !f.Str(e, "example", &example))
      return f.error;
    if (severity < 0 || severity > static_cast<int64_t>(profiler::IssueSeverity::kError))
      return Status::Error(fmt::format("{}: ingest issue '{}' has severity {}, expected 0 to 2", name, kind, severity));
    out->stats.Add(kind, static_cast<profiler::IssueSeverity>(severity), example, count);
  }
  for (auto e : sides) {
    analyzers::RankSide side;
    if (!ReadFields(e, &side, f)) return f.error;
    out->sides.push_back(std::move(side));
  }
  return {};
}

}  // namespace trainrx::sets
