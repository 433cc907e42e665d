// The reader's input formats behind one interface (issue 53). Private to profiler/.
//
// An importer recognises its sources by their first bytes and reads one source's events into the
// trace on tracks of a provisional rank, filling the source's RankInfo as the source declares it
// (distributedInfo, devices, the collector's block). Everything around that is written once, in
// ReadOneSource (importers.cc), for every importer: gzip (the byte source inflates), the rank policy
// (distributedInfo, the caller's hint, the file name, the first free rank), the losses the source
// reports into IngestStats, and the RankInfo entry; ReadTraces adds path expansion, the mixed-jobs
// check and all-or-nothing reads (reader.cc), and a folder scan reads the names importers claim.
//
// Adding an input format (docs/architecture.md "Adding an input format"): one file with a
// `Status Read...(io::ByteSource&, const std::string& name, int32_t provisional_rank, Trace&,
// const ReadOptions&, RankInfo*)` and a `bool Recognizes...(std::string_view head)`, and one line in
// Importers() (importers.cc) with the file suffixes a folder scan should read as its; its tests in
// tests/profiler/importers_test.cc. The last importer (Kineto JSON) takes any source no other one
// recognises, so that its error says what a trace should look like.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "byte_source.h"
#include "trainrx/profiler/reader.h"

namespace trainrx::profiler {

struct Importer {
  const char* name;  // "Kineto JSON", "trainrx journal"
  // Whether a source starting with `head` (its first kSniffBytes bytes, fewer for a short source,
  // after gzip) is this importer's.
  bool (*recognizes)(std::string_view head);
  // Reads the source's events into `trace` on tracks of rank `provisional_rank` and its metadata
  // into *info (all but rank, source, rank_source and job: the rank policy's). On error the trace
  // may hold part of the source (the caller rolls back).
  Status (*read)(io::ByteSource& src, const std::string& name, int32_t provisional_rank, Trace& trace,
                 const ReadOptions& options, RankInfo* info);
  // The file names a folder scan reads as this importer's ("" ends the list). A folder holds a
  // set's traces; a file named on its own is read whatever its name (its first bytes decide).
  std::array<std::string_view, 3> folder_suffixes{};
};
// Whether a folder scan reads a file of this name (some importer claims its suffix).
bool ClaimedInFolder(std::string_view file_name);
// The suffixes folder scans read, for messages: "*.json, *.json.gz".
std::string FolderSuffixes();
inline constexpr size_t kSniffBytes = 16;

// Every importer, in the order they are asked; the last takes any source.
std::span<const Importer> Importers();

// Reads one source with the importer its first bytes name, then applies the rank policy and the
// loss accounting every importer shares. Takes the source over (it reads its first bytes).
Status ReadOneSource(std::unique_ptr<io::ByteSource> src, const std::string& name, int32_t rank_hint, Trace& trace,
                     const ReadOptions& options);

// The collector's binary journal, read directly into the trace (no Kineto JSON in between).
bool RecognizesJournal(std::string_view head);
Status ReadJournalSource(io::ByteSource& src, const std::string& name, int32_t provisional_rank, Trace& trace,
                         const ReadOptions& options, RankInfo* info);

}  // namespace trainrx::profiler
