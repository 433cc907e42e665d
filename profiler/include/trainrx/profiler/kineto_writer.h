// trainrx::profiler Kineto writer: writes a Trace as Kineto-compatible Chrome-trace JSON that
// Perfetto, chrome://tracing, TensorBoard and HTA open, and that our reader reads back to an
// equal model (round trip). One file per rank; .gz output when the path ends in ".gz".
// Timestamps are written as µs with exactly three decimals, relative to baseTimeNanoseconds.
#pragma once

#include <ostream>
#include <string>

#include "trainrx/profiler/json_writer.h"
#include "trainrx/profiler/reader.h"
#include "trainrx/profiler/trace.h"

namespace trainrx::profiler {

inline constexpr int kTrainrxSchemaMajor = 1;

// Writes the events of one rank to `out`.
void WriteKinetoJson(const Trace& trace, int32_t rank, std::ostream& out);

// The pieces of WriteKinetoJson, for a writer that appends events over time (the collector's
// journal, probes/journal.h): the top-level members before "traceEvents" (inside an object the
// caller began), and the rank's events as elements of an array the caller began, with times
// relative to `base` ns.
void WriteKinetoHeader(JsonWriter& w, const Trace& trace, int32_t rank);
void WriteKinetoEvents(JsonWriter& w, const Trace& trace, int32_t rank, int64_t base);
// Writes to a file: gzip when the path ends with .gz.
Status WriteKinetoFile(const Trace& trace, int32_t rank, const std::string& path);
// The same through a temporary file beside `path` ("<path>.tmp<pid>", gzip or not by `path`'s
// name, never the temporary's: `record -o run.json.gz` is gzip), renamed
// over `path` once whole: no reader ever sees half a trace under its name, and a failure leaves
// neither file. The collector's exit and `record`'s journal salvage write this way.
Status ReplaceKinetoFile(const Trace& trace, int32_t rank, const std::string& path);

}  // namespace trainrx::profiler
