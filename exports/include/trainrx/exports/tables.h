// trainrx::exports — a set's trace model and analysis as columnar tables (`trainrx export`):
// one row per op, kernel, copy, runtime call, counter sample, step, collective, finding and
// critical-path segment, with the run, rank and step users filter on, for the tools platform teams
// already query with (DuckDB, pandas, Spark, Polars).
//
// Layout on disk (docs/export.md): one folder per table, Hive-partitioned by run and rank, so that
// many runs and ranks append to one dataset and readers prune by path:
//   DIR/<table>/run=<run>/rank=<rank>/part-0.<ext>   per-rank tables (ops, kernels, ...)
//   DIR/<table>/run=<run>/part-0.<ext>               per-run tables (runs, ranks, findings)
// The partition columns (run, rank) live in the path, not in the files (the Hive convention that
// DuckDB, Arrow and Spark read). Exporting a run again replaces that run's partitions, nothing else.
//
// The tables are built here, Arrow-free; a TableSink writes them. CSV is built in; Parquet is a
// plugin (exports/parquet/, libtrainrx_parquet.so) linked against the Arrow C++ libraries of the
// pinned pyarrow wheel, loaded only when asked for, so trainrx runs where pyarrow is not installed.
// Torch-free; threads: one export at a time per sink.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "trainrx/exports/table.h"
#include "trainrx/profiler/status.h"
#include "trainrx/sets/analyze_set.h"

namespace trainrx::exports {

// The built-in CSV writer (RFC 4180 quoting; nulls as empty fields; a header row).
std::unique_ptr<TableSink> NewCsvSink();
// The Parquet plugin: `plugin_dir`/libtrainrx_parquet.so loaded with dlopen. An error saying what
// to install when it or the Arrow libraries it needs are missing.
StatusOr<std::unique_ptr<TableSink>> OpenParquetSink(const std::string& plugin_dir);
// "parquet" or "csv"; an error naming the format otherwise.
StatusOr<std::unique_ptr<TableSink>> OpenSink(const std::string& format, const std::string& plugin_dir);

// The tables `trainrx export` writes, in order (docs/export.md describes their columns).
const std::vector<std::string>& TableNames();
// Whether a table is partitioned by rank as well as by run (all but runs, ranks and findings).
bool PerRankTable(std::string_view table);
// DuckDB views over every table folder under `dir` (paths relative to it), as written to
// DIR/views.sql after each export; `extension` "parquet" or "csv".
std::string ViewsSql(const std::string& dir, const std::string& extension);

struct ExportOptions {
  sets::SetOptions set;
  std::string run;  // partition name; "" = from the first input's name (see RunNameOf)
};

struct ExportSummary {
  std::string run;
  sets::Strategy strategy = sets::Strategy::kMerged;
  size_t ranks = 0, files = 0;
  std::vector<std::pair<std::string, uint64_t>> rows;  // per table, in TableNames() order
};

// A partition name from a path: its file or folder name without trace suffixes, characters other
// than [A-Za-z0-9._-] replaced by '_' ("runs/rank0.pt.trace.json.gz" -> "rank0").
std::string RunNameOf(const std::string& path);
// Checks a user's --run: non-empty, [A-Za-z0-9._-] only, not "." or "..".
Status CheckRunName(const std::string& run);

// Analyzes the set as `trainrx analyze` does (sets::AnalyzeSet: merged or rank by rank, clocks
// aligned) and writes every table of it under `dir` through `sink`, replacing the run's partitions.
// A set of more files than options.set.per_rank_above is read again one file at a time for its
// event tables (memory: one rank's trace), with each rank's clock shift applied.
Status ExportSet(const std::vector<std::string>& paths, const ExportOptions& options, const std::string& dir,
                 TableSink& sink, ExportSummary* summary);

}  // namespace trainrx::exports
