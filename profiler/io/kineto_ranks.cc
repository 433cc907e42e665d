// Which rank a parsed source becomes, and its entry in Trace::ranks. Compiled for the baseline CPU
// (it needs no SIMD): the parsing itself is ParseSource (kineto_document.cc).
//
// The policy, first match wins: distributedInfo.rank, else the rank the caller gives
// (ReadOptions::rank_hint for a single file, ReadTraceBuffer's rank), else digits after "rank" in
// the file name (RankInFileName, trace_names.h), else 0. Collisions (two files claiming one rank)
// move the later file to the next free rank and say so in rank_source (MoveClaimedRank). Example, files without distributedInfo read in this order:
// rank1.json -> 1 and rank0.json -> 0 (rank_source "file name"), then notes.json -> 0 is taken,
// so 2 (rank_source "input order (collided with another file; moved)").
#include <fmt/format.h>

#include <cstdlib>

#include "kineto_parse.h"
#include "trainrx/profiler/trace_names.h"

namespace trainrx::profiler {

Status ParseOneSource(io::ByteSource& src, const std::string& name, int32_t rank_hint, Trace& trace,
                          const ReadOptions& options) {
  // Tracks are keyed by rank, so the source is parsed under a rank no file can have until its
  // distributedInfo (in the trailer, after the events) is known, then remapped.
  constexpr int32_t kProvisional = -1000000;
  RankInfo info;
  if (auto st = ParseSource(src, name, kProvisional, trace, options, &info); !st.ok()) return st;
  auto taken = [&](int32_t r) { return trace.FindRank(r) != nullptr; };
  int32_t rank = -1;
  std::string how;
  if (info.declared_rank >= 0) {
    rank = info.declared_rank;
    how = "distributedInfo";
  } else if (rank_hint >= 0) {
    rank = rank_hint;
    how = "given";
  } else if (int32_t fr = RankInFileName(name); fr >= 0) {
    rank = fr;
    how = "file name";
  } else {
    rank = 0;
    how = "input order";
  }
  MoveClaimedRank(&rank, &how, taken);
  info.rank = rank;
  info.source = name;
  info.rank_source = how;
  info.job = info.declared_rank >= 0
                 ? fmt::format("world_size {}{}", info.world_size, info.backend.empty() ? "" : ", " + info.backend)
                 : "no distributedInfo";
  // Losses our collector recorded while tracing (its "trainrx" block) are data loss of this trace.
  for (const char* key : {"dropped_records", "cupti_dropped_records", "unfinished_ranges"}) {
    auto it = info.config.find(key);
    if (it == info.config.end()) continue;
    const auto n = static_cast<uint64_t>(std::max<int64_t>(0, it->second.AsInt().value_or(0)));
    if (n > 0) {
      trace.stats.Add(fmt::format("collector_{}", key),
                      std::string_view(key) == "unfinished_ranges" ? IssueSeverity::kInfo : IssueSeverity::kDataLoss,
                      fmt::format("{}: reported by the trainrx collector", name), n);
    }
  }
  // A journal read as it is (its process was killed with its launcher, or still runs): the last
  // flush period is missing, at most.
  if (info.config.count("journal_flush_ms") && !info.config.count("journal_salvaged")) {
    const double period_s = info.config.at("journal_flush_ms").AsNumber().value_or(0) / 1e3;
    trace.stats.Add("journal_cut", IssueSeverity::kDataLoss,
                    fmt::format("{}: a collector journal, not a finished trace (its process was killed, or is still "
                                "running): what it recorded after its last flush is missing (flushed every {:g} s)",
                                name, period_s),
                    1);
  }
  // A binary journal's own losses (journal_format.h): a last flush cut off while it was written,
  // frames that did not check out.
  if (auto it = info.config.find("journal_torn_bytes"); it != info.config.end()) {
    trace.stats.Add("journal_torn_flush", IssueSeverity::kDataLoss,
                    fmt::format("{}: the journal's last flush was cut off while it was written ({} bytes): what it "
                                "held is lost, as if that flush had not run",
                                name, it->second.Text()),
                    1);
  }
  if (auto it = info.config.find("journal_corrupt_frames"); it != info.config.end()) {
    const auto bytes = info.config.find("journal_corrupt_bytes");
    trace.stats.Add("journal_corrupt_frames", IssueSeverity::kDataLoss,
                    fmt::format("{}: journal flushes whose bytes did not check out were skipped ({} bytes)", name,
                                bytes == info.config.end() ? "?" : bytes->second.Text()),
                    static_cast<uint64_t>(std::max<int64_t>(0, it->second.AsInt().value_or(0))));
  }
  // A trace made from a killed process's journal: what it recorded after its last flush is lost.
  if (auto it = info.config.find("journal_missing_ns"); it != info.config.end()) {
    const double missing_s = it->second.AsNumber().value_or(0) / 1e9;
    trace.stats.Add("journal_cut", IssueSeverity::kDataLoss,
                    fmt::format("{}: made from the journal of a process that was killed; up to {:.1f} s recorded "
                                "before it ended were never flushed",
                                name, missing_s),
                    1);
  }
  trace.ranks.push_back(std::move(info));
  trace.RemapRank(kProvisional, rank);
  return {};
}

}  // namespace trainrx::profiler
