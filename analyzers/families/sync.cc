// sync.host_device and sync.blocking_copy.
//
// A host-device sync is counted once per cause: aten::item (or a bare aten::_local_scalar_dense),
// a blocking runtime call (cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize,
// synchronous cudaMemcpy, and their HIP twins: hipMemcpyWithStream, hipStreamSynchronize, ...;
// runtime_names.h), or a device-to-host copy. The op that caused a runtime call is the
// CPU op with the same Kineto "External id".
// One .item() is one sync however the profiler recorded it: only the outermost scalar read of a
// thread counts, whatever is nested in it (aten::item inside aten::item, as a dispatch wrapper
// records it, around aten::_local_scalar_dense), whichever of two reads with the same start the
// sort put first, and a child that integer-µs rounding left at its parent's end (HTA's A100
// rank0.json: item ts 799 dur 1, _local_scalar_dense ts 800 dur 0: 945 calls counted as 1171).
// Issue 12 saw 8 real calls reported as 11, and 57 as 88-100 per rank.
// On a GPU trace, a scalar read that calls no runtime function (no copy, no sync) read a CPU
// tensor: not a sync (counted apart as cpu_tensor_item_calls; HTA's A100 rank0.json has 935 such
// reads on a side thread, once reported as 188 syncs per step).
// Blocked time is the union of the blocking calls' intervals: two threads blocked at once are not
// twice the time.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "families.h"
#include "intervals.h"
#include "links.h"
#include "ops.h"
#include "optimizer_loop.h"
#include "runtime_names.h"
#include "scopes.h"
#include "trainrx/profiler/sort_runs.h"

namespace trainrx::analyzers {
namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::Trace;
using profiler::TrackKind;

constexpr std::string_view kItemCause = "aten::item (.item(), float(t), bool(t), print(t))";
constexpr std::string_view kLocalScalarCause = "aten::_local_scalar_dense";

// A host read of a device scalar: aten::item, or aten::_local_scalar_dense (what item() calls;
// some ops call it directly).
bool IsScalarRead(std::string_view n) { return n == "aten::item" || n == "aten::_local_scalar_dense"; }

// Whether the scalar read [ts, end) belongs to the outermost one [read_start, read_end) on its
// thread: inside it (ends included: a 0 µs child rounded to its parent's end), except a new
// aten::item that starts where a read of non-zero length ended (the next call).
bool IsSameRead(int64_t ts, int64_t end, bool is_item, int64_t read_start, int64_t read_end) {
  if (ts < read_start || end > read_end) return false;
  return !(is_item && ts == read_end && read_end > read_start);
}

// A rank's device-to-host copies.
struct RankCopies {
  int64_t dtoh = 0, dtoh_ns = 0;
};

RankCopies CopiesOf(const Trace& trace, int32_t rank) {
  RankCopies c;
  for (uint32_t ti : TracksOf(trace, rank, TrackKind::kGpuStream)) {
    for (const Event& e : trace.TrackEvents(ti)) {
      if (e.kind != EventKind::kMemcpy || e.aux == profiler::kNoAux) continue;
      if (trace.memcpys[e.aux].copy == profiler::CopyKind::kDtoH) {
        ++c.dtoh;
        c.dtoh_ns += e.dur_ns;
      }
    }
  }
  return c;
}

// What one rank's threads did that syncs: scalar reads, blocking runtime calls and synchronous
// host-to-device copies, in all and per step, with their causes.
struct RankSyncs {
  explicit RankSyncs(size_t steps) : item_in(steps), item_ns_in(steps), runtime_in(steps), blocked_in(steps) {}
  int64_t item = 0, item_ns = 0, runtime_syncs = 0, cpu_reads = 0;
  // Blocking calls inside an optimizer's own work (LBFGS's line search reads the device ~60 times
  // an iteration): torch's, not the user's to move; counted apart, named, not in the per-step count.
  int64_t optimizer_syncs = 0;
  std::map<std::string, int64_t> optimizer_causes;
  int64_t blocking_copies = 0, blocking_copy_bytes = 0;
  std::vector<Interval> blocked, blocking_copy;
  std::map<std::string, int64_t> causes;
  // Per step, so that the rule is judged on the typical step: syncs that only the first steps
  // make (cuDNN's autotuner, lazy initialization) are warm-up, not a per-step habit.
  std::vector<int64_t> item_in, item_ns_in, runtime_in;
  std::vector<std::vector<Interval>> blocked_in;
};

// What ScanThread reads besides the thread's events.
struct SyncScan {
  const AnalysisContext& ctx;
  const StepWindows& in_steps;
  const RankLinks* links;  // the dependency model: a call's CPU op (External id) and its copy (correlation)
  bool have_gpu;
  int64_t min_copy_bytes;
  std::optional<std::vector<Interval>>* backward;  // the rank's backward ranges, made at its first optimizer step
};

// A blocking runtime call inside the steps: counted, its cause named, and a synchronous
// host-to-device copy of min_copy_bytes or more counted as a blocking copy.
void CountBlockingCall(const SyncScan& in, const Event& e, std::string_view name, RankSyncs& s) {
  const Trace& trace = in.ctx.trace;
  ++s.runtime_syncs;
  s.blocked.push_back({e.ts_ns, e.end_ns()});
  if (const int64_t k = in.in_steps.Index(e.ts_ns); k >= 0) {
    ++s.runtime_in[k];
    s.blocked_in[k].push_back({e.ts_ns, e.end_ns()});
  }
  const Event* op = in.links && e.external_id != profiler::kNoId ? in.links->OpByExternalId(e.external_id) : nullptr;
  ++s.causes[fmt::format("{} from {}{}", name, op ? trace.Name(*op) : "(no CPU op)", WhereIn(in.ctx.modules, in.ctx.annotations, e))];
  if (IsSyncMemcpyCall(name) && e.correlation != profiler::kNoId && in.links) {
    const HostCall* call = in.links->CallByCorrelation(e.correlation);
    const DeviceWork* copy = call ? in.links->FirstWorkOf(*call) : nullptr;
    if (copy && copy->e->kind == EventKind::kMemcpy && copy->e->aux != profiler::kNoAux) {
      const auto& m = trace.memcpys[copy->e->aux];
      if (m.copy == profiler::CopyKind::kHtoD && m.bytes >= in.min_copy_bytes) {
        ++s.blocking_copies;
        s.blocking_copy.push_back({e.ts_ns, e.end_ns()});
        s.blocking_copy_bytes += m.bytes;
      }
    }
  }
}

// One CPU thread's scalar reads (the outermost of each, outside backward and the optimizer step,
// inside the steps) and blocking runtime calls, added to `s`.
// The start times of a thread's runtime and driver calls, in order.
std::vector<int64_t> RuntimeCallStarts(const Trace& trace, uint32_t ti) {
  std::vector<int64_t> out;
  for (const Event& e : trace.TrackEvents(ti))
    if (e.kind == EventKind::kCudaRuntime || e.kind == EventKind::kCudaDriver) out.push_back(e.ts_ns);
  return out;
}

// A scalar read of the user's, in the steps: counted with its time, in its step and under `cause`.
void CountRead(const SyncScan& in, const Event& e, const std::string& cause, RankSyncs& s) {
  ++s.item;
  s.item_ns += e.dur_ns;
  if (const int64_t k = in.in_steps.Index(e.ts_ns); k >= 0) {
    ++s.item_in[k];
    s.item_ns_in[k] += e.dur_ns;
  }
  ++s.causes[cause];
}

void ScanThread(const SyncScan& in, uint32_t ti, RankSyncs& s) {
  const Trace& trace = in.ctx.trace;
  // Inside autograd's backward functions an item() is anomaly mode's NaN check, not the
  // user's: debug.anomaly_detection reports those.
  int64_t backward_end = INT64_MIN, optimizer_start = INT64_MIN, optimizer_from = INT64_MIN, optimizer_end = INT64_MIN;
  int64_t read_start = INT64_MIN, read_end = INT64_MIN;  // the outermost scalar read so far
  // On a GPU trace a read of a device tensor calls the runtime (a DtoH copy, a sync); one
  // that calls nothing read a CPU tensor and is no sync.
  const std::vector<int64_t> runtime_calls = in.have_gpu ? RuntimeCallStarts(trace, ti) : std::vector<int64_t>{};
  auto calls_runtime = [&](const Event& e) {
    auto it = std::lower_bound(runtime_calls.begin(), runtime_calls.end(), e.ts_ns);
    return it != runtime_calls.end() && *it <= e.end_ns();
  };
  bool read_counted = false, read_is_item = false;
  std::string read_where;  // where the outermost read ran: " in features.3 (Linear)", ...
  CallSites frames(trace);  // the Python frames open at this point (with_stack traces, the hook's call sites)
  // Inside the optimizer's own work: after its closure's last backward pass, or before it where no
  // user frame encloses the call or the user frame is the line that called optimizer.step.
  const auto in_optimizers_work = [&](const Event& e) {
    return e.ts_ns >= optimizer_start && e.ts_ns < optimizer_end &&
           (e.ts_ns >= optimizer_from || frames.UserSite().empty() || frames.UserSiteStart() < optimizer_start);
  };
  for (const Event& e : trace.TrackEvents(ti)) {
    const std::string_view name = trace.Name(e);
    if (frames.Visit(e) || e.kind == EventKind::kPythonFunction) continue;
    if (StartsWith(name, "autograd::engine::evaluate_function")) backward_end = std::max(backward_end, e.end_ns());
    // Inside the optimizer's step an item() reads the per-parameter step counter, a CPU
    // tensor unless capturable=True (AdamW single-tensor: one per parameter per step): no
    // sync. A real one shows as a blocking runtime call on GPU traces, counted below. A step
    // that runs its closure (Lightning, LBFGS) does its own work after the closure's last
    // backward pass; before it, a read called from the user's code (the closure logging its
    // loss) is the user's, one from the optimizer's own code between the closure's calls
    // (LBFGS's line search: ~60 an iteration) is not.
    if (StartsWith(name, "Optimizer.step#") && e.end_ns() > optimizer_end) {
      if (!*in.backward) *in.backward = BackwardRanges(trace, trace.tracks[ti].rank);
      optimizer_start = e.ts_ns;
      optimizer_from = OwnWorkStart(e, **in.backward);
      optimizer_end = e.end_ns();
    }
    if (e.kind == EventKind::kCpuOp && IsScalarRead(name)) {
      const bool is_item = name == "aten::item";
      if (IsSameRead(e.ts_ns, e.end_ns(), is_item, read_start, read_end)) {
        if (read_counted && is_item && !read_is_item) {     // a tie sorted inner first: name it item()
          --s.causes[std::string(kLocalScalarCause) + read_where];
          ++s.causes[std::string(kItemCause) + read_where];
          read_is_item = true;
        }
        continue;
      }
      read_start = e.ts_ns;
      read_end = e.end_ns();
      read_is_item = is_item;
      read_where = WhereIn(in.ctx.modules, in.ctx.annotations, e);
      if (const std::string_view site = frames.UserSite(); !site.empty()) read_where += fmt::format(" from {}", site);
      else if (const std::string_view lib = frames.LibrarySite(); !lib.empty()) read_where += fmt::format(" from library code {}", lib);
      const bool in_optimizer = in_optimizers_work(e);
      read_counted = e.ts_ns >= backward_end && !in_optimizer && in.in_steps.Contains(e.ts_ns);
      if (read_counted && in.have_gpu && !calls_runtime(e)) {
        ++s.cpu_reads;
        read_counted = false;
      }
      if (read_counted) CountRead(in, e, std::string(is_item ? kItemCause : kLocalScalarCause) + read_where, s);
      continue;
    }
    if (!in.in_steps.Contains(e.ts_ns)) continue;  // per-step counts: only work inside the steps
    if ((e.kind == EventKind::kCudaRuntime || e.kind == EventKind::kCudaDriver) && IsBlockingCall(name)) {
      if (in_optimizers_work(e)) {
        ++s.optimizer_syncs;
        ++s.optimizer_causes[WhereIn(in.ctx.modules, in.ctx.annotations, e)];
      } else {
        CountBlockingCall(in, e, name, s);
      }
    }
  }
}

// sync.host_device: host-device syncs (or, on a CPU-only trace, scalar reads) per step above the
// threshold, judged on the median step with 3 or more steps.
void RuleHostDevice(const AnalysisContext& ctx, int32_t rank, const RankSyncs& s, const RankCopies& copies, bool have_gpu,
                    const StepWindows& in_steps, const StepBasis& basis, int64_t blocked_ns, Report& out) {
  // Distinct sync events: items usually cause the DtoH copy and the runtime sync we also see;
  // count the larger of the host-side and device-side views rather than their sum.
  const int64_t syncs = std::max(s.item, s.runtime_syncs);
  const double mean_per_step = basis.Per(syncs);
  // With 3 or more steps: the median step's count and cost (each step's own max of the two views).
  double per_step = mean_per_step;
  double cost_per_step = basis.Per(have_gpu ? blocked_ns : s.item_ns);
  int64_t steps_with_syncs = 0;
  if (in_steps.size() >= 3) {
    std::vector<int64_t> n(in_steps.size()), cost(in_steps.size());
    std::vector<std::vector<Interval>> blocked_in = s.blocked_in;
    for (size_t k = 0; k < n.size(); ++k) {
      n[k] = std::max(s.item_in[k], s.runtime_in[k]);
      cost[k] = have_gpu ? MergeIntervals(blocked_in[k]) : s.item_ns_in[k];
      steps_with_syncs += n[k] > 0;
    }
    per_step = static_cast<double>(Quantile(n, 0.5));
    cost_per_step = static_cast<double>(Quantile(cost, 0.5));
  }
  if (!(syncs > 0 && per_step >= ctx.thresholds.Get("sync.host_device.per_step"))) return;
  Finding f;
  f.id = "sync.host_device";
  f.rank = rank;
  f.confidence = Confidence::kHigh;
  // On a CPU-only run a scalar read is not a device sync (issue 34: "host-device syncs ... each
  // blocks on a GPU" topped CPU reports where 48 of 49 reads came from indexing a NumPy memmap
  // with 0-d tensors): say what it is and what it costs here; on a GPU each one would block.
  f.severity = have_gpu ? (basis.Per(blocked_ns) > 0.05 * basis.mean_step_ns() ? Severity::kHigh : Severity::kMedium)
               : basis.has_steps() && cost_per_step >= 0.01 * basis.mean_step_ns() ? Severity::kLow
                                                                                  : Severity::kInfo;
  // The main cause: reads in data loading are tensors used as indices or sizes (a NumPy array or
  // memmap indexed with a 0-d tensor calls __index__ -> item()); there the tensors are the host's
  // (a sampler's torch.randint without a device), on a GPU run too (issue 81.5).
  std::vector<std::pair<int64_t, std::string>> ranked;
  for (const auto& [k, v] : s.causes)
    if (v > 0) ranked.push_back({v, k});
  std::sort(ranked.rbegin(), ranked.rend());
  const bool from_loading = !ranked.empty() && (ranked.front().second.find("DataLoader") != std::string::npos ||
                                                ranked.front().second.find("get_batch") != std::string::npos ||
                                                ranked.front().second.find("__getitem__") != std::string::npos);
  f.title = have_gpu       ? fmt::format("{:.1f} host-device syncs {} (rank {})", per_step, basis.unit(), rank)
            : from_loading ? fmt::format("{:.1f} scalar reads (.item()) {} on the host (rank {}), mostly in data loading: "
                                         "indices or sizes read from host tensors, which wait for no device here or "
                                         "on a GPU; each costs its own time",
                                         per_step, basis.unit(), rank)
                           : fmt::format("{:.1f} scalar reads (.item()) {} on the host (rank {}): no sync on a CPU, each "
                                         "would wait for the device on a GPU if its tensor lives there",
                                         per_step, basis.unit(), rank);
  f.measured = per_step;
  f.threshold = ctx.thresholds.Get("sync.host_device.per_step");
  f.measured_unit = std::string("syncs ") + basis.unit();
  f.evidence = {{"item_calls", s.item}, {"blocking_runtime_calls", s.runtime_syncs}, {"blocked_ns", blocked_ns},
                {basis.Key("syncs"), mean_per_step},
                {"dtoh_copies", copies.dtoh}, {"dtoh_copy_ns", copies.dtoh_ns}, {"cpu_tensor_item_calls", s.cpu_reads},
                {"measured_on", have_gpu       ? std::string("GPU trace: blocked time measured")
                                : from_loading ? std::string("CPU-only trace: scalar reads, mostly in data loading (host "
                                                             "tensors there on a GPU run too); the cost is the reads' own time")
                                               : std::string("CPU-only trace: scalar reads, no device to wait for; the "
                                                             "cost is the reads' own time, and each would block on a GPU "
                                                             "where its tensor is the device's")}};
  for (const auto& [n, k] : ranked) f.examples.push_back(fmt::format("{} x {}", n, k));
  for (const auto& [where, n] : s.optimizer_causes)
    f.examples.push_back(fmt::format("not counted: {} more blocking calls{} inside the optimizer's own work (its own reads, "
                                     "not the training loop's to move)", n, where));
  if (s.optimizer_syncs > 0) f.evidence.push_back({"optimizer_own_syncs", s.optimizer_syncs});
  if (in_steps.size() >= 3) {
    f.evidence.push_back({"steps_with_syncs", steps_with_syncs});
    f.evidence.push_back({"steps", static_cast<int64_t>(in_steps.size())});
  }
  const std::string of = in_steps.size() >= 3 ? " of the median step" : "";
  SetSaving(f, basis, cost_per_step, cost_per_step, (have_gpu ? "blocked time" : "item() call time") + of);
  SetFix(f, from_loading ? "loading" : "device_sums");
  out.findings.push_back(std::move(f));
}

// sync.blocking_copy: synchronous host-to-device copies of min_copy_bytes or more.
void RuleBlockingCopy(int32_t rank, const RankSyncs& s, int64_t min_copy_bytes, int64_t blocking_copy_ns,
                      const StepBasis& basis, Report& out) {
  if (s.blocking_copies <= 0) return;
  Finding f;
  f.id = "sync.blocking_copy";
  f.rank = rank;
  f.severity = Severity::kMedium;
  f.confidence = Confidence::kHigh;
  f.title = fmt::format("{} synchronous host-to-device copies of {} bytes or more (rank {})", s.blocking_copies,
                        min_copy_bytes, rank);
  f.measured = basis.Per(s.blocking_copies);
  f.threshold = 0;
  f.measured_unit = std::string("blocking copies ") + basis.unit();
  f.evidence = {{"copies", s.blocking_copies}, {"bytes", s.blocking_copy_bytes}, {"blocked_ns", blocking_copy_ns}};
  SetSaving(f, basis, basis.Per(blocking_copy_ns), basis.Per(blocking_copy_ns), "blocked time of these copies");
  SetFix(f);
  out.findings.push_back(std::move(f));
}

}  // namespace

void AnalyzeSync(const AnalysisContext& ctx, Report& out) {
  const Trace& trace = ctx.trace;
  const int64_t min_copy_bytes = static_cast<int64_t>(ctx.thresholds.Get("sync.blocking_copy.min_bytes"));
  for (int32_t rank : trace.RankIds()) {
    const RankCopies copies = CopiesOf(trace, rank);
    bool have_gpu = false;
    for (const auto& t : trace.tracks) have_gpu = have_gpu || (t.rank == rank && t.kind == TrackKind::kGpuStream);
    const StepWindows in_steps(ctx.steps, rank);
    RankSyncs s(in_steps.size());
    std::optional<std::vector<Interval>> backward;
    const SyncScan scan{ctx, in_steps, ctx.links.Rank(rank), have_gpu, min_copy_bytes, &backward};
    for (uint32_t ti : TracksOf(trace, rank, TrackKind::kCpuThread)) ScanThread(scan, ti, s);
    const int64_t blocked_ns = MergeIntervals(s.blocked), blocking_copy_ns = MergeIntervals(s.blocking_copy);
    const StepBasis basis(ctx.steps, rank);
    RuleHostDevice(ctx, rank, s, copies, have_gpu, in_steps, basis, blocked_ns, out);
    RuleBlockingCopy(rank, s, min_copy_bytes, blocking_copy_ns, basis, out);
  }
}

}  // namespace trainrx::analyzers
