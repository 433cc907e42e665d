// Public entry points of the trace reader (reader.h), for every input format (importer.h). This file is compiled for the
// baseline CPU: it checks that the CPU can run the SIMD-compiled parser (kineto_document.cc and
// the files it calls, see kineto_parse.h) before calling into it, so an old CPU gets a message
// instead of SIGILL. It also makes each call all or nothing (Trace::Checkpoint).
#include "trainrx/profiler/reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "byte_source.h"
#include "importer.h"
#include "trainrx/profiler/time.h"

namespace trainrx::profiler {
namespace {

Status CheckCpu() {
#if defined(TRAINRX_PARSER_NEEDS_AVX2) && (defined(__x86_64__) || defined(__i386__))
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("bmi2") || !__builtin_cpu_supports("pclmul")) {
    return Status::Error(
        "this CPU lacks AVX2/BMI2/PCLMUL, which this trainrx build's JSON parser was compiled for; "
        "rebuild with -DTRAINRX_SIMD=OFF");
  }
#endif
  return {};
}

}  // namespace

// Issue 12: `analyze DIR` merged traces of world sizes 64, 8 and 300 as one job's ranks, saying so
// only in rank_source.
std::string CheckJobs(const std::vector<RankInfo>& ranks, IngestStats* stats) {
  std::vector<std::pair<std::string, std::vector<const RankInfo*>>> jobs;  // in order of first file
  for (const RankInfo& r : ranks) {
    auto it = std::find_if(jobs.begin(), jobs.end(), [&](const auto& j) { return j.first == r.job; });
    if (it == jobs.end()) it = jobs.insert(jobs.end(), {r.job, {}});
    it->second.push_back(&r);
  }
  std::string first;
  auto add = [&](const char* kind, const std::string& msg, uint64_t n) {
    stats->Add(kind, IssueSeverity::kError, msg, n);
    if (first.empty()) first = msg;
  };
  if (jobs.size() > 1) {
    std::string msg = fmt::format("files of {} different jobs read as ranks of one job:", jobs.size());
    for (size_t j = 0; j < jobs.size(); ++j) {
      msg += fmt::format("{} {{{}: ", j ? ";" : "", jobs[j].first);
      for (size_t k = 0; k < jobs[j].second.size(); ++k) msg += (k ? ", " : "") + jobs[j].second[k]->source;
      msg += "}";
    }
    add("mixed_jobs", msg + ". Analyze each job's files on their own.", jobs.size());
  }
  for (const auto& [key, files] : jobs) {
    if (files.front()->declared_rank < 0) continue;  // no distributedInfo: nothing declared to check
    const int32_t world = files.front()->world_size;
    std::map<int32_t, std::vector<std::string>> by_rank;
    for (const RankInfo* r : files) by_rank[r->declared_rank].push_back(r->source);
    for (const auto& [rank, sources] : by_rank) {
      if (sources.size() > 1) {
        std::string list;
        for (const auto& src : sources) list += (list.empty() ? "" : ", ") + src;
        add("inconsistent_ranks", fmt::format("job {}: rank {} claimed by {} files: {}", key, rank, sources.size(), list), 1);
      }
      if (rank >= world)
        add("inconsistent_ranks", fmt::format("job {}: rank {} is beyond its world size ({})", key, rank, sources.front()), 1);
    }
    if (static_cast<int64_t>(files.size()) > world)
      add("inconsistent_ranks", fmt::format("job {}: {} files for {} ranks", key, files.size(), world), 1);
    // A set of several ranks with some missing (issue 18): said, not an error. One rank's file
    // on its own is the usual way to look at a job, and says nothing.
    if (files.size() >= 2 && static_cast<int64_t>(files.size()) < world && world <= (1 << 20)) {
      std::string missing;
      int32_t n = 0;
      for (int32_t r = 0; r < world; ++r) {
        if (by_rank.count(r)) continue;
        if (n < 10) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        ++n;
      }
      if (n > 10) missing += fmt::format(" and {} more", n - 10);
      stats->Add("missing_ranks", IssueSeverity::kInfo,
                      fmt::format("job {}: {} of its {} ranks are in this set; missing: {} (cross-rank figures cover "
                                  "only the ranks read)",
                                  key, files.size(), world, missing),
                      static_cast<uint64_t>(n));
    }
  }
  return first;
}

namespace {

// ReadTraces without the CPU check, the rollback and Finalize().
Status ReadFiles(const std::vector<std::string>& paths, Trace& trace, const ReadOptions& options) {
  auto files = ExpandTracePaths(paths);
  if (!files.ok()) return files.status();
  for (const auto& f : *files) {
    // Any importer's source (importer.h): a Kineto trace, a collector's journal ("<trace>.partial").
    auto src = io::OpenFileSource(f);
    if (!src.ok()) return src.status();
    if (auto st = ReadOneSource(std::move(*src), f, files->size() == 1 ? options.rank_hint : -1, trace, options); !st.ok())
      return st;
  }
  if (const std::string problem = CheckJobs(trace.ranks, &trace.stats); !problem.empty() && options.strict) {
    std::string inputs;
    for (const auto& p : paths) inputs += (inputs.empty() ? "" : ", ") + p;
    return Status::Error(fmt::format("{}: {} (strict: not analyzed)", inputs, problem));
  }
  return {};
}

}  // namespace

StatusOr<std::vector<std::string>> ExpandTracePaths(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> files;
      for (const auto& entry : fs::directory_iterator(p, ec)) {
        if (entry.is_regular_file() && ClaimedInFolder(entry.path().filename().string())) files.push_back(entry.path().string());
      }
      if (ec) return Status::Error(fmt::format("{}: cannot list directory: {}", p, ec.message()));
      if (files.empty()) return Status::Error(fmt::format("{}: directory contains no trace files ({})", p, FolderSuffixes()));
      std::sort(files.begin(), files.end());
      out.insert(out.end(), files.begin(), files.end());
    } else if (fs::exists(p, ec)) {
      out.push_back(p);
    } else {
      return Status::Error(fmt::format("{}: no such file or directory", p));
    }
  }
  if (out.empty()) return Status::Error("no trace files given");
  return out;
}

// Issue 15: the events of one read together hold at most kMaxTotalDurationNs (time.h), so that
// no sum of durations an analysis forms can overflow. Each duration is bounded by the decoder.
Status CheckTotalDuration(const Trace& trace, size_t first_event) {
  int64_t total = 0;
  for (size_t i = first_event; i < trace.events.size(); ++i) {
    total += trace.events[i].dur_ns;  // each <= 1e15, so one step cannot overflow past 2^62
    if (total > kMaxTotalDurationNs) {
      const Event& e = trace.events[i];
      const RankInfo* r = e.track < trace.tracks.size() ? trace.FindRank(trace.tracks[e.track].rank) : nullptr;
      return Status::Error(fmt::format(
          "{}: the events' durations add up to more than 2^62 ns (146 years) by event \"{}\": not a trace of a run "
          "(times in the wrong unit?)",
          r ? r->source : std::string("input"), trace.Name(e)));
    }
  }
  return {};
}

// The model's last pass (Trace::Finalize), timed where the caller asked.
static void Finalize(Trace& trace, const ReadOptions& options) {
  const size_t threads = options.threads > 0 ? static_cast<size_t>(options.threads) : 0;
  if (options.timings == nullptr) return trace.Finalize(threads);
  const auto t0 = std::chrono::steady_clock::now();
  {
    const ChargedTo charged(&options.timings->finalize);  // the calling thread's part: Finalize splits its work
    trace.Finalize(threads);
  }
  options.timings->finalize_wall_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
}

// Both entry points are all or nothing: a failure anywhere (a bad event window, the trailer, a
// later file of several, the strict job check) rolls the trace back to what it was on entry, so no
// caller can go on with names, tracks or side-table rows whose events were dropped. Rolling back to
// a checkpoint of sizes costs O(what the failed read added); see Trace::Checkpoint. `read` adds the
// input's events; then the durations are checked and the model finalized.
template <typename Read>
static Status ReadWhole(Trace& trace, const ReadOptions& options, Read read) {
  if (auto st = CheckCpu(); !st.ok()) return st;
  const Trace::Checkpoint entry = trace.Mark();
  auto st = read();
  if (st.ok()) st = CheckTotalDuration(trace, entry.events);
  if (!st.ok()) {
    trace.RollBack(entry);
    return st;
  }
  Finalize(trace, options);
  return st;
}

Status ReadTraceBuffer(std::string_view bytes, std::string_view source_name, int32_t rank, Trace& trace,
                       const ReadOptions& options) {
  return ReadWhole(trace, options,
                   [&] { return ReadOneSource(io::OpenMemorySource(bytes), std::string(source_name), rank, trace, options); });
}

Status ReadTraces(const std::vector<std::string>& paths, Trace& trace, const ReadOptions& options) {
  return ReadWhole(trace, options, [&] { return ReadFiles(paths, trace, options); });
}

}  // namespace trainrx::profiler
