// Clock alignment of the ranks of a multi-rank set.
//
// Ranks on different hosts stamp their events with clocks that differ by up to hundreds of µs
// (NTP), so a merged timeline puts one rank's all-reduce before another's although they ended
// together. A synchronous collective ends at the same moment on every rank (nobody leaves an
// all-reduce before the last rank's data arrived), so the difference of the end times of the same
// collective on two ranks is the difference of their clocks. Per rank, against a reference rank:
// the median difference over the collectives both have (matched by order, collectives.h) is the
// offset; the median deviation from it is its spread. Gloo ranges end when their threads return:
// on one clock their ends are apart by the ranks' wake-up lag, the same every collective (75 µs
// with a spread of 17 µs, two ranks on one busy 2-core machine), an error no spread shows, said in
// a Gloo shift's note.
//
// It is applied only when the data support it. Not shifted, each with the reason in the report:
// - ranks on one host (our collector's hostname): one clock, nothing to align;
// - fewer than kMinShared shared collectives;
// - ends that do not coincide (spread above kMaxSpreadNs: Gloo ranges on busy CPUs, traces of
//   different runs, or collectives that do not synchronize);
// - an offset that drifts across the trace (its first and second halves differ by more than
//   the spread allows: clocks running at different rates, which one shift cannot fix);
// - an offset within the spread ("agrees": shifting by noise would only move it).
// HTA and Nsight Systems do not align ranks; Nsight Systems takes the host clocks as they are.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "collectives.h"
#include "trainrx/analyzers/cross_rank.h"

namespace trainrx::analyzers {
namespace {

constexpr size_t kMinShared = 5;
constexpr int64_t kMaxSpreadNs = 50'000;  // 50 µs: NCCL kernels end within a few µs of each other
constexpr int64_t kMinOffsetNs = 20'000;  // below this (or 3x the spread) the clocks agree

int64_t MedianOf(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  return v[mid];
}

// The median deviation of `v` from `center`.
int64_t SpreadOf(const std::vector<int64_t>& v, int64_t center) {
  std::vector<int64_t> dev;
  dev.reserve(v.size());
  for (int64_t d : v) dev.push_back(std::llabs(d - center));
  return MedianOf(std::move(dev));
}

std::string HostOf(const profiler::RankInfo& info) {
  auto it = info.config.find("hostname");
  return it == info.config.end() ? "" : it->second.json();  // JSON text: compared as it is
}

std::string Us(int64_t ns) { return fmt::format("{:.1f} µs", static_cast<double>(ns) / 1e3); }

}  // namespace

std::vector<RankClock> EstimateRankClocks(const profiler::Trace& trace) {
  if (trace.RankIds().size() < 2) return {};  // one clock: nothing to align (and no rank's collectives to scan)
  return EstimateRankClocks(BuildRankSides(trace, nullptr, {}, {}));
}

namespace {
// The reference clock: the first side (the lowest rank) with collectives, else the first.
const RankSide* ReferenceSide(const std::vector<RankSide>& sides) {
  for (const auto& s : sides)
    if (!s.gpu.empty() || !s.gloo.empty()) return &s;
  return &sides.front();
}
}  // namespace

std::vector<RankClock> EstimateRankClocks(const std::vector<RankSide>& sides) {
  std::vector<RankClock> out;
  if (sides.size() < 2) return out;
  const RankSide* ref_side = ReferenceSide(sides);
  const int32_t ref = ref_side->info.rank;
  const std::string ref_host = HostOf(ref_side->info);
  for (const auto& side : sides) {
    const int32_t r = side.info.rank;
    RankClock c;
    c.rank = r;
    c.reference = ref;
    if (&side == ref_side) {
      c.status = "reference";
      c.why = "the other ranks' times are put on this rank's clock";
      out.push_back(std::move(c));
      continue;
    }
    // The kind both have: GPU collectives when both have some, else Gloo's.
    const bool use_gpu = !side.gpu.empty() && !ref_side->gpu.empty();
    const std::vector<MatchedSet> sets =
        use_gpu ? MatchAcrossRanks({&ref_side->gpu, &side.gpu}, false) : MatchAcrossRanks({&ref_side->gloo, &side.gloo}, false);
    c.matched = static_cast<int64_t>(sets.size());
    std::vector<int64_t> deltas;
    deltas.reserve(sets.size());
    for (const auto& s : sets) deltas.push_back(s[1]->end_ns() - s[0]->end_ns());
    c.offset_ns = MedianOf(deltas);
    c.spread_ns = SpreadOf(deltas, c.offset_ns);
    const char* kind = use_gpu ? "GPU communication kernels" : "Gloo collectives";
    const std::string host = HostOf(side.info);
    if (!host.empty() && host == ref_host) {
      c.status = "same host";
      c.why = fmt::format("on the same host as rank {} ({}): one clock, not shifted", ref, host);
      if (sets.size() >= kMinShared)
        c.why += fmt::format(" (their shared collectives end {} apart, median)", Us(c.offset_ns));
    } else if (sets.size() < kMinShared) {
      c.status = "not aligned";
      c.why = fmt::format("not shifted: only {} {} shared with rank {} ({} needed to set a clock)", sets.size(), kind, ref,
                          kMinShared);
    } else if (c.spread_ns > kMaxSpreadNs) {
      c.status = "not aligned";
      c.why = fmt::format("not shifted: the ends of its {} {} shared with rank {} do not coincide (they scatter by {} "
                          "around the best offset, {}; more than {} allowed)",
                          sets.size(), kind, ref, Us(c.spread_ns), Us(c.offset_ns), Us(kMaxSpreadNs));
    } else {
      // Drift: the halves' offsets differ by more than their own scatter allows (a drift's
      // spread about one median grows with the trace; about each half's, it is half as large).
      const size_t half = deltas.size() / 2;
      const std::vector<int64_t> a(deltas.begin(), deltas.begin() + static_cast<std::ptrdiff_t>(half));
      const std::vector<int64_t> b(deltas.begin() + static_cast<std::ptrdiff_t>(half), deltas.end());
      const int64_t first = MedianOf(a), second = MedianOf(b);
      const int64_t drift_allowed = std::max<int64_t>(3 * std::max(SpreadOf(a, first), SpreadOf(b, second)), kMinOffsetNs);
      if (std::llabs(second - first) > drift_allowed) {
        c.status = "not aligned";
        c.why = fmt::format("not shifted: its offset to rank {} moves from {} to {} between the first and second half of "
                            "the trace (clocks running at different rates: one shift would be wrong somewhere)",
                            ref, Us(first), Us(second));
      } else if (std::llabs(c.offset_ns) <= std::max<int64_t>(3 * c.spread_ns, kMinOffsetNs)) {
        c.status = "agrees";
        c.why = fmt::format("its clock agrees with rank {}'s: {} {} end {} apart (median; spread {}), not shifted", ref,
                            sets.size(), kind, Us(c.offset_ns), Us(c.spread_ns));
      } else {
        c.status = "shifted";
        c.shift_ns = -c.offset_ns;
        c.why = fmt::format("its clock runs {} {} rank {}'s: shifted by {} so that its {} {} end with rank {}'s "
                            "(spread after the shift {}){}",
                            Us(std::llabs(c.offset_ns)), c.offset_ns > 0 ? "ahead of" : "behind", ref, Us(c.shift_ns),
                            sets.size(), kind, ref, Us(c.spread_ns),
                            use_gpu ? "" : "; Gloo ranges end when their threads return, so the shift is off by the ranks' "
                                           "wake-up lag, which no spread shows: tens of µs on a busy host (75 µs seen "
                                           "with two ranks on one 2-core machine)");
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

void RankClock::RecordIn(profiler::RankInfo& info) const {
  info.clock_shift_ns = shift_ns;
  info.clock_status = status;
  info.clock_note = why;
}

std::vector<RankClock> AlignRankClocks(profiler::Trace& trace) {
  std::vector<RankClock> clocks = EstimateRankClocks(trace);
  for (const auto& c : clocks) {
    if (c.shift_ns != 0) trace.ShiftRankTime(c.rank, c.shift_ns);
    if (profiler::RankInfo* info = trace.FindRankMutable(c.rank)) c.RecordIn(*info);
  }
  return clocks;
}

}  // namespace trainrx::analyzers
