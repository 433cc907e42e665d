// Internal interface between the reader's public API (kineto_reader.cc) and its SIMD-compiled
// parser (kineto_parse.cc). Private to profiler/.
#pragma once

#include <string>

#include "byte_source.h"
#include "trainrx/profiler/kineto_reader.h"

namespace trainrx::profiler {

// Parses one trace source into `trace` and registers its rank (distributedInfo, else rank_hint,
// else the file name, else the first free rank). On error the trace keeps no events of it.
ReadStatus ParseOneSource(io::ByteSource& src, const std::string& name, int32_t rank_hint, Trace& trace,
                          const ReadOptions& options);

}  // namespace trainrx::profiler
