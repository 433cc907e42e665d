// trainrx::exports table — one columnar table of `trainrx export` and the interface of the
// writers (tables.h builds the tables; exports/sinks.cc and the Parquet plugin write them). Kept
// apart from tables.h so that the plugin depends on nothing but this and status.h.
#pragma once

#include <cstdint>
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
  // Adds a column and returns it (the reference is valid until the next AddColumn).
  Column& Add(std::string name, ColumnType type);
};

// Where tables go. Write() is called once per table and partition.
class TableSink {
 public:
  virtual ~TableSink() = default;
  virtual const char* Extension() const = 0;  // "parquet", "csv"
  // Writes `table` to `path` (its folder exists).
  virtual Status Write(const Table& table, const std::string& path) = 0;
};

}  // namespace trainrx::exports
