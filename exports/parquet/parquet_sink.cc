// libtrainrx_parquet.so: writes trainrx's export tables (exports/tables.h) as Parquet with Apache
// Arrow's C++ library, the one the pinned pyarrow wheel carries (cmake/Pyarrow.cmake): a
// well-kept writer (statistics, dictionary encoding, compression) that every Parquet reader
// reads; no Parquet is written by hand here. Loaded by the CLI with dlopen (exports/plugin.h).
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/writer.h>
#include <parquet/properties.h>

#include <memory>

#include "trainrx/exports/plugin.h"

namespace trainrx::exports {
namespace {

template <typename Builder, typename Values>
arrow::Result<std::shared_ptr<arrow::Array>> Build(Builder& b, const Values& values, const std::vector<uint8_t>& valid) {
  ARROW_RETURN_NOT_OK(b.Reserve(static_cast<int64_t>(values.size())));
  for (size_t i = 0; i < values.size(); ++i) {
    if (!valid.empty() && !valid[i]) {
      ARROW_RETURN_NOT_OK(b.AppendNull());
    } else {
      ARROW_RETURN_NOT_OK(b.Append(values[i]));
    }
  }
  return b.Finish();
}

arrow::Result<std::shared_ptr<arrow::Array>> ArrayOf(const Column& c, std::shared_ptr<arrow::DataType>* type) {
  switch (c.type) {
    case ColumnType::kDouble: {
      *type = arrow::float64();
      arrow::DoubleBuilder b;
      return Build(b, c.doubles, c.valid);
    }
    case ColumnType::kString: {
      *type = arrow::utf8();
      arrow::StringBuilder b;
      return Build(b, c.strings, c.valid);
    }
    case ColumnType::kBool: {
      *type = arrow::boolean();
      arrow::BooleanBuilder b;
      std::vector<bool> v(c.ints.begin(), c.ints.end());
      return Build(b, v, c.valid);
    }
    case ColumnType::kTimestampNs: {
      *type = arrow::timestamp(arrow::TimeUnit::NANO, "UTC");
      arrow::TimestampBuilder b(*type, arrow::default_memory_pool());
      return Build(b, c.ints, c.valid);
    }
    case ColumnType::kInt64:
    default: {
      *type = arrow::int64();
      arrow::Int64Builder b;
      return Build(b, c.ints, c.valid);
    }
  }
}

arrow::Status WriteParquet(const Table& t, const std::string& path) {
  std::vector<std::shared_ptr<arrow::Field>> fields;
  std::vector<std::shared_ptr<arrow::Array>> arrays;
  for (const Column& c : t.columns) {
    std::shared_ptr<arrow::DataType> type;
    ARROW_ASSIGN_OR_RAISE(auto array, ArrayOf(c, &type));
    fields.push_back(arrow::field(c.name, type, !c.valid.empty()));
    arrays.push_back(std::move(array));
  }
  auto table = arrow::Table::Make(arrow::schema(fields), arrays, static_cast<int64_t>(t.rows()));
  ARROW_ASSIGN_OR_RAISE(auto out, arrow::io::FileOutputStream::Open(path));
  // zstd: about snappy's speed with smaller files (names repeat: dictionary pages do most of it).
  auto props = parquet::WriterProperties::Builder().compression(arrow::Compression::ZSTD)->build();
  ARROW_RETURN_NOT_OK(parquet::arrow::WriteTable(*table, arrow::default_memory_pool(), out, 1 << 20, props));
  return out->Close();
}

class ParquetSink : public TableSink {
 public:
  const char* Extension() const override { return "parquet"; }
  Status Write(const Table& t, const std::string& path) override {
    // Arrow reports errors as Status; nothing may throw across the plugin's edge.
    try {
      const arrow::Status st = WriteParquet(t, path);
      if (!st.ok()) return Status::Error(path + ": " + st.ToString());
    } catch (const std::exception& e) {
      return Status::Internal(path + ": " + e.what());
    }
    return {};
  }
};

}  // namespace
}  // namespace trainrx::exports

extern "C" __attribute__((visibility("default"))) trainrx::exports::TableSink* trainrx_new_parquet_sink() {
  return new trainrx::exports::ParquetSink();
}
