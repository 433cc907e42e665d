// trainrx::probes journal — the collector's periodic flush, so that a job killed by SIGKILL or the
// OOM killer (no exit handler, no signal handler runs) still leaves what it recorded up to a
// bounded moment.
//
// While recording, a background thread (ProcessSession starts it) drains the collector every
// `interval` (TRAINRX_FLUSH_SECONDS, default 2 s) and appends what finished since the last drain
// to "<trace>.partial" as one binary frame (profiler/journal_format.h): the drained fragment as the
// collector built it (48-byte events, the strings and side-table rows they use), a length and a
// hash. No JSON is written during the run: when a killed run is salvaged, `trainrx record` decodes
// the journal and writes the trace the process would have written through the same Kineto writer
// (experiments::FinishJournals); `trainrx analyze run.json.partial` reads it as a trace. A process
// that ends normally writes its trace as before and removes the journal.
//
// Cost (issue 34.13): the JSON journal spent ~0.5 us a record on a thread that competed with the
// training's intra-op threads. Now a flush is the drain plus a copy (bench figures in docs/benchmarks.md),
// and the thread runs at SCHED_IDLE (session.cc): it uses only CPU time no training thread wants.
// The recording threads never wait for it (a config sample waits at most for a copy of the new
// samples; a new name or input row for a copy of the new rows' addresses, collector.cc).
//
// Loss bound: what finished before the last whole frame's flush_ns is in the journal. A starved
// flusher (every core busy) flushes late: the loss on a kill is then the time since its last
// flush, which the salvaged trace states (journal_missing_ns); the largest gap between flushes of
// a run that ended normally is in its trace (journal_max_gap_ns). A frame cut off by the kill is
// detected by its length and counted (journal_torn_flush). Each frame holds one
// "trainrx.journal" counter (its sequence number, at flush_ns) so a reader knows how far it got.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "collector.h"
#include "trainrx/profiler/status.h"

namespace trainrx::probes {

// "run.json" -> "run.json.partial"
std::string JournalPath(const std::string& trace_path);

class Journal {
 public:
  // Creates `path` and writes the header: the collector's static config so far, the rank,
  // `base_ns`. An error ("<path>: <why>") when the file cannot be created or written.
  Status Open(const std::string& path, Collector& collector, int32_t rank, int64_t base_ns, int64_t interval_ms);
  // Drains what finished since the last flush and appends it. An error when the write failed
  // (ENOSPC...): the journal is then closed and later flushes do nothing.
  Status Flush(Collector& collector, int64_t now_ns);
  // Closes and deletes the file (the process wrote its trace).
  void Remove();
  bool open() const { return fd_ >= 0; }

  struct Stats {
    uint64_t flushes = 0;
    uint64_t events = 0;
    uint64_t bytes = 0;
    int64_t busy_ns = 0;     // wall time spent draining and writing, all flushes (a preempted flush counts)
    int64_t cpu_ns = 0;      // the flushing thread's CPU time in them (CLOCK_THREAD_CPUTIME_ID)
    int64_t max_gap_ns = 0;  // longest time between two flushes (from Open): the loss bound a kill met
    // When each flush ran (wall ns, start and end), the first kMaxSpans: the trace shows them as
    // the "trainrx.journal_busy" counter (1 while flushing), so a step's time can be read against
    // the flusher's (bench/journal_steps.py).
    static constexpr size_t kMaxSpans = 4096;
    std::vector<std::pair<int64_t, int64_t>> spans;
  };
  const Stats& stats() const { return stats_; }

 private:
  Status WriteOut();
  void ResetFragment();  // an empty fragment of this rank, its events reserved (journal.cc)

  int fd_ = -1;
  std::string path_;
  int32_t rank_ = 0;
  int64_t base_ns_ = 0;
  int64_t last_flush_ns_ = 0;
  // Heap bytes the journal holds between flushes (buf_, fragment_'s tables, the cursor): the
  // collector leaves them out of its heap samples (Collector::SetJournalBytes).
  uint64_t HeldBytes() const;
  std::string buf_;  // the bytes of the header or of one frame, reused
  profiler::Trace fragment_;  // what one flush drained, reused
  profiler::Trace::Checkpoint empty_;
  DrainCursor cursor_;
  Stats stats_;
};

}  // namespace trainrx::probes
