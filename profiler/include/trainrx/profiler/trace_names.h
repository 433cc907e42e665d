// trainrx::profiler trace names — the one place a per-process trace file name is built and read
// back, and the one rule for a rank that two files claim. Torch-free and regex-free (the probe
// compiles it too).
//
// Writing: a launch's first process writes `base` ("run.json"); its other processes write `base`
// tagged before the ".json" of its file name: ".rank<R>" when the process knows its rank, else
// ".pid<PID>" ("run.rank1.json", "run.pid77.json", "run.rank1.json.gz"; without ".json" in the file
// name the tag goes at the end: "trace" -> "trace.pid5"). Only the file name is looked at:
// "out.json.d/run.json" -> "out.json.d/run.rank1.json". The probes' session (its processes),
// experiments' rank launches and `trainrx convert` (a set of several ranks) all name files so.
//
// Reading: ParseTaggedTraceName is the inverse of the above for one launch's base name;
// RankInFileName is the reader's looser rule for any file ("rank-3.json", "worker_rank_12.json").
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace trainrx::profiler {

// Start of the ".json..." part of `path`'s file name (the first ".json" in it), or the path's end
// when its file name has none.
size_t TraceSuffixStart(std::string_view path);

// "dir/run.json" + ".rank1" -> "dir/run.rank1.json"; "trace" + ".pid5" -> "trace.pid5".
std::string TaggedTracePath(std::string_view base, std::string_view tag);
// ".rank<R>" / ".pid<P>" tags.
std::string RankTracePath(std::string_view base, int64_t rank);
std::string PidTracePath(std::string_view base, int64_t pid);

// Where a traced process of a launch writes: the root process `base`; another one
// RankTracePath(base, rank) when rank >= 0, else PidTracePath(base, pid).
//   "run.json", root       -> "run.json"
//   "run.json.gz", rank 1  -> "run.rank1.json.gz"
//   "out/run.json", pid 77 -> "out/run.pid77.json"
std::string ProcessTracePath(std::string_view base, bool is_root, int64_t rank, int64_t pid);

struct TraceTag {
  enum class Kind { kRank, kPid };
  Kind kind = Kind::kRank;
  int64_t value = 0;
  bool operator==(const TraceTag&) const = default;
};

// The tag of `name` when it is one of `base`'s tagged names: `base`'s stem, ".rank" or ".pid",
// decimal digits, `base`'s suffix, nothing else. Both are compared whole: pass file names
// (or paths in the same form). "run.rank1.json" of "run.json" -> {kRank, 1}; "run.json" itself,
// "run.rankX.json", "run.rank1.old.json", "other.rank1.json" -> nullopt.
std::optional<TraceTag> ParseTaggedTraceName(std::string_view name, std::string_view base);

// The rank a trace's file name states, for the reader: the decimal digits after the first "rank"
// (any case) that is followed by digits, with one optional '-' or '_' between, in the path's file
// name: "rank-3.json" -> 3, "run.rank1.json.gz" -> 1, "worker_RANK_12.pt.trace.json" -> 12,
// "ranking.json" -> -1. -1 also when the digits do not fit an int32_t.
int32_t RankInFileName(std::string_view path);

// What a rank claimed by a file becomes when another file holds it already (`taken`): the next
// free rank above it (from 0 again past the largest int32_t). Readers go through the files in order,
// so the later file moves. Returns false, leaving both alone, when `*rank` is free; else moves
// `*rank` and appends kMovedRankNote to `*rank_source` (when given).
inline constexpr std::string_view kMovedRankNote = " (collided with another file; moved)";
bool MoveClaimedRank(int32_t* rank, std::string* rank_source, const std::function<bool(int32_t)>& taken);

}  // namespace trainrx::profiler
