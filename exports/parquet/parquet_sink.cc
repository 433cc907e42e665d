// libtrainrx_parquet.so: writes trainrx's export tables (exports/tables.h) as Parquet with Apache
// Arrow's C++ library, the one the pinned pyarrow wheel carries (cmake/Pyarrow.cmake): a
// well-kept writer (statistics, dictionary encoding, compression) that every Parquet reader
// reads; no Parquet is written by hand here. Loaded by the CLI with dlopen (exports/plugin.h).
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/writer.h>
#include <parquet/properties.h>

#include <algorithm>
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

// Chunks of one table into one Parquet file, a row group each (the file opens with the first).
class ParquetWriter : public TableWriter {
 public:
  explicit ParquetWriter(std::string path) : path_(std::move(path)) {}
  Status Append(const Table& t) override { return Guard([&] { return AppendChunk(t); }); }
  Status Close() override {
    return Guard([&]() -> arrow::Status {
      if (!writer_) return arrow::Status::OK();
      ARROW_RETURN_NOT_OK(writer_->Close());
      return out_->Close();
    });
  }

 private:
  // Arrow reports errors as Status; nothing may throw across the plugin's edge.
  template <typename F>
  Status Guard(F&& f) {
    try {
      const arrow::Status st = f();
      if (!st.ok()) return Status::Error(path_ + ": " + st.ToString());
    } catch (const std::exception& e) {
      return Status::Internal(path_ + ": " + e.what());
    }
    return {};
  }
  arrow::Status AppendChunk(const Table& t) {
    std::vector<std::shared_ptr<arrow::Field>> fields;
    std::vector<std::shared_ptr<arrow::Array>> arrays;
    for (const Column& c : t.columns) {
      std::shared_ptr<arrow::DataType> type;
      ARROW_ASSIGN_OR_RAISE(auto array, ArrayOf(c, &type));
      fields.push_back(arrow::field(c.name, type, /*nullable=*/true));
      arrays.push_back(std::move(array));
    }
    auto schema = arrow::schema(fields);
    if (!writer_) {
      ARROW_ASSIGN_OR_RAISE(out_, arrow::io::FileOutputStream::Open(path_));
      // zstd: about snappy's speed with smaller files (names repeat: dictionary pages do most of it).
      auto props = parquet::WriterProperties::Builder().compression(arrow::Compression::ZSTD)->build();
      ARROW_ASSIGN_OR_RAISE(writer_, parquet::arrow::FileWriter::Open(*schema, arrow::default_memory_pool(), out_, props));
    }
    auto table = arrow::Table::Make(schema, arrays, static_cast<int64_t>(t.rows()));
    return writer_->WriteTable(*table, std::max<int64_t>(1, static_cast<int64_t>(t.rows())));
  }
  std::string path_;
  std::shared_ptr<arrow::io::FileOutputStream> out_;
  std::unique_ptr<parquet::arrow::FileWriter> writer_;
};

class ParquetSink : public TableSink {
 public:
  const char* Extension() const override { return "parquet"; }
  StatusOr<std::unique_ptr<TableWriter>> Open(const std::string& path) override {
    return std::unique_ptr<TableWriter>(std::make_unique<ParquetWriter>(path));
  }
};

}  // namespace
}  // namespace trainrx::exports

extern "C" __attribute__((visibility("default"))) int trainrx_parquet_abi() { return trainrx::exports::kExportAbi; }

extern "C" __attribute__((visibility("default"))) trainrx::exports::TableSink* trainrx_new_parquet_sink() {
  return new trainrx::exports::ParquetSink();
}
