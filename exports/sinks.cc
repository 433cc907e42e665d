// The table writers of `trainrx export` (tables.h): CSV here; Parquet through its plugin.
#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
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

class CsvWriter : public TableWriter {
 public:
  explicit CsvWriter(std::string path) : path_(std::move(path)), out_(path_, std::ios::binary) {}
  Status Append(const Table& t) override {
    if (!header_) {
      for (size_t c = 0; c < t.columns.size(); ++c) (c ? out_ << ',' : out_) << t.columns[c].name;
      out_ << '\n';
      header_ = true;
    }
    for (size_t r = 0; r < t.rows(); ++r) {
      for (size_t c = 0; c < t.columns.size(); ++c) {
        const Column& col = t.columns[c];
        if (c) out_ << ',';
        if (!col.valid.empty() && !col.valid[r]) continue;  // null: empty field
        switch (col.type) {
          case ColumnType::kDouble: out_ << fmt::format("{}", col.doubles[r]); break;
          case ColumnType::kString: CsvField(out_, col.strings[r]); break;
          case ColumnType::kBool: out_ << (col.ints[r] ? "true" : "false"); break;
          default: out_ << col.ints[r]; break;
        }
      }
      out_ << '\n';
    }
    if (!out_) return Status::Error(path_ + ": write failed");
    return {};
  }
  Status Close() override {
    out_.close();
    if (!out_) return Status::Error(path_ + ": write failed");
    return {};
  }

 private:
  std::string path_;
  std::ofstream out_;
  bool header_ = false;
};

class CsvSink : public TableSink {
 public:
  const char* Extension() const override { return "csv"; }
  StatusOr<std::unique_ptr<TableWriter>> Open(const std::string& path) override {
    auto w = std::make_unique<CsvWriter>(path);
    return std::unique_ptr<TableWriter>(std::move(w));
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
  // Loaded once, kept for the process (the sink's code lives in it). Its RUNPATH finds pyarrow
  // beside the package and where the build found it; a pyarrow elsewhere is named by the Python
  // side in TRAINRX_ARROW_LIBDIR (python/trainrx/_paths.py): its libraries are loaded first, so
  // the plugin's NEEDED sonames are already there.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string why = lib ? "" : dlerror();
  const char* arrow_dir = std::getenv("TRAINRX_ARROW_LIBDIR");
  if (!lib && arrow_dir && *arrow_dir) {
    for (const char* name : {"libarrow.so.", "libparquet.so."}) {
      const std::string so = fmt::format("{}/{}{}", arrow_dir, name, kPyarrowSoversion);
      if (!dlopen(so.c_str(), RTLD_NOW | RTLD_GLOBAL)) why += fmt::format("; {}", dlerror());
    }
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) why += fmt::format("; with TRAINRX_ARROW_LIBDIR={}: {}", arrow_dir, dlerror());
  }
  if (!lib)
    return Status::Error(fmt::format("--format parquet: cannot load {} ({}): it needs pyarrow {} installed beside trainrx "
                                     "(pip install 'trainrx[sql]' or pip install pyarrow=={})",
                                     path, why, kPyarrowVersion, kPyarrowVersion));
  auto abi = reinterpret_cast<ParquetAbi>(dlsym(lib, kParquetAbiSymbol));
  auto make = reinterpret_cast<ParquetSinkFactory>(dlsym(lib, kParquetFactorySymbol));
  if (!abi || !make || abi() != kExportAbi)
    return Status::Error(fmt::format("--format parquet: {} is a plugin of another trainrx build (its table ABI {}, this "
                                     "trainrx's {}): rebuild or reinstall trainrx",
                                     path, abi ? abi() : 0, kExportAbi));
  return std::unique_ptr<TableSink>(make());
}

StatusOr<std::unique_ptr<TableSink>> OpenSink(const std::string& format, const std::string& plugin_dir) {
  if (format == "csv") return NewCsvSink();
  if (format == "parquet") return OpenParquetSink(plugin_dir);
  return Status::Error(fmt::format("--format {}: unknown table format (expected parquet or csv)", format));
}

}  // namespace trainrx::exports
