// The table writers of `trainrx export` (tables.h): CSV here; Parquet through its plugin.
#include <dlfcn.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "trainrx/exports/plugin.h"
#include "trainrx/exports/tables.h"

namespace trainrx::exports {
namespace {

void CsvField(std::ostream& out, std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos) {
    out << s;
    return;
  }
  out << '"';
  for (char c : s) {
    if (c == '"') out << '"';
    out << c;
  }
  out << '"';
}

class CsvSink : public TableSink {
 public:
  const char* Extension() const override { return "csv"; }
  Status Write(const Table& t, const std::string& path) override {
    std::ofstream out(path, std::ios::binary);
    for (size_t c = 0; c < t.columns.size(); ++c) (c ? out << ',' : out) << t.columns[c].name;
    out << '\n';
    for (size_t r = 0; r < t.rows(); ++r) {
      for (size_t c = 0; c < t.columns.size(); ++c) {
        const Column& col = t.columns[c];
        if (c) out << ',';
        if (!col.valid.empty() && !col.valid[r]) continue;  // null: empty field
        switch (col.type) {
          case ColumnType::kDouble: out << fmt::format("{}", col.doubles[r]); break;
          case ColumnType::kString: CsvField(out, col.strings[r]); break;
          case ColumnType::kBool: out << (col.ints[r] ? "true" : "false"); break;
          default: out << col.ints[r]; break;
        }
      }
      out << '\n';
    }
    out.flush();
    if (!out) return Status::Error(path + ": write failed");
    return {};
  }
};

}  // namespace

std::unique_ptr<TableSink> NewCsvSink() { return std::make_unique<CsvSink>(); }

StatusOr<std::unique_ptr<TableSink>> OpenParquetSink(const std::string& plugin_dir) {
  const std::string path = (std::filesystem::path(plugin_dir) / kParquetPlugin).string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return Status::Error(fmt::format(
        "--format parquet: this trainrx was built without its Parquet writer ({} is missing): it needs the Arrow C++ "
        "libraries of pyarrow {} at build time (scripts/setup installs it; pip install 'trainrx[sql]'); --format csv "
        "needs nothing",
        path, kPyarrowVersion));
  // Loaded once, kept for the process (the sink's code lives in it).
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return Status::Error(fmt::format("--format parquet: cannot load {} ({}): it needs pyarrow {} installed beside trainrx "
                                     "(pip install 'trainrx[sql]' or pip install pyarrow=={})",
                                     path, dlerror(), kPyarrowVersion, kPyarrowVersion));
  auto make = reinterpret_cast<ParquetSinkFactory>(dlsym(lib, kParquetFactorySymbol));
  if (!make) return Status::Error(fmt::format("--format parquet: {} has no {}: a plugin of another trainrx build?", path, kParquetFactorySymbol));
  return std::unique_ptr<TableSink>(make());
}

StatusOr<std::unique_ptr<TableSink>> OpenSink(const std::string& format, const std::string& plugin_dir) {
  if (format == "csv") return NewCsvSink();
  if (format == "parquet") return OpenParquetSink(plugin_dir);
  return Status::Error(fmt::format("--format {}: unknown table format (expected parquet or csv)", format));
}

}  // namespace trainrx::exports
