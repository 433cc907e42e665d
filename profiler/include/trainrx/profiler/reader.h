// trainrx::profiler trace reader: fills a Trace from the files of a run, in any format an importer
// reads (profiler/io/importer.h: PyTorch profiler / Kineto JSON, our collector's journal), picked
// by each file's first bytes, not its name. The entry points (ReadTraces, ExpandTracePaths,
// CheckJobs) know no format; a new input format is an importer, not a change here.
//
// Formats read today:
//  - Kineto (torch.profiler) JSON object with "traceEvents", categories old (Operator, Runtime,
//    Kernel, Memcpy, Memset) and new (cpu_op, cuda_runtime, cuda_driver, kernel, gpu_memcpy,
//    gpu_memset, user_annotation, gpu_user_annotation, python_function, cuda_sync, ac2g, fwdbwd),
//    integer µs or decimal µs with ns precision, optional baseTimeNanoseconds, distributedInfo,
//    deviceProperties; our own "trainrx" config block.
//  - The legacy autograd profiler's export_chrome_trace: a bare array, no "cat", "pid": "CPU functions".
//  - Our collector's journal ("<trace>.partial": a process killed before it wrote its trace).
//  - Gzip of any of them (detected by magic bytes); a directory of per-rank files (the names each
//    importer claims in a folder: *.json, *.json.gz).
//
// Errors: a file that is not a trace (missing, empty, truncated, not JSON, JSON of another shape)
// returns an error Status (status.h) naming the file and what was wrong, and leaves the Trace exactly as it
// was before the call (ReadTraces: all files or none). Malformed events inside a valid trace are
// skipped and counted in Trace::stats, never fatal.
//
// Memory: the file is streamed in windows (default 2 MiB) and each window is parsed with
// simdjson On-Demand, so peak memory is the model plus one window, not the file plus its index.
// Threading: a call parses windows of events on worker threads (ReadOptions::threads) and merges
// them in file order, so the Trace is the same whatever the thread count; calls share no state.
#pragma once

#include <atomic>
#include <string>
#include <string_view>
#include <vector>

#include "trainrx/profiler/status.h"
#include "trainrx/profiler/thread_counters.h"
#include "trainrx/profiler/trace.h"

namespace trainrx::profiler {

// Where a read's work went (bench/ingest_bench.cc's breakdown), summed over the threads that did
// it: parsing windows into fragments (simdjson and the decoder), merging them into the trace in
// file order, copying merged events into place, and the model's last pass (Finalize: sort, index).
// What is left of the read (reading the bytes, finding where windows end) is the caller's total
// less these. Instructions stay -1 where the machine has no counter (thread_counters.h).
struct ReadTimings {
  struct Part {
    std::atomic<int64_t> cpu_ns{0}, instructions{0};
    std::atomic<bool> counted{true};  // false once a thread had no instruction counter
  };
  Part parse, merge, copy, finalize;
  int64_t finalize_wall_ns = 0;
};
// Adds the calling thread's CPU time and instructions from its construction to its end to `part`
// (nothing when null).
class ChargedTo {
 public:
  explicit ChargedTo(ReadTimings::Part* part)
      : part_(part), cpu_(part ? ThreadCpuNs() : 0), instructions_(part ? ThreadInstructions() : -1) {}
  ~ChargedTo() {
    if (part_ == nullptr) return;
    part_->cpu_ns += ThreadCpuNs() - cpu_;
    const int64_t now = ThreadInstructions();
    if (instructions_ < 0 || now < 0) part_->counted = false;
    else part_->instructions += now - instructions_;
  }
  ChargedTo(const ChargedTo&) = delete;
  ChargedTo& operator=(const ChargedTo&) = delete;

 private:
  ReadTimings::Part* part_;
  int64_t cpu_, instructions_;
};

struct ReadOptions {
  // Windows of 1-2 MiB of events: a worker's window and its simdjson index stay in cache, and the
  // windows in flight (kineto_document.cc) hold about 20 MiB; 8 MiB windows took 35 MB more RSS and
  // ran no faster on the 240 MB trace.
  size_t window_bytes = 2u << 20;
  // Threads that parse a source's windows while the calling thread reads and splits it: 0 = one
  // per CPU this process may run on (taskset and cpusets count), 1 = parse on the calling thread.
  // The result is the same for every value.
  int threads = 0;
  // Rank to give a file without distributedInfo; -1 = derive from the file name ("rank-3",
  // "rank3") or else the file's position in the sorted input list.
  int32_t rank_hint = -1;
  // Files of different jobs (distributedInfo world size / backend differ), or one job's ranks
  // claimed twice or beyond its world size: by default a "mixed_jobs" / "inconsistent_ranks"
  // error entry in Trace::stats naming which files form which job; with strict, a read error.
  bool strict = false;
  // Where the time went, when set (benches).
  ReadTimings* timings = nullptr;
};

// Reads one or more paths (files, or directories of the files importers claim by name: *.json,
// *.json.gz, *.pt.trace.json[.gz]) into `trace`, merging ranks, then calls trace.Finalize().
Status ReadTraces(const std::vector<std::string>& paths, Trace& trace,
                      const ReadOptions& options = {});

// Reads trace bytes already in memory (plain JSON or gzip); `source_name` is used in messages.
Status ReadTraceBuffer(std::string_view bytes, std::string_view source_name, int32_t rank,
                           Trace& trace, const ReadOptions& options = {});

// Checks that `ranks` (the files read, one RankInfo each) form one job's ranks, recording what does
// not fit in `stats` as errors that name the files: files of different jobs ("mixed_jobs", one per
// job), and within a job a rank claimed by two files, a rank beyond the world size, or more files
// than ranks ("inconsistent_ranks", one per problem); a set with some of its job's ranks missing
// is an info entry ("missing_ranks"). Returns the first error's message, or "". ReadTraces calls it
// on what it merges; a set analyzed rank by rank (trainrx/sets) calls it on its ranks.
std::string CheckJobs(const std::vector<RankInfo>& ranks, IngestStats* stats);

// Expands directories into the sorted list of trace files they contain: the names some importer
// claims in a folder (Importer::folder_suffixes); a file named on its own is read whatever its name.
// An error ("<path>: no such file or directory") when a path is missing or a directory holds none.
StatusOr<std::vector<std::string>> ExpandTracePaths(const std::vector<std::string>& paths);

}  // namespace trainrx::profiler
