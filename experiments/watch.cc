#include "trainrx/experiments/watch.h"

#include <unistd.h>

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace trainrx::experiments {
namespace {

namespace fs = std::filesystem;

// "rank3.prom" -> 3; "trace-rank12.json" -> 12 (after `prefix`); -1 otherwise.
int RankOf(const std::string& name, std::string_view prefix) {
  if (name.rfind(prefix, 0) != 0) return -1;
  size_t i = prefix.size(), j = i;
  while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
  return j == i ? -1 : std::atoi(name.substr(i, j - i).c_str());
}

// The ranks that write metrics in `dir` (one file each).
std::vector<int> MetricRanks(const fs::path& dir) {
  std::vector<int> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir / "metrics", ec))
    if (const int r = RankOf(e.path().filename().string(), "rank"); r >= 0 && e.path().extension() == ".prom") out.push_back(r);
  std::sort(out.begin(), out.end());
  return out;
}

// A sample's value in Prometheus text ("name{labels} value"), -1 when absent.
double Sample(const std::string& text, std::string_view name) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name, 0) != 0 || line.size() <= name.size() || (line[name.size()] != '{' && line[name.size()] != ' '))
      continue;
    const size_t space = line.rfind(' ');
    if (space != std::string::npos) return std::atof(line.c_str() + space + 1);
  }
  return -1;
}

// One thread of a faulthandler dump: its frames, most recent first ("File \"f\", line N in fn").
struct Frame {
  std::string file, function;
  int line = 0;
};
std::vector<std::vector<Frame>> Threads(const std::string& dump) {
  std::vector<std::vector<Frame>> out;
  std::istringstream in(dump);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Thread ", 0) == 0 || line.rfind("Current thread ", 0) == 0) {
      out.emplace_back();
      continue;
    }
    const size_t file = line.find("File \"");
    if (file == std::string::npos || out.empty()) continue;
    const size_t close = line.find('"', file + 6);
    const size_t at = line.find(", line ", close);
    const size_t in_at = line.find(" in ", at == std::string::npos ? close : at);
    if (close == std::string::npos || at == std::string::npos || in_at == std::string::npos) continue;
    out.back().push_back({line.substr(file + 6, close - file - 6), line.substr(in_at + 4), std::atoi(line.c_str() + at + 7)});
  }
  return out;
}

bool LibraryFile(const std::string& f) {
  return f.find("site-packages/") != std::string::npos || f.find("dist-packages/") != std::string::npos ||
         f.find("/lib/python") != std::string::npos || f.rfind("<frozen", 0) == 0;
}

// The torch.distributed call a thread waits in ("all_reduce"), or "".
std::string Collective(const std::vector<Frame>& frames) {
  static const char* kCollectives[] = {"all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
                                       "reduce_scatter_tensor", "broadcast", "barrier", "monitored_barrier", "reduce",
                                       "all_to_all", "all_to_all_single", "gather", "scatter", "send", "recv",
                                       "isend", "irecv", "wait", "batch_isend_irecv", "broadcast_object_list",
                                       "all_gather_object"};
  for (const Frame& f : frames) {
    if (f.file.find("torch/distributed/") == std::string::npos) continue;
    for (const char* c : kCollectives)
      if (f.function == c) return f.function;
  }
  return "";
}

std::string Where(const Frame& f) { return fmt::format("{}:{} in {}", fs::path(f.file).filename().string(), f.line, f.function); }

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// `text` as `path` whole or not at all: written beside it, then renamed over it (a reader never
// sees half a file: the hook polls the request, Prometheus' textfile collector reads metrics/).
Status WriteWhole(const fs::path& path, std::string_view text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp);
    f << text;
    if (!f) return Status::Error(fmt::format("{}: cannot write", tmp.string()));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status::Error(fmt::format("{}: cannot write ({})", path.string(), ec.message()));
  return Status::Ok();
}

// A process's TRAINRX_WATCH ("" when unset or unreadable).
std::string WatchEnvOf(int64_t pid) {
  const std::string env = FileText(fmt::format("/proc/{}/environ", pid));
  static constexpr std::string_view kKey = "TRAINRX_WATCH=";
  for (size_t at = 0; at < env.size();) {
    const size_t end = std::min(env.find('\0', at), env.size());
    if (std::string_view(env).substr(at, end - at).rfind(kKey, 0) == 0) return env.substr(at + kKey.size(), end - at - kKey.size());
    at = end + 1;
  }
  return "";
}

// Every process's parent, from /proc/N/stat (its fourth field, after the name in parentheses).
std::map<int64_t, int64_t> Parents() {
  std::map<int64_t, int64_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (!AllDigits(name)) continue;
    const std::string stat = FileText(e.path() / "stat");
    const size_t close = stat.rfind(')');
    long long ppid = -1;
    if (close != std::string::npos && std::sscanf(stat.c_str() + close + 1, " %*c %lld", &ppid) == 1)
      out[std::atoll(name.c_str())] = ppid;
  }
  return out;
}

}  // namespace

StatusOr<std::string> WatchedDirOfProcess(int64_t pid) {
  std::error_code ec;
  if (pid <= 0 || !fs::exists(fmt::format("/proc/{}", pid), ec))
    return Status::Error(fmt::format("capture {}: no such process (give the PID of a watched job, its watcher, or the job's folder)", pid));
  if (std::string dir = WatchEnvOf(pid); !dir.empty()) return dir;
  // The watcher, torchrun or a shell: the first watched process below it, breadth first.
  const std::map<int64_t, int64_t> parents = Parents();
  std::vector<int64_t> level{pid};
  while (!level.empty()) {
    std::vector<int64_t> next;
    for (const auto& [child, parent] : parents)
      if (std::find(level.begin(), level.end(), parent) != level.end()) next.push_back(child);
    for (int64_t child : next)
      if (std::string dir = WatchEnvOf(child); !dir.empty()) return dir;
    level = std::move(next);
  }
  std::string name = FileText(fmt::format("/proc/{}/comm", pid));
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return Status::Error(fmt::format("capture {}: process {} ({}) is not a watched job nor above one (no TRAINRX_WATCH in its "
                                   "environment or its children's: start the job with `trainrx watch -o DIR -- ...`)",
                                   pid, pid, name.empty() ? "unreadable" : name));
}

StatusOr<std::string> WatchedJobDir(const std::string& job) {
  std::error_code ec;
  if (AllDigits(job) && !fs::is_directory(job, ec)) return WatchedDirOfProcess(std::atoll(job.c_str()));
  return job;
}

StatusOr<ProcessSpec> PrepareWatch(const WatchOptions& o, const std::string& exe_dir) {
  if (o.command.empty())
    return Status::Error("watch: expected a command after --, e.g. trainrx watch -o runs/job1 -- python3 train.py");
  if (o.dir.empty()) return Status::Error("watch: -o DIR is required (the folder for metrics, captures and hang stacks)");
  if (o.capture_steps < 1) return Status::Error(fmt::format("watch --capture-steps {}: expected 1 or more", o.capture_steps));
  if (!(o.regression_min_pct > 0))
    return Status::Error(fmt::format("watch --regression-min-pct {}: expected more than 0", o.regression_min_pct));
  if (!(o.hang_factor > 1)) return Status::Error(fmt::format("watch --hang-factor {}: expected more than 1 (median steps)", o.hang_factor));
  const std::string hook = exe_dir + "/trainrx_python";
  if (!fs::exists(hook + "/trainrx_hook_watch.py"))
    return Status::Error(fmt::format("{}/trainrx_hook_watch.py: missing (rebuild trainrx)", hook));
  std::error_code ec;
  const fs::path dir = fs::absolute(o.dir, ec);
  fs::create_directories(dir / "metrics", ec);
  if (ec || access(dir.c_str(), W_OK) != 0) return Status::Error(fmt::format("{}: cannot make or write the folder", dir.string()));
  // A folder of an earlier job: its metrics and request would be read as this job's, and its
  // captures' numbers taken again (this job's are numbered after them).
  fs::remove(dir / "capture-request.json", ec);
  for (const auto& e : fs::directory_iterator(dir / "metrics", ec)) fs::remove(e.path(), ec);
  int earlier = 0;
  for (const auto& e : fs::directory_iterator(dir, ec))  // an empty folder holds no capture (made for a mount, say)
    if (std::error_code empty_ec; !fs::is_empty(e.path(), empty_ec))
      earlier = std::max(earlier, RankOf(e.path().filename().string(), "capture-"));
  ProcessSpec p;
  p.argv = o.command;
  p.search_path = true;
  using E = EnvChange;
  p.env = {{"PYTHONPATH", hook, E::kPrepend},
           {"TRAINRX_WATCH", dir.string(), E::kSet},
           {"TRAINRX_WATCH_CAPTURE_STEPS", std::to_string(o.capture_steps), E::kSet},
           {"TRAINRX_WATCH_MAX_CAPTURES", std::to_string(o.max_captures), E::kSet},
           {"TRAINRX_WATCH_FIRST_CAPTURE", std::to_string(earlier + 1), E::kSet},
           {"TRAINRX_WATCH_HANG_FACTOR", fmt::format("{:g}", o.hang_factor), E::kSet},
           {"TRAINRX_WATCH_HANG_MIN_SECONDS", fmt::format("{:g}", o.hang_min_seconds), E::kSet},
           {"TRAINRX_WATCH_REGRESSION", o.regression ? "1" : "0", E::kSet},
           {"TRAINRX_WATCH_MIN_SLOWER_PCT", fmt::format("{:g}", o.regression_min_pct), E::kSet},
           // Light mode: no recorder of ours, nor torch.profiler standing in for it.
           {"TRAINRX_FALLBACK", "0", E::kSet}};
  if (o.metrics_port > 0) p.env.push_back({"TRAINRX_WATCH_METRICS_PORT", std::to_string(o.metrics_port), E::kSet});
  return p;
}

std::vector<Capture> FinishedCaptures(const std::string& dir_text, bool job_ended) {
  const fs::path dir(dir_text);
  const size_t ranks = std::max<size_t>(1, MetricRanks(dir).size());
  std::vector<std::pair<int, Capture>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const int k = RankOf(e.path().filename().string(), "capture-");
    if (k < 0 || !e.is_directory() || fs::exists(e.path() / "report.json", ec)) continue;
    Capture c;
    c.folder = e.path().string();
    std::vector<int> done;
    std::vector<std::string> traces, reasons;
    std::map<int, int64_t> started;  // rank -> the step its capture began at
    for (const auto& f : fs::directory_iterator(e.path(), ec)) {
      const std::string name = f.path().filename().string();
      if (const int r = RankOf(name, ".done-rank"); r >= 0) done.push_back(r);
      if (RankOf(name, "trace-rank") >= 0 && f.path().extension() == ".json") traces.push_back(f.path().string());
      if (const int r = RankOf(name, "reason-rank"); r >= 0 && f.path().extension() == ".json") {
        simdjson::dom::parser parser;
        simdjson::dom::element info;
        if (parser.parse(FileText(f.path())).get(info)) continue;
        std::string_view reason = "?", detail, skipped;
        int64_t from = -1;
        if (info["reason"].get(reason)) reason = "?";
        if (info["detail"].get(detail)) detail = "";
        if (info["from_step"].get(from)) from = -1;
        started[r] = from;
        const bool was_skipped = !info["skipped"].get(skipped);
        reasons.push_back(was_skipped ? fmt::format("{} (skipped on rank {}: {})", reason, r, skipped)
                                      : detail.empty() ? std::string(reason)
                                                       : fmt::format("{}: {}", reason, detail));
      }
    }
    if (done.empty() && (started.empty() || !job_ended)) continue;
    if (done.size() < ranks && !job_ended) continue;
    const auto finished = [&](int r) { return std::find(done.begin(), done.end(), r) != done.end(); };
    for (const auto& t : traces)
      if (finished(RankOf(fs::path(t).filename().string(), "trace-rank"))) c.traces.push_back(t);
    for (const auto& [r, from] : started)
      if (!finished(r))
        c.unfinished += fmt::format("{}rank {}{}", c.unfinished.empty() ? "" : ", ", r,
                                    from >= 0 ? fmt::format(" from step {}", from) : std::string());
    std::sort(c.traces.begin(), c.traces.end());
    std::sort(reasons.begin(), reasons.end());
    reasons.erase(std::unique(reasons.begin(), reasons.end()), reasons.end());
    for (const auto& r : reasons) c.reason += (c.reason.empty() ? "" : "; ") + r;
    found.emplace_back(k, std::move(c));
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Capture> out;
  for (auto& [k, c] : found) out.push_back(std::move(c));
  return out;
}

std::string HangReport(const std::string& dir_text) {
  const fs::path dir(dir_text);
  struct Rank {
    int rank;
    std::string header, collective, where;
  };
  std::vector<Rank> hung;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const int rank = RankOf(name, "hang-rank");
    if (rank < 0) continue;
    const std::string dump = FileText(e.path());
    const auto threads = Threads(dump);
    if (threads.empty()) continue;  // the header alone: armed, not fired
    // The main thread: the one whose outermost frame is the script's <module>; else the first.
    const std::vector<Frame>* main = &threads.front();
    for (const auto& t : threads)
      if (!t.empty() && t.back().function == "<module>") main = &t;
    Rank r{rank, dump.substr(0, dump.find('\n')), Collective(*main), ""};
    const Frame* user = nullptr;
    for (const Frame& f : *main)
      if (!LibraryFile(f.file)) {
        user = &f;
        break;
      }
    if (!main->empty())
      r.where = user != nullptr && user != &main->front() ? fmt::format("{} (innermost: {})", Where(*user), Where(main->front()))
                                                          : Where(main->front());
    hung.push_back(std::move(r));
  }
  if (hung.empty()) return "";
  std::sort(hung.begin(), hung.end(), [](const Rank& a, const Rank& b) { return a.rank < b.rank; });
  std::string out = "trainrx watch: the steps stopped (hang stacks: hang-rank<R>.txt)\n";
  std::map<std::string, std::vector<int>> by_collective;
  std::vector<const Rank*> elsewhere;
  for (const Rank& r : hung) {
    out += fmt::format("  rank {}: {}\n", r.rank,
                       r.collective.empty() ? fmt::format("not in a collective: at {}", r.where)
                                            : fmt::format("waits in torch.distributed.{} at {}", r.collective, r.where));
    if (r.collective.empty()) elsewhere.push_back(&r);
    else by_collective[r.collective].push_back(r.rank);
  }
  // Ranks that wait in a collective wait for those that never reached it: the ranks elsewhere, and
  // the job's ranks with no hang stack (their steps did not stop, or they are not watched).
  const std::vector<int> ranks = MetricRanks(dir);
  for (const auto& [collective, waiting] : by_collective) {
    std::vector<std::string> missing;
    for (const Rank* r : elsewhere) missing.push_back(fmt::format("rank {} (at {})", r->rank, r->where));
    for (int k : ranks)
      if (std::none_of(hung.begin(), hung.end(), [&](const Rank& h) { return h.rank == k; }))
        missing.push_back(fmt::format("rank {} (no hang stack: still stepping, or not watched)", k));
    std::string who;
    for (size_t i = 0; i < waiting.size(); ++i) who += fmt::format("{}{}", i ? ", " : "", waiting[i]);
    out += fmt::format("  {} waiting in {}; not arrived: {}\n", waiting.size() == 1 ? "rank " + who : "ranks " + who,
                       collective, missing.empty() ? std::string("none seen (every rank is in it: a transport stall)") : "");
    for (size_t i = 0; i < missing.size(); ++i) out += fmt::format("    {}\n", missing[i]);
  }
  out += fmt::format("  ({})\n", hung.front().header);
  return out;
}

std::string FindingsMetrics(const std::string& capture_folder, size_t top) {
  const fs::path folder(capture_folder);
  simdjson::dom::parser parser;
  simdjson::dom::element report;
  simdjson::dom::array findings;
  if (parser.parse(FileText(folder / "report.json")).get(report) || report["findings"].get(findings)) return "";
  const std::string capture = folder.filename().string();
  std::string out =
      "# HELP trainrx_capture_finding The last analyzed capture's first findings: the estimated saving, % of the step.\n"
      "# TYPE trainrx_capture_finding gauge\n";
  size_t order = 0;
  for (simdjson::dom::element f : findings) {
    if (++order > top) break;
    std::string_view id = "?", severity = "?";
    double saving = 0;
    if (f["id"].get(id)) id = "?";
    if (f["severity"].get(severity)) severity = "?";
    if (f["estimated_saving_pct"].get(saving)) saving = 0;
    out += fmt::format("trainrx_capture_finding{{capture=\"{}\",order=\"{}\",id=\"{}\",severity=\"{}\"}} {:.6g}\n", capture,
                       order, id, severity, saving);
  }
  out += fmt::format("# HELP trainrx_capture_findings The last analyzed capture's number of findings.\n"
                     "# TYPE trainrx_capture_findings gauge\ntrainrx_capture_findings{{capture=\"{}\"}} {}\n",
                     capture, findings.size());
  return out;
}

Status RequestCapture(const std::string& dir_text, std::optional<int> steps) {
  const fs::path dir(dir_text);
  if (steps && *steps < 1) return Status::Error(fmt::format("capture --steps {}: expected 1 or more", *steps));
  const std::vector<int> ranks = MetricRanks(dir);
  if (ranks.empty())
    return Status::Error(fmt::format("{}: no watched job there (no metrics/rank<R>.prom: start it with `trainrx watch -o {} -- ...`)",
                                     dir.string(), dir.string()));
  // From a step every rank reaches after it sees the request (each looks about once a second): the
  // furthest rank's last step, plus two seconds of its steps (at least 5). One rank: the next steps
  // (it takes a request from the step it sees it at).
  double last = 0, rate = 0;
  for (int r : ranks) {
    const std::string text = FileText(dir / "metrics" / fmt::format("rank{}.prom", r));
    last = std::max(last, Sample(text, "trainrx_step_seconds_count"));
    rate = std::max(rate, Sample(text, "trainrx_steps_per_second"));
  }
  const auto at = static_cast<int64_t>(last + (ranks.size() == 1 ? 5.0 : std::max(5.0, std::ceil(2.0 * rate))));
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  // No steps given: the job's own number (its watcher's --capture-steps), not a second default here.
  const std::string json = fmt::format(R"({{"seq": "cli-{}", "reason": "on demand", "detail": "trainrx capture", "at_step": {}{}}})",
                                       now, at, steps ? fmt::format(", \"steps\": {}", *steps) : std::string());
  return WriteWhole(dir / "capture-request.json", json);
}

Status PublishFindings(const std::string& capture_folder) {
  const std::string metrics = FindingsMetrics(capture_folder);
  if (metrics.empty()) return Status::Ok();
  return WriteWhole(fs::path(capture_folder).parent_path() / "metrics" / "findings.prom", metrics);
}

}  // namespace trainrx::experiments
