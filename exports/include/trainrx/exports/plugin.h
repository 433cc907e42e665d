// The contract between trainrx and its Parquet plugin (exports/parquet/parquet_sink.cc), which the
// CLI loads with dlopen from its own folder only for `export --format parquet`: the plugin links
// the Arrow C++ libraries of the pinned pyarrow wheel, so trainrx itself needs no pyarrow to run.
// Both sides are built by the same build (same compiler, same TableSink), hence a C++ object
// crosses; the factory has C linkage only so that its symbol name is stable.
#pragma once

#include "trainrx/exports/table.h"

namespace trainrx::exports {

inline constexpr const char* kParquetPlugin = "libtrainrx_parquet.so";
inline constexpr const char* kParquetFactorySymbol = "trainrx_new_parquet_sink";
// The pyarrow whose Arrow libraries the plugin is built against (scripts/setup, pyproject.toml's
// `sql` extra and cmake/Pyarrow.cmake pin the same).
inline constexpr const char* kPyarrowVersion = "26.0.1";
inline constexpr const char* kPyarrowSoversion = "2600";  // its libarrow.so.2600, libparquet.so.2600
using ParquetSinkFactory = TableSink* (*)();
// The plugin's build of table.h: a plugin whose TableSink or Table differs from the loader's would
// crash the process, so the loader refuses one whose number is not its own. Bump on any change to
// table.h's types. 2: chunked writers (TableSink::Open, TableWriter).
inline constexpr int kExportAbi = 2;
inline constexpr const char* kParquetAbiSymbol = "trainrx_parquet_abi";
using ParquetAbi = int (*)();

}  // namespace trainrx::exports
