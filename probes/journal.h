// trainrx::probes journal — the collector's periodic flush, so that a job killed by SIGKILL or the
// OOM killer (no exit handler, no signal handler runs) still leaves what it recorded up to a
// bounded moment.
//
// While recording, a background thread (ProcessSession starts it) drains the collector every
// `interval` (TRAINRX_FLUSH_SECONDS, default 2 s) and appends what finished since the last drain
// to "<trace>.partial": a Kineto trace whose header (with baseTimeNanoseconds and the "trainrx"
// block, "journal_flush_ms" in it) comes first and whose traceEvents array grows at each flush and
// is never closed. A killed process leaves it cut off after its last flush; the reader salvages
// such a file ("truncated_trace"), and `trainrx record` turns it into the trace the process
// would have written (experiments::FinishJournals). A process that ends normally writes its
// trace as before and removes the journal.
//
// Cost: the drain runs off the hot path (its own thread; the recording threads never wait for
// it; a config sample waits at most for a copy of the new samples). Each flush appends one
// "trainrx.journal" counter (its sequence number, at the flush time) so a reader knows how far
// the journal got.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>

#include "collector.h"
#include "trainrx/profiler/json_writer.h"

namespace trainrx::probes {

// "run.json" -> "run.json.partial"
std::string JournalPath(const std::string& trace_path);

class Journal {
 public:
  // Creates `path` and writes the header: the collector's static config so far, the rank,
  // `base_ns`. False with *error when the file cannot be created or written.
  bool Open(const std::string& path, Collector& collector, int32_t rank, int64_t base_ns, int64_t interval_ms,
            std::string* error);
  // Drains what finished since the last flush and appends it. False with *error when the write
  // failed (ENOSPC...): the journal is then closed and later flushes do nothing.
  bool Flush(Collector& collector, int64_t now_ns, std::string* error);
  // Closes and deletes the file (the process wrote its trace).
  void Remove();
  bool open() const { return fd_ >= 0; }

  struct Stats {
    uint64_t flushes = 0;
    uint64_t events = 0;
    uint64_t bytes = 0;
    int64_t busy_ns = 0;  // time spent draining and writing, all flushes
  };
  const Stats& stats() const { return stats_; }

 private:
  bool WriteOut(std::string* error);

  int fd_ = -1;
  std::string path_;
  int32_t rank_ = 0;
  int64_t base_ns_ = 0;
  std::ostringstream buf_;
  profiler::JsonWriter writer_{buf_};
  DrainCursor cursor_;
  Stats stats_;
};

}  // namespace trainrx::probes
