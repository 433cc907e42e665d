#include "journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "trainrx/profiler/env.h"
#include "trainrx/profiler/kineto_writer.h"

namespace trainrx::probes {

std::string JournalPath(const std::string& trace_path) { return trace_path + env::kJournalSuffix; }

bool Journal::Open(const std::string& path, Collector& collector, int32_t rank, int64_t base_ns, int64_t interval_ms,
                   std::string* error) {
  path_ = path;
  rank_ = rank;
  base_ns_ = base_ns;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    *error = path + ": " + std::strerror(errno);
    return false;
  }
  profiler::Trace header;
  profiler::RankInfo info;
  info.rank = rank;
  info.base_time_ns = base_ns;
  for (const auto& [k, v] : collector.StaticConfig()) info.config[k] = v;
  info.config["journal_flush_ms"] = std::to_string(interval_ms);
  header.ranks.push_back(std::move(info));
  writer_.BeginObject();
  profiler::WriteKinetoHeader(writer_, header, rank);
  // Before the events (our final traces write it after them): a cut-off journal keeps it.
  writer_.Field("baseTimeNanoseconds", base_ns);
  writer_.Key("traceEvents");
  writer_.BeginArray();
  return WriteOut(error);
}

bool Journal::Flush(Collector& collector, int64_t now_ns, std::string* error) {
  if (fd_ < 0) return true;
  const int64_t t0 = NowNs();
  profiler::Trace fragment;
  profiler::RankInfo info;
  info.rank = rank_;
  fragment.ranks.push_back(info);
  collector.Drain(fragment, rank_, cursor_);
  ++stats_.flushes;
  stats_.events += fragment.events.size();
  const uint32_t main = fragment.GetOrAddTrack(rank_, profiler::TrackKind::kCpuThread, getpid(), getpid());
  fragment.counters.push_back({main, fragment.strings.Intern("trainrx.journal"), now_ns, static_cast<double>(stats_.flushes)});
  fragment.Finalize(1);  // on this thread (a flush may run on the way out of a crash)
  profiler::WriteKinetoEvents(writer_, fragment, rank_, base_ns_);
  const bool ok = WriteOut(error);
  stats_.busy_ns += NowNs() - t0;
  return ok;
}

bool Journal::WriteOut(std::string* error) {
  const std::string bytes = buf_.str();
  buf_.str("");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      *error = path_ + ": " + std::strerror(w < 0 ? errno : EIO);
      ::close(fd_);
      fd_ = -1;
      return false;
    }
    done += static_cast<size_t>(w);
  }
  stats_.bytes += bytes.size();
  return true;
}

void Journal::Remove() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!path_.empty()) ::unlink(path_.c_str());
}

}  // namespace trainrx::probes
