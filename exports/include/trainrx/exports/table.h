// trainrx::exports table — one columnar table of `trainrx export` and the interface of the
// writers (tables.h builds the tables; exports/sinks.cc and the Parquet plugin write them). Kept
// apart from tables.h so that the plugin depends on nothing but this and status.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainrx/profiler/status.h"

namespace trainrx::exports {

enum class ColumnType : uint8_t { kInt64, kDouble, kString, kBool, kTimestampNs };

// One column: values in the vector of its type; `valid` empty = no nulls, else one flag per row.
struct Column {
  std::string name;
  ColumnType type = ColumnType::kInt64;
  std::vector<int64_t> ints;  // kInt64, kBool (0/1), kTimestampNs (ns since the Unix epoch)
  std::vector<double> doubles;
  std::vector<std::string> strings;
  std::vector<uint8_t> valid;
  size_t size() const {
    return type == ColumnType::kDouble ? doubles.size() : type == ColumnType::kString ? strings.size() : ints.size();
  }
};

struct Table {
  std::string name;                  // "ops"
  std::vector<Column> columns;
  // Partition: run always; rank for per-rank tables (-1: a per-run table).
  std::string run;
  int32_t rank = -1;
  size_t rows() const { return columns.empty() ? 0 : columns.front().size(); }
  // Adds a column and returns it (the reference is valid until the next Add).
  Column& Add(std::string name, ColumnType type);
  // Drops the rows, keeps the columns (the next chunk of a streamed table).
  void Clear() {
    for (Column& c : columns) c.ints.clear(), c.doubles.clear(), c.strings.clear(), c.valid.clear();
  }
};

// One file being written: chunks of one table, each with the same columns, appended in order (the
// first fixes the columns; it may have no rows), then Close(). Every column may hold nulls.
class TableWriter {
 public:
  virtual ~TableWriter() = default;
  virtual Status Append(const Table& chunk) = 0;
  virtual Status Close() = 0;
};

// Where tables go: a file per table and partition, written in chunks, so that a table of millions
// of rows never has to be held whole (tables.cc streams the event tables 64 K rows at a time: a Parquet row group each).
class TableSink {
 public:
  virtual ~TableSink() = default;
  virtual const char* Extension() const = 0;  // "parquet", "csv"
  // Opens `path` (its folder exists) for one table's chunks.
  virtual StatusOr<std::unique_ptr<TableWriter>> Open(const std::string& path) = 0;
};

}  // namespace trainrx::exports
