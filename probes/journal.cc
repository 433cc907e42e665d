#include "journal.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "trainrx/profiler/env.h"
#include "trainrx/profiler/journal_format.h"
#include "trainrx/profiler/thread_counters.h"

namespace trainrx::probes {

namespace {
// glibc's malloc raises its mmap threshold, for the whole process, to the size of any mmapped block
// freed below 32 MB (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit; its "dynamic threshold"), and the heap's
// trim threshold to twice that. The flusher's two arrays that grow with a drain (the fragment's
// events, the frame's bytes) used to double as drains grew, each doubling freeing the old block:
// once one was larger than any block the program itself had freed, the program's tensors of that
// size stopped costing fresh pages. nanoGPT on the CPU (AdamW over 10.7 M parameters, 2.4 MB
// temporaries) ran its optimizer step in 14 ms from step ~70 of a recording, where the unobserved
// run takes 28 ms at every step, and a fix predicted from that trace missed by 6 points (docs/
// record.md). So both are reserved once past that limit (virtual memory: pages are touched only as
// a drain uses them), and given back only when a drain outgrew them (a block freed above 32 MB moves
// no threshold).
constexpr size_t kPastDynamicThreshold = size_t{33} << 20;
constexpr size_t kFragmentEvents = kPastDynamicThreshold / sizeof(profiler::Event);

using profiler::ThreadCpuNs;
}  // namespace

std::string JournalPath(const std::string& trace_path) { return trace_path + env::kJournalSuffix; }

Status Journal::Open(const std::string& path, Collector& collector, int32_t rank, int64_t base_ns,
                     int64_t interval_ms) {
  path_ = path;
  rank_ = rank;
  base_ns_ = base_ns;
  last_flush_ns_ = NowNs();
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) return Status::Error(path + ": " + std::strerror(errno));
  auto config = collector.StaticConfig();
  config.emplace_back("journal_flush_ms", std::to_string(interval_ms));
  buf_.clear();
  if (buf_.capacity() < kPastDynamicThreshold) buf_.reserve(kPastDynamicThreshold);
  ResetFragment();
  profiler::EncodeJournalHeader(rank, base_ns, config, &buf_);
  Status written = WriteOut();
  collector.SetJournalBytes(HeldBytes());  // the reservations are malloc's (mmapped) from here on
  return written;
}

void Journal::ResetFragment() {
  fragment_ = profiler::Trace();
  fragment_.events.reserve(kFragmentEvents);
  profiler::RankInfo info;
  info.rank = rank_;
  fragment_.ranks.push_back(info);
  empty_ = fragment_.Mark();
}

Status Journal::Flush(Collector& collector, int64_t now_ns) {
  if (fd_ < 0) return {};
  const int64_t t0 = NowNs(), cpu0 = ThreadCpuNs();
  stats_.max_gap_ns = std::max(stats_.max_gap_ns, now_ns - last_flush_ns_);
  last_flush_ns_ = now_ns;
  // One fragment, emptied and refilled at each flush: its arrays keep their capacity, so a flush
  // does not fault in fresh pages for its events (a third of its cost when it did), unless a
  // long period left them larger than their reservation (kPastDynamicThreshold).
  if (fragment_.ranks.empty() || fragment_.events.capacity() > kFragmentEvents) ResetFragment();
  fragment_.RollBack(empty_);
  fragment_.ranks[0].devices.clear();
  profiler::Trace& fragment = fragment_;
  // While the flush builds its fragment and frame, a heap sample would see them before
  // SetJournalBytes counts them (+511 kB in one step of a minGPT recording, issue 49.5): the step
  // boundaries skip their heap sample until the flush has said what it holds.
  collector.SetFlushing(true);
  collector.Drain(fragment, rank_, cursor_);
  ++stats_.flushes;
  stats_.events += fragment.events.size();
  const uint32_t main = fragment.GetOrAddTrack(rank_, profiler::TrackKind::kCpuThread, getpid(), getpid());
  fragment.counters.push_back({main, fragment.strings.Intern("trainrx.journal"), now_ns, static_cast<double>(stats_.flushes)});
  // Not finalized: the reader sorts once, when a journal is salvaged.
  buf_.clear();
  profiler::AppendJournalFrame(fragment, now_ns, stats_.flushes, &buf_);
  collector.SetJournalBytes(HeldBytes());  // the flush's high-water mark: fragment and frame
  Status written = WriteOut();
  collector.SetJournalBytes(HeldBytes());
  collector.SetFlushing(false);
  const int64_t t1 = NowNs();
  stats_.busy_ns += t1 - t0;
  stats_.cpu_ns += ThreadCpuNs() - cpu0;
  if (stats_.spans.size() < Stats::kMaxSpans) {
    try {
      stats_.spans.emplace_back(t0, t1);
    } catch (...) {  // no memory for one more: the trace shows fewer spans, nothing else changes
    }
  }
  return written;
}

uint64_t Journal::HeldBytes() const {
  const auto bytes = [](const auto& v) { return static_cast<uint64_t>(v.capacity() * sizeof(v[0])); };
  uint64_t n = buf_.capacity() + bytes(fragment_.events) + bytes(fragment_.tracks) + bytes(fragment_.memcpys) +
               bytes(fragment_.op_inputs) + bytes(fragment_.counters) + bytes(fragment_.flows);
  for (const auto& b : cursor_.buffers) n += bytes(b.open) + bytes(b.names) + bytes(b.inputs) + bytes(b.pending_edges);
  // The fragment's interned names: each a string, its view and an index node (an estimate: the
  // table keeps no byte count).
  n += fragment_.strings.size() * (sizeof(std::string) + sizeof(std::string_view) + 64);
  return n;
}

Status Journal::WriteOut() {
  // One write per frame (a kill can cut only the last one, which the reader detects).
  size_t done = 0;
  while (done < buf_.size()) {
    const ssize_t w = ::write(fd_, buf_.data() + done, buf_.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int e = w < 0 ? errno : EIO;
      ::close(fd_);
      fd_ = -1;
      return Status::Error(path_ + ": " + std::strerror(e));
    }
    done += static_cast<size_t>(w);
  }
  stats_.bytes += buf_.size();
  // A drain past the reservation (a long first period) leaves a bigger buffer: give it back (a block
  // above 32 MB) and reserve again, rather than hold it.
  if (buf_.capacity() > kPastDynamicThreshold) {
    std::string().swap(buf_);
    buf_.reserve(kPastDynamicThreshold);
  }
  return {};
}

void Journal::Remove() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!path_.empty()) ::unlink(path_.c_str());
}

}  // namespace trainrx::probes
