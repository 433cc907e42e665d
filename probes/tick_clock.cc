#include "tick_clock.h"

#include <time.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace trainrx::probes {

int64_t NowNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

TickSource DetectTickSource() noexcept {
#if defined(__x86_64__)
  char name[32] = {};
  if (FILE* f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r")) {
    const size_t n = std::fread(name, 1, sizeof(name) - 1, f);
    std::fclose(f);
    name[n] = '\0';
    if (std::strcmp(name, "tsc\n") == 0 || std::strcmp(name, "tsc") == 0) return TickSource::kTsc;
  }
#endif
  return TickSource::kRealtime;
}

TickMap::Point ReadTickPair(TickSource source) noexcept {
  if (source != TickSource::kTsc) {
    const int64_t ns = NowNs();
    return {ns, ns};
  }
  TickMap::Point best;
  int64_t best_width = INT64_MAX;
  for (int i = 0; i < 5; ++i) {
    const int64_t t0 = ReadTsc();
    const int64_t ns = NowNs();
    const int64_t t1 = ReadTsc();
    if (t1 - t0 < best_width) {
      best_width = t1 - t0;
      best = {t0 + (t1 - t0) / 2, ns};
    }
  }
  return best;
}

TickMap TickMap::Calibrated(TickSource source, int64_t calibrate_ns) noexcept {
  TickMap map(source);
  if (source != TickSource::kTsc) return map;
  map.Add(ReadTickPair(source));
  // Spun on the monotonic clock: a wall clock set back meanwhile must not make this wait for it.
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(calibrate_ns);
  while (std::chrono::steady_clock::now() < until) {
  }
  map.Add(ReadTickPair(source));  // dropped if the wall clock was set back: the caller checks
  return map;
}

void TickMap::Add(Point p) noexcept {
  if (source_ != TickSource::kTsc) return;
  if (!points_.empty() && (p.ticks <= points_.back().ticks || p.ns <= points_.back().ns)) return;
  slope_valid_ = false;  // the last segment may have moved
  try {
    if (points_.size() >= kMaxPoints) points_.back() = p;
    else points_.push_back(p);
  } catch (...) {
  }
}

namespace {
// std::llround's rounding (half away from zero) without its libm call: a drain converts two times
// a record (issue 34.13: ToNs and llround were a fifth of the journal's CPU).
int64_t RoundHalfAway(double x) noexcept {
  const int64_t t = static_cast<int64_t>(x);
  const double f = x - static_cast<double>(t);
  return t + (f >= 0.5) - (f <= -0.5);
}
}  // namespace

int64_t TickMap::ToNs(int64_t ticks) const noexcept {
  if (source_ != TickSource::kTsc || points_.size() < 2) return ticks;
  const Point& first = points_.front();
  const Point& last = points_.back();
  if (ticks < first.ticks || ticks >= last.ticks) {
    const double span = static_cast<double>(last.ns - first.ns) / static_cast<double>(last.ticks - first.ticks);
    const Point& from = ticks < first.ticks ? first : last;
    return from.ns + RoundHalfAway(static_cast<double>(ticks - from.ticks) * span);
  }
  // points_[hint_].ticks <= ticks < points_[hint_ + 1].ticks
  size_t i = hint_ < points_.size() - 1 ? hint_ : 0;
  while (ticks < points_[i].ticks) --i;
  while (ticks >= points_[i + 1].ticks) ++i;
  const Point& a = points_[i];
  if (i != hint_ || !slope_valid_) {  // the segment's slope, divided once per segment, not per call
    const Point& b = points_[i + 1];
    hint_ = i;
    slope_ = static_cast<double>(b.ns - a.ns) / static_cast<double>(b.ticks - a.ticks);
    slope_valid_ = true;
  }
  return a.ns + RoundHalfAway(static_cast<double>(ticks - a.ticks) * slope_);
}

}  // namespace trainrx::probes
