// Internal interface between the reader's public API (reader.cc, compiled for the baseline
// CPU) and the parser behind it. Private to profiler/. It includes no simdjson, so baseline files
// may include it; the SIMD-compiled parser files share kineto_parse_internal.h.
//
// The parser's files, outermost first (importers.cc calls ParseSource as the Kineto importer,
// importer.h, then decides the source's rank and records its RankInfo):
//   kineto_document.cc  ParseSource: byte windows -> header, events array, trailer (SIMD)
//   kineto_events.cc    WindowDecoder: a window of traceEvents -> a Fragment; SourceAssembler:
//                       fragments -> the trace in file order (SIMD)
//   kineto_metadata.cc  header + trailer -> RankInfo: deviceProperties, distributedInfo, "trainrx" (SIMD)
#pragma once

#include <cstdint>
#include <string>

#include "byte_source.h"
#include "trainrx/profiler/reader.h"

namespace trainrx::profiler {

// SIMD-compiled; call only after the CPU check. Reads one source's events into `trace`, on tracks of
// rank `provisional_rank`, and its top-level members into *info (all but rank, source, rank_source
// and job, which are the rank policy's). On error `trace` may hold part of the source:
// callers roll back to a Trace::Checkpoint taken before (ReadTraces and ReadTraceBuffer do).
Status ParseSource(io::ByteSource& src, const std::string& name, int32_t provisional_rank, Trace& trace,
                       const ReadOptions& options, RankInfo* info);

}  // namespace trainrx::profiler
