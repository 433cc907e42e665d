// The tables of `trainrx export` (tables.h): built from a set's analysis and its traces.
#include "trainrx/exports/tables.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "trainrx/analyzers/catalog.h"
#include "trainrx/analyzers/cross_rank.h"
#include "trainrx/profiler/json_writer.h"
#include "trainrx/profiler/reader.h"

namespace trainrx::exports {

namespace fs = std::filesystem;
using analyzers::RankSide;
using analyzers::StepRow;
using profiler::EventKind;
using profiler::Trace;

Column& Table::Add(std::string column_name, ColumnType type) {
  columns.push_back(Column{std::move(column_name), type, {}, {}, {}, {}});
  return columns.back();
}

const std::vector<std::string>& TableNames() {
  static const std::vector<std::string> names = {"runs",    "ranks",  "steps",    "ops",         "kernels", "copies",
                                                 "runtime", "counters", "collectives", "critical_path", "findings"};
  return names;
}

bool PerRankTable(std::string_view table) { return table != "runs" && table != "ranks" && table != "findings"; }

std::string ViewsSql(const std::string& dir, const std::string& extension) {
  std::string sql = fmt::format(
      "-- Views over the trainrx export in this folder (docs/export.md), written by trainrx export.\n"
      "-- From this folder: duckdb -init views.sql   (paths are relative to it)\n");
  std::error_code ec;
  for (const auto& table : TableNames()) {
    if (!fs::is_directory(fs::path(dir) / table, ec)) continue;
    const bool per_rank = PerRankTable(table);
    const std::string reader = extension == "csv" ? "read_csv" : "read_parquet";
    sql += fmt::format(
        "CREATE OR REPLACE VIEW {0} AS SELECT * FROM {1}('{0}/{2}*.{3}', hive_partitioning = true, union_by_name = true, "
        "hive_types = {{'run': 'VARCHAR'{4}}});\n",
        table, reader, per_rank ? "*/*/" : "*/", extension, per_rank ? ", 'rank': 'BIGINT'" : "");
  }
  return sql;
}

namespace {

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

// The rows a table is streamed in (memory: one chunk of each table being written).
constexpr size_t kChunkRows = 64 * 1024;

// A table's file under DIR (its partition's folder made), open for chunks.
StatusOr<std::unique_ptr<TableWriter>> OpenPart(const Table& t, const std::string& dir, TableSink& sink) {
  fs::path folder = fs::path(dir) / t.name / ("run=" + t.run);
  if (t.rank >= 0) folder /= fmt::format("rank={}", t.rank);
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) return Status::Error(fmt::format("{}: cannot create the folder: {}", folder.string(), ec.message()));
  return sink.Open((folder / fmt::format("part-0.{}", sink.Extension())).string());
}

void Count(ExportSummary* summary, const std::string& table, uint64_t rows) {
  for (auto& [name, n] : summary->rows)
    if (name == table) n += rows;
}

// A table being filled row by row: columns declared once, then values appended in column order.
// Streamed (Open, then Row() after each row's values, then Finish()) or taken whole (Take()).
class Rows {
 public:
  Rows(std::string name, std::string run, int32_t rank) {
    t_.name = std::move(name);
    t_.run = std::move(run);
    t_.rank = rank;
  }
  Rows& Col(std::string name, ColumnType type) {
    t_.Add(std::move(name), type);
    return *this;
  }
  Column& operator[](size_t i) { return t_.columns[i]; }
  Table Take() { return std::move(t_); }

  Status Open(const std::string& dir, TableSink& sink) {
    auto w = OpenPart(t_, dir, sink);
    if (!w.ok()) return w.status();
    writer_ = std::move(*w);
    return {};
  }
  // After a row: a full chunk goes to the file.
  Status Row() { return t_.rows() >= kChunkRows ? Flush() : Status(); }
  // The last chunk (an empty one where nothing was written: the file still has its columns).
  Status Finish(ExportSummary* summary, uint64_t* rows) {
    if (t_.rows() > 0 || written_ == 0)
      if (Status st = Flush(); !st.ok()) return st;
    Count(summary, t_.name, written_);
    *rows += written_;
    return writer_->Close();
  }

 private:
  Status Flush() {
    if (Status st = writer_->Append(t_); !st.ok()) return st;
    written_ += t_.rows();
    t_.Clear();
    return {};
  }
  Table t_;
  std::unique_ptr<TableWriter> writer_;
  uint64_t written_ = 0;
};

void Int(Column& c, int64_t v) { c.ints.push_back(v); }
void Dbl(Column& c, double v) { c.doubles.push_back(v); }
void Str(Column& c, std::string v) { c.strings.push_back(std::move(v)); }
void Bool(Column& c, bool v) { c.ints.push_back(v ? 1 : 0); }
// An int64 that may be missing: `valid` grows with the column (earlier rows were valid).
void MaybeInt(Column& c, int64_t v, bool valid) {
  const bool tracked = !c.valid.empty();  // a null was seen: one flag per row
  if (tracked) {
    c.valid.push_back(valid ? 1 : 0);
  } else if (!valid) {  // the first null: the rows before it were all valid
    c.valid.assign(c.ints.size(), 1);
    c.valid.push_back(0);
  }
  c.ints.push_back(valid ? v : 0);
}

// A rank's steps (steady and warm-up) in time order: the `step` of every other table indexes it.
struct RankSteps {
  std::vector<const StepRow*> rows;
  std::vector<bool> warmup;
  int64_t shift_ns = 0;  // added to the rows' times (rank by rank: the rank's clock shift)
  // The step an instant falls in (-1: none). Times are on the exported (shifted) clock.
  int64_t Of(int64_t ts) const {
    auto it = std::upper_bound(rows.begin(), rows.end(), ts, [&](int64_t t, const StepRow* r) { return t < r->start_ns + shift_ns; });
    if (it == rows.begin()) return -1;
    const StepRow* r = *(it - 1);
    return ts < r->start_ns + shift_ns + r->wall_ns ? static_cast<int64_t>(it - 1 - rows.begin()) : -1;
  }
};

std::map<int32_t, RankSteps> StepsByRank(const analyzers::StepModel& model) {
  std::map<int32_t, std::vector<std::pair<const StepRow*, bool>>> by;
  for (const auto& r : model.steps) by[r.rank].push_back({&r, false});
  for (const auto& r : model.warmup_steps) by[r.rank].push_back({&r, true});
  std::map<int32_t, RankSteps> out;
  for (auto& [rank, rows] : by) {
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first->start_ns < b.first->start_ns; });
    RankSteps& s = out[rank];
    for (const auto& [row, warm] : rows) s.rows.push_back(row), s.warmup.push_back(warm);
  }
  return out;
}

// The event tables of one rank of `trace`, its times moved by `shift_ns`, streamed to their files;
// `rows` gets how many were written.
Status WriteEventTables(const Trace& trace, int32_t rank, const RankSteps& steps, int64_t shift_ns, const std::string& run,
                        const std::string& dir, TableSink& sink, ExportSummary* summary, uint64_t* rows) {
  using T = ColumnType;
  Rows ops("ops", run, rank), kernels("kernels", run, rank), copies("copies", run, rank), runtime("runtime", run, rank),
      counters("counters", run, rank);
  ops.Col("step", T::kInt64).Col("kind", T::kString).Col("name", T::kString).Col("tid", T::kInt64).Col("ts_ns", T::kInt64)
      .Col("dur_ns", T::kInt64).Col("external_id", T::kInt64).Col("input_dims", T::kString).Col("input_types", T::kString);
  kernels.Col("step", T::kInt64).Col("name", T::kString).Col("device", T::kInt64).Col("stream", T::kInt64)
      .Col("ts_ns", T::kInt64).Col("dur_ns", T::kInt64).Col("correlation", T::kInt64).Col("external_id", T::kInt64);
  copies.Col("step", T::kInt64).Col("kind", T::kString).Col("copy", T::kString).Col("src", T::kString).Col("dst", T::kString)
      .Col("bytes", T::kInt64).Col("device", T::kInt64).Col("stream", T::kInt64).Col("ts_ns", T::kInt64)
      .Col("dur_ns", T::kInt64).Col("correlation", T::kInt64);
  runtime.Col("step", T::kInt64).Col("name", T::kString).Col("tid", T::kInt64).Col("ts_ns", T::kInt64)
      .Col("dur_ns", T::kInt64).Col("correlation", T::kInt64).Col("external_id", T::kInt64);
  counters.Col("step", T::kInt64).Col("name", T::kString).Col("ts_ns", T::kInt64).Col("value", T::kDouble);
  for (Rows* r : {&ops, &kernels, &copies, &runtime, &counters})
    if (Status st = r->Open(dir, sink); !st.ok()) return st;
  const auto id = [](int64_t v) { return v == profiler::kNoId ? int64_t{-1} : v; };
  for (size_t ti = 0; ti < trace.tracks.size(); ++ti) {
    const profiler::Track& track = trace.tracks[ti];
    if (track.rank != rank) continue;
    for (uint32_t i = track.first_event; i < track.first_event + track.event_count; ++i) {
      const profiler::Event& e = trace.events[i];
      const int64_t ts = e.ts_ns + shift_ns;
      const int64_t step = steps.Of(ts);
      switch (e.kind) {
        case EventKind::kCpuOp:
        case EventKind::kUserAnnotation:
        case EventKind::kPythonFunction: {
          const profiler::OpInputs* in = e.aux < trace.op_inputs.size() ? &trace.op_inputs[e.aux] : nullptr;
          Int(ops[0], step), Str(ops[1], std::string(EventKindName(e.kind))), Str(ops[2], std::string(trace.Name(e)));
          Int(ops[3], track.tid), Int(ops[4], ts), Int(ops[5], e.dur_ns), Int(ops[6], id(e.external_id));
          Str(ops[7], in ? std::string(trace.strings.Get(in->input_dims)) : "");
          Str(ops[8], in ? std::string(trace.strings.Get(in->input_types)) : "");
          if (Status st = ops.Row(); !st.ok()) return st;
          break;
        }
        case EventKind::kKernel:
          Int(kernels[0], step), Str(kernels[1], std::string(trace.Name(e))), Int(kernels[2], track.device);
          Int(kernels[3], track.stream), Int(kernels[4], ts), Int(kernels[5], e.dur_ns), Int(kernels[6], id(e.correlation));
          Int(kernels[7], id(e.external_id));
          if (Status st = kernels.Row(); !st.ok()) return st;
          break;
        case EventKind::kMemcpy:
        case EventKind::kMemset: {
          const profiler::MemcpyInfo info = e.aux < trace.memcpys.size() ? trace.memcpys[e.aux] : profiler::MemcpyInfo{};
          Int(copies[0], step), Str(copies[1], e.kind == EventKind::kMemcpy ? "memcpy" : "memset");
          Str(copies[2], std::string(profiler::CopyKindName(info.copy))), Str(copies[3], std::string(profiler::MemKindName(info.src)));
          Str(copies[4], std::string(profiler::MemKindName(info.dst)));
          MaybeInt(copies[5], info.bytes, info.bytes >= 0);
          Int(copies[6], track.device), Int(copies[7], track.stream), Int(copies[8], ts), Int(copies[9], e.dur_ns);
          Int(copies[10], id(e.correlation));
          if (Status st = copies.Row(); !st.ok()) return st;
          break;
        }
        case EventKind::kCudaRuntime:
        case EventKind::kCudaDriver:
          Int(runtime[0], step), Str(runtime[1], std::string(trace.Name(e))), Int(runtime[2], track.tid), Int(runtime[3], ts);
          Int(runtime[4], e.dur_ns), Int(runtime[5], id(e.correlation)), Int(runtime[6], id(e.external_id));
          if (Status st = runtime.Row(); !st.ok()) return st;
          break;
        default: break;
      }
    }
  }
  for (const auto& c : trace.counters) {
    if (c.track >= trace.tracks.size() || trace.tracks[c.track].rank != rank) continue;
    const int64_t ts = c.ts_ns + shift_ns;
    Int(counters[0], steps.Of(ts)), Str(counters[1], std::string(trace.strings.Get(c.name))), Int(counters[2], ts);
    Dbl(counters[3], c.value);
    if (Status st = counters.Row(); !st.ok()) return st;
  }
  for (Rows* r : {&ops, &kernels, &copies, &runtime, &counters})
    if (Status st = r->Finish(summary, rows); !st.ok()) return st;
  return {};
}

Table StepsTable(const RankSteps& steps, int32_t rank, const std::string& run) {
  using T = ColumnType;
  using W = analyzers::StepField::When;
  Rows t("steps", run, rank);
  t.Col("step", T::kInt64).Col("name", T::kString).Col("warmup", T::kBool);
  const auto& fields = analyzers::StepFields();  // every declared per-step figure, a column each
  for (const analyzers::StepField& f : fields) t.Col(f.name, T::kInt64);
  for (size_t i = 0; i < steps.rows.size(); ++i) {
    const StepRow& r = *steps.rows[i];
    Int(t[0], static_cast<int64_t>(i)), Str(t[1], r.name), Bool(t[2], steps.warmup[i]);
    for (size_t k = 0; k < fields.size(); ++k) {
      // start_ns, a point in time, on the set's clock (the rank's shift); the rest are durations.
      const int64_t v = r.*fields[k].member + (fields[k].member == &StepRow::start_ns ? steps.shift_ns : 0);
      MaybeInt(t[3 + k], v, fields[k].when != W::kGpu || r.has_gpu);  // GPU figures: null without GPU activity
    }
  }
  return t.Take();
}

// Each rank's part in the collectives matched across ranks (the straggler's reading).
std::map<int32_t, Table> CollectiveTables(const std::vector<RankSide>& sides, const std::map<int32_t, RankSteps>& steps,
                                          const std::string& run) {
  using T = ColumnType;
  std::map<int32_t, Table> out;
  std::map<int32_t, Rows> rows;
  for (const auto& side : sides) {
    Rows r("collectives", run, side.info.rank);
    r.Col("step", T::kInt64).Col("instance", T::kInt64).Col("name", T::kString).Col("ts_ns", T::kInt64)
        .Col("dur_ns", T::kInt64).Col("in_steps", T::kBool).Col("arrived_last", T::kBool).Col("others_wait_ns", T::kDouble);
    rows.emplace(side.info.rank, std::move(r));
  }
  static const RankSteps kNone;
  for (const auto& m : analyzers::MatchedCollectives(sides)) {
    auto it = rows.find(m.rank);
    if (it == rows.end()) continue;
    const auto st = steps.find(m.rank);
    const RankSteps& s = st == steps.end() ? kNone : st->second;
    Rows& r = it->second;
    const int64_t ts = m.ts_ns + s.shift_ns;
    Int(r[0], s.Of(ts)), Int(r[1], m.instance), Str(r[2], std::string(m.name)), Int(r[3], ts), Int(r[4], m.dur_ns);
    Bool(r[5], m.in_steps), Bool(r[6], m.arrived_last), Dbl(r[7], m.others_wait_ns);
  }
  for (auto& [rank, r] : rows) out.emplace(rank, r.Take());
  return out;
}

Table CriticalPathTable(const analyzers::CriticalPath& path, int64_t shift_ns, const RankSteps& steps, const std::string& run) {
  using T = ColumnType;
  Rows t("critical_path", run, path.rank);
  t.Col("step", T::kInt64).Col("class", T::kString).Col("what", T::kString).Col("start_ns", T::kInt64)
      .Col("end_ns", T::kInt64).Col("slack_ns", T::kInt64);
  for (const auto& seg : path.segments) {
    Int(t[0], steps.Of(seg.start_ns + shift_ns)), Str(t[1], analyzers::PathClassName(seg.cls)), Str(t[2], seg.what);
    Int(t[3], seg.start_ns + shift_ns), Int(t[4], seg.end_ns + shift_ns), MaybeInt(t[5], seg.slack_ns, seg.slack_ns >= 0);
  }
  return t.Take();
}

std::string EvidenceJson(const analyzers::Finding& f) {
  std::ostringstream s;
  profiler::JsonWriter w(s);
  w.BeginObject();
  for (const auto& item : f.evidence) {
    w.Key(item.key);
    std::visit([&](const auto& v) {
      using V = std::decay_t<decltype(v)>;
      if constexpr (std::is_same_v<V, int64_t>) w.Int(v);
      else if constexpr (std::is_same_v<V, double>) w.Double(v);
      else w.String(v);
    }, item.value);
  }
  w.EndObject();
  return std::move(s).str();
}

Table FindingsTable(const analyzers::Report& report, const std::string& run) {
  using T = ColumnType;
  Rows t("findings", run, -1);
  t.Col("rank", T::kInt64).Col("id", T::kString).Col("family", T::kString).Col("severity", T::kString)
      .Col("confidence", T::kString).Col("title", T::kString).Col("measured", T::kDouble).Col("threshold", T::kDouble)
      .Col("unit", T::kString).Col("estimated_saving_ns", T::kInt64).Col("estimated_saving_pct", T::kDouble)
      .Col("steps", T::kInt64).Col("evidence", T::kString).Col("examples", T::kString).Col("fix_python", T::kString)
      .Col("fix_cpp", T::kString);
  for (const auto& f : report.findings) {
    const auto* entry = analyzers::FindCatalogEntry(f.id);
    std::string examples;
    for (const auto& e : f.examples) examples += (examples.empty() ? "" : "\n") + e;
    MaybeInt(t[0], f.rank, f.rank >= 0), Str(t[1], f.id), Str(t[2], entry ? entry->family : ""), Str(t[3], analyzers::SeverityName(f.severity));
    Str(t[4], analyzers::ConfidenceName(f.confidence)), Str(t[5], f.title), Dbl(t[6], f.measured), Dbl(t[7], f.threshold);
    Str(t[8], f.measured_unit), Int(t[9], f.estimated_saving_ns), Dbl(t[10], f.estimated_saving_pct), Int(t[11], f.steps);
    Str(t[12], EvidenceJson(f)), Str(t[13], examples), Str(t[14], f.fix_python), Str(t[15], f.fix_cpp);
  }
  return t.Take();
}

Table RanksTable(const Trace& skeleton, const std::map<int32_t, uint64_t>& events, const std::string& run) {
  using T = ColumnType;
  Rows t("ranks", run, -1);
  t.Col("rank", T::kInt64).Col("source", T::kString).Col("world_size", T::kInt64).Col("job", T::kString)
      .Col("backend", T::kString).Col("clock_shift_ns", T::kInt64).Col("clock_status", T::kString)
      .Col("device", T::kString).Col("hostname", T::kString).Col("events", T::kInt64);
  for (const auto& r : skeleton.ranks) {
    const auto host = r.config.find("hostname");
    const auto ev = events.find(r.rank);
    Int(t[0], r.rank), Str(t[1], r.source), Int(t[2], r.world_size), Str(t[3], r.job), Str(t[4], r.backend);
    Int(t[5], r.clock_shift_ns), Str(t[6], r.clock_status), Str(t[7], r.devices.empty() ? "" : r.devices.front().name);
    Str(t[8], host == r.config.end() ? "" : host->second.Text());
    MaybeInt(t[9], ev == events.end() ? 0 : static_cast<int64_t>(ev->second), ev != events.end());
  }
  return t.Take();
}

// When the run started, if its times are on the Unix epoch clock (Kineto's are since torch 2.0;
// older traces count from an arbitrary origin): the first step's start, else the first event's.
bool EpochStart(int64_t first_ns, int64_t* out) {
  constexpr int64_t k2010 = 1262304000LL * 1000000000LL, k2100 = 4102444800LL * 1000000000LL;
  if (first_ns < k2010 || first_ns > k2100) return false;
  *out = first_ns;
  return true;
}

Table RunsTable(const sets::SetAnalysis& set, const std::string& run, int64_t first_ns) {
  using T = ColumnType;
  Rows t("runs", run, -1);
  t.Col("inputs", T::kString).Col("strategy", T::kString).Col("ranks", T::kInt64).Col("steps", T::kInt64)
      .Col("median_step_ns", T::kInt64).Col("findings", T::kInt64).Col("started_at", T::kTimestampNs)
      .Col("exported_at", T::kTimestampNs).Col("trainrx_version", T::kString);
  std::string inputs;
  for (const auto& f : set.files) inputs += (inputs.empty() ? "" : "\n") + f;
  int64_t started = 0;
  const bool epoch = EpochStart(first_ns, &started);
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  Str(t[0], inputs), Str(t[1], sets::StrategyName(set.strategy)), Int(t[2], static_cast<int64_t>(set.trace.ranks.size()));
  Int(t[3], static_cast<int64_t>(set.report.metrics.steps.steps.size())), Int(t[4], set.report.metrics.steps.median_wall_ns);
  Int(t[5], static_cast<int64_t>(set.report.findings.size())), MaybeInt(t[6], started, epoch), Int(t[7], now);
  Str(t[8], TRAINRX_VERSION);
  return t.Take();
}

// Removes the run's partitions of every table (a run exported again replaces itself).
Status ClearRun(const std::string& dir, const std::string& run) {
  std::error_code ec;
  for (const auto& table : TableNames()) {
    const fs::path p = fs::path(dir) / table / ("run=" + run);
    fs::remove_all(p, ec);
    if (ec) return Status::Error(fmt::format("{}: cannot replace the run's earlier export: {}", p.string(), ec.message()));
  }
  return {};
}

Status WriteTable(const Table& t, const std::string& dir, TableSink& sink, ExportSummary* summary) {
  auto w = OpenPart(t, dir, sink);
  if (!w.ok()) return w.status();
  if (Status st = (*w)->Append(t); !st.ok()) return st;
  if (Status st = (*w)->Close(); !st.ok()) return st;
  Count(summary, t.name, t.rows());
  return {};
}

}  // namespace

std::string RunNameOf(const std::string& path) {
  std::string name = fs::path(path).filename().string();
  if (name.empty()) name = fs::path(path).parent_path().filename().string();  // "dir/"
  for (const char* suffix : {".gz", ".json", ".pt.trace", ".summary"})
    if (name.size() > std::strlen(suffix) && name.ends_with(suffix)) name.resize(name.size() - std::strlen(suffix));
  for (char& c : name)
    if (!NameChar(c)) c = '_';
  return name.empty() || name == "." || name == ".." ? std::string("run") : name;
}

Status CheckRunName(const std::string& run) {
  if (run.empty() || run == "." || run == ".." || !std::all_of(run.begin(), run.end(), NameChar))
    return Status::Error(fmt::format("--run '{}': a run's name is a folder name: letters, digits, '.', '_' and '-' only", run));
  return {};
}

namespace {

// Rank by rank: one file at a time (a file may hold several ranks), its ranks written under the
// ranks the set's analysis gave them (the rank-by-rank reader may have moved a rank claimed twice).
Status WriteEventsFileByFile(const sets::SetAnalysis& set,
                             const std::function<Status(const Trace&, const std::vector<int32_t>&)>& write_events) {
  for (const std::string& file : set.files) {
    Trace trace;
    profiler::ReadOptions read_options;
    if (Status st = profiler::ReadTraces({file}, trace, read_options); !st.ok()) return st;
    std::vector<int32_t> ranks;
    // The rank-by-rank reader may have moved a rank claimed twice: match by source and order.
    std::vector<int32_t> file_ranks;
    for (const auto& r : set.trace.ranks)
      if (r.source == file) file_ranks.push_back(r.rank);
    const auto own = trace.RankIds();
    if (file_ranks.size() != own.size())
      return Status::Error(fmt::format("{}: read {} ranks where the set's analysis had {}", file, own.size(), file_ranks.size()));
    std::map<int32_t, int32_t> to;  // the file's ranks -> the ranks the set gave them
    for (size_t i = 0; i < own.size(); ++i) to[own[i]] = file_ranks[i], ranks.push_back(file_ranks[i]);
    // Each of the file's ranks is written under the rank the set gave it (in one pass: a
    // rank moved onto another's number must not be moved twice).
    for (auto& tr : trace.tracks)
      if (auto m = to.find(tr.rank); m != to.end()) tr.rank = m->second;
    if (Status st = write_events(trace, ranks); !st.ok()) return st;
  }
  return {};
}

// The per-rank analysis tables: steps, collectives, critical paths (merged: the set's paths; rank
// by rank: each side's, from its file's own analysis).
Status WriteRankTables(const sets::SetAnalysis& set, const std::vector<RankSide>& sides, std::map<int32_t, RankSteps>& steps,
                       std::map<int32_t, int64_t>& shift, const std::string& run, const std::string& dir, TableSink& sink,
                       ExportSummary* summary) {
  for (const auto& [rank, s] : steps)
    if (Status st = WriteTable(StepsTable(s, rank, run), dir, sink, summary); !st.ok()) return st;
  for (auto& [rank, t] : CollectiveTables(sides, steps, run))
    if (Status st = WriteTable(t, dir, sink, summary); !st.ok()) return st;
  std::vector<const analyzers::CriticalPath*> paths;
  for (const auto& path : set.report.metrics.critical_paths) paths.push_back(&path);
  if (set.strategy != sets::Strategy::kMerged)
    for (const RankSide& side : sides)
      for (const auto& path : side.critical_paths) paths.push_back(&path);
  for (const analyzers::CriticalPath* p : paths) {
    const analyzers::CriticalPath& path = *p;
    static const RankSteps kNone;
    const auto it = steps.find(path.rank);
    const int64_t sh = shift.count(path.rank) ? shift[path.rank] : 0;
    if (Status st = WriteTable(CriticalPathTable(path, sh, it == steps.end() ? kNone : it->second, run), dir, sink, summary);
        !st.ok())
      return st;
  }
  return {};
}

}  // namespace

Status ExportSet(const std::vector<std::string>& paths, const ExportOptions& options, const std::string& dir,
                 TableSink& sink, ExportSummary* summary) {
  *summary = {};
  if (paths.empty()) return Status::Error("no trace files given");
  summary->run = options.run.empty() ? RunNameOf(paths.front()) : options.run;
  if (Status st = CheckRunName(summary->run); !st.ok()) return st;
  for (const auto& n : TableNames()) summary->rows.push_back({n, 0});
  sets::SetOptions set_options = options.set;
  set_options.keep_sides = true;
  sets::SetAnalysis set;
  if (Status st = sets::AnalyzeSet(paths, set_options, &set); !st.ok()) return st;
  if (set.strategy == sets::Strategy::kSummaries)
    return Status::Error(fmt::format("{}: summaries hold no events to export; export the traces they were made from",
                                     set.files.front()));
  summary->strategy = set.strategy;
  summary->files = set.files.size();
  summary->ranks = set.trace.ranks.size();
  const std::string& run = summary->run;
  if (Status st = ClearRun(dir, run); !st.ok()) return st;
  // A run that fails half way is removed, not left for a query to read as a whole one.
  const auto write_run = [&]() -> Status {
    // Per-rank tables of every rank, empty ones included: a view's schema never depends on which
    // ranks had rows.
    // Merged: the set's trace holds every event, its clocks aligned. Rank by rank: each rank's
    // side; its times are its file's, moved by its clock shift as they are written.
    std::vector<RankSide> merged_sides;
    if (set.strategy == sets::Strategy::kMerged)
      merged_sides = analyzers::BuildRankSides(set.trace, &set.report.metrics.steps, set.report.metrics.unfinished,
                                               set.report.metrics.windows);
    const std::vector<RankSide>& sides = set.strategy == sets::Strategy::kMerged ? merged_sides : set.sides;
    std::map<int32_t, int64_t> shift;
    if (set.strategy != sets::Strategy::kMerged)
      for (const auto& r : set.trace.ranks) shift[r.rank] = r.clock_shift_ns;
    std::map<int32_t, RankSteps> steps = StepsByRank(set.report.metrics.steps);
    for (auto& [rank, s] : steps) s.shift_ns = shift.count(rank) ? shift[rank] : 0;
    int64_t first_ns = INT64_MAX;
    for (const auto& [rank, s] : steps)
      if (!s.rows.empty()) first_ns = std::min(first_ns, s.rows.front()->start_ns + s.shift_ns);

    // The event tables, rank by rank.
    std::map<int32_t, uint64_t> events;
    const auto write_events = [&](const Trace& trace, const std::vector<int32_t>& ranks) -> Status {
      for (int32_t rank : ranks) {
        const int64_t sh = shift.count(rank) ? shift[rank] : 0;
        static const RankSteps kNone;
        const auto it = steps.find(rank);
        if (Status st = WriteEventTables(trace, rank, it == steps.end() ? kNone : it->second, sh, run, dir, sink, summary,
                                         &events[rank]);
            !st.ok())
          return st;
      }
      return {};
    };
    if (set.strategy == sets::Strategy::kMerged) {
      if (Status st = write_events(set.trace, set.trace.RankIds()); !st.ok()) return st;
      if (first_ns == INT64_MAX)
        for (const auto& e : set.trace.events) first_ns = std::min(first_ns, e.ts_ns);
    } else {
      if (Status st = WriteEventsFileByFile(set, write_events); !st.ok()) return st;
    }
    if (Status st = WriteRankTables(set, sides, steps, shift, run, dir, sink, summary); !st.ok()) return st;
    // The run's tables.
    if (first_ns == INT64_MAX) first_ns = 0;
    for (const Table& t : {RunsTable(set, run, first_ns), RanksTable(set.trace, events, run), FindingsTable(set.report, run)})
      if (Status st = WriteTable(t, dir, sink, summary); !st.ok()) return st;
    const std::string views = (fs::path(dir) / "views.sql").string();
    std::ofstream out(views);
    out << ViewsSql(dir, sink.Extension());
    out.flush();
    if (!out) return Status::Error(views + ": write failed");
    return {};
  };
  if (Status st = write_run(); !st.ok()) {
    (void)ClearRun(dir, run);
    return st;
  }
  return {};
}

}  // namespace trainrx::exports
