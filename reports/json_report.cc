#include <algorithm>
#include <cmath>

#include "trainrx/profiler/json_writer.h"
#include "trainrx/reports/report.h"
#include "trainrx/sets/analysis_json.h"

namespace trainrx::reports {

using profiler::JsonWriter;
using sets::WriteFinding;
using sets::WriteStepRow;
using sets::WriteUnfinished;
using sets::WriteWindow;

namespace {
void WriteNameRow(JsonWriter& w, const analyzers::NameRow& r, bool self, bool total) {
  w.BeginObject();
  w.Field("name", r.name);
  w.Field("count", r.count);
  if (total) w.Field("total_ns", r.total_ns);
  if (self) w.Field("self_ns", r.self_ns);
  if (total) w.Field("mean_ns", r.mean_ns);
  if (total) w.Field("share", r.share);
  if (self) w.Field("self_share", r.self_share);
  w.EndObject();
}

// metrics.op_table / kernel_table / module_table: the top rows, full names, and the rest in "other"
// (null when nothing was folded).
void WriteNameTable(JsonWriter& w, const char* key, const analyzers::NameTable& t, bool self) {
  w.Object(key, [&] {
    w.Field("basis", t.basis);
    w.Field("basis_ns", t.basis_ns);
    w.Field("steps", t.steps);
    w.Field("names", t.names);
    w.Array("rows", t.rows, [&](const auto& r) { WriteNameRow(w, r, self, /*total=*/true); });
    w.Key("other");
    if (t.other_names > 0) {
      WriteNameRow(w, t.other, self, t.other_has_total);  // ops: no total (it nests across names)
    } else {
      w.Null();
    }
    w.Field("other_names", t.other_names);
  });
}

const char* IssueSeverityName(profiler::IssueSeverity s) {
  switch (s) {
    case profiler::IssueSeverity::kInfo: return "info";
    case profiler::IssueSeverity::kDataLoss: return "data_loss";
    case profiler::IssueSeverity::kError: return "error";
  }
  return "info";
}
// "run": whether every rank's recording ran to its end, and the step windows; "runs": the runs' own
// result documents (`trainrx run`).
void WriteRunJson(JsonWriter& w, const analyzers::Report& report, const RenderOptions& options) {
  // Whether every rank's recording ran to its end (analyzers::UnfinishedRank): read this first.
  w.Object("run", [&] {
    w.Field("finished", report.metrics.unfinished.empty());
    w.Array("unfinished", report.metrics.unfinished, [&](const auto& u) { WriteUnfinished(w, u); });
    // Step windows (record --steps/--skip): which steps each rank's trace holds.
    w.Array("windows", report.metrics.windows, [&](const auto& win) { WriteWindow(w, win); });
    // Records the collector dropped (its cap reached): every figure is about what was kept.
    w.Field("complete", report.metrics.losses.empty());
    w.Array("losses", report.metrics.losses, [&](const auto& l) { sets::WriteLoss(w, l); });
  });
  if (!options.run_results_json.empty()) {
    w.Array("runs", options.run_results_json, [&](const auto& r) { w.Raw(r); });
  }
}

// "ingest": what was read, and each kind of issue met reading it.
void WriteIngestJson(JsonWriter& w, const profiler::Trace& trace) {
  w.Object("ingest", [&] {
    w.Field("events", trace.stats.events_read);
    w.Field("bytes", trace.stats.bytes_read);
    w.Field("skipped_events", trace.stats.TotalSkipped());
    w.Objects("issues", trace.stats.entries, [&](const auto& e) {
      w.Field("kind", e.kind);
      w.Field("severity", IssueSeverityName(e.severity));
      w.Field("count", e.count);
      w.Field("first_seen", e.example);
    });
  });
}

// "ranks": each rank's source, clocks, devices and collector configuration.
void WriteRanksJson(JsonWriter& w, const profiler::Trace& trace) {
  w.Objects("ranks", trace.ranks, [&](const auto& r) {
    w.Field("rank", r.rank);
    w.Field("world_size", r.world_size);
    w.Field("source", r.source);
    w.Field("rank_source", r.rank_source);
    w.Field("job", r.job);
    if (!r.backend.empty()) w.Field("backend", r.backend);
    if (!r.clock_status.empty()) {
      // Clock alignment (analyzers::AlignRankClocks): shift_ns was added to this rank's times.
      w.Object("clock", [&] {
        w.Field("status", r.clock_status);
        w.Field("shift_ns", r.clock_shift_ns);
        w.Field("note", r.clock_note);
      });
    }
    w.Objects("devices", r.devices, [&](const auto& d) {
      w.Field("id", d.id);
      w.Field("name", d.name);
      w.Field("compute_capability", std::to_string(d.compute_major) + "." + std::to_string(d.compute_minor));
    });
  });
}

// "steps": the step rows, the warm-up steps left out, and the rows' declared figures.
void WriteStepsJson(JsonWriter& w, const analyzers::StepModel& steps) {
  w.Object("steps", [&] {
    w.Field("source", steps.source);
    w.Field("count", static_cast<int64_t>(steps.steps.size()));
    w.Field("median_ns", steps.median_wall_ns);
    w.Field("mean_ns", steps.mean_wall_ns);
    w.Key("warmup");  // leading steps over 3x the median, left out of every figure
    w.BeginArray();
    for (const auto& s : steps.warmup_steps) WriteStepRow(w, s, /*phases=*/false);
    w.EndArray();
    if (!steps.warmup_notes.empty()) {  // slow first steps kept: contention, not warm-up (issue 81.9)
      w.Array("warmup_notes", steps.warmup_notes, [&](const auto& n) { w.String(n); });
    }
    w.Array("rows", steps.steps, [&](const auto& s) { WriteStepRow(w, s, /*phases=*/true); });
    // The rows' figures as declared (analyzers::StepFields): the HTML report's step table reads them.
    w.Objects("fields", analyzers::StepFields(), [&](const analyzers::StepField& f) {
      w.Field("name", f.name);
      w.Field("label", f.label);
      w.Field("what", f.what);
    });
  });
}

// metrics.step_breakdown: the phases' shares of the steps.
void WriteStepBreakdownJson(JsonWriter& w, const analyzers::StepModel& steps) {
  w.Object("step_breakdown", [&] {
    w.Field("data_wait", steps.data_wait_share);
    w.Field("forward", steps.forward_share);
    w.Field("backward", steps.backward_share);
    w.Field("optimizer", steps.optimizer_share);
    w.Field("other", steps.other_share);
    w.Field("forward_backward_overlap", steps.fwd_bwd_overlap_share);
    w.Field("untrained_forward", steps.untrained_forward_share);
    w.Field("data_wait_without_worst_steps", steps.data_share_without_worst);
    w.Field("worst_data_steps", static_cast<int64_t>(steps.data_worst_steps.size()));
    if (steps.has_gpu) {
      w.Field("gpu_kernel", steps.gpu_kernel_share);
      w.Field("gpu_memcpy", steps.gpu_memcpy_share);
      w.Field("gpu_idle", steps.gpu_idle_share);
      w.Field("data_wait_gpu_idle", steps.data_exposed_share);
    }
  });
}

// metrics.temporal_breakdown: HTA's GPU time breakdown per rank, idle per stream.
void WriteTemporalJson(JsonWriter& w, const analyzers::Report& report) {
  w.Objects("temporal_breakdown", report.metrics.temporal, [&](const auto& t) {
    w.Field("rank", t.rank);
    w.Field("kernel_time_ns", t.kernel_time_ns);
    w.Field("idle_ns", t.idle_ns);
    w.Field("compute_ns", t.compute_ns);
    w.Field("non_compute_ns", t.non_compute_ns);
    w.Field("idle_pct", t.idle_pct);
    w.Field("compute_pct", t.compute_pct);
    w.Field("non_compute_pct", t.non_compute_pct);
    w.Field("comm_ns", t.comm_ns);
    w.Field("comm_overlap_ns", t.comm_overlap_ns);
    w.Field("comm_overlap_pct", t.comm_overlap_pct);  // null without communication kernels (HTA: NaN)
    w.Field("window", t.window);
    w.Objects("idle_by_stream", t.streams, [&](const auto& s) {
      w.Field("device", s.device);
      w.Field("stream", s.stream);
      w.Field("host_wait_ns", s.host_wait_ns);
      w.Field("kernel_wait_ns", s.kernel_wait_ns);
      w.Field("other_ns", s.other_ns);
    });
    const analyzers::IdleCauses& c = t.idle_causes;
    w.Object("idle_causes", [&] {
      w.Field("host_starved_ns", c.host_starved_ns);
      w.Field("allocator_ns", c.allocator_ns);
      w.Field("queued_ns", c.queued_ns);
      w.Field("graph_nodes_ns", c.graph_ns);
      w.Objects("queued_by_stream", c.queued_by_stream, [&](const auto& q) {
        w.Field("stream", q.stream);
        w.Field("ns", q.ns);
        w.Field("gaps", q.gaps);
        w.Field("after_stream", q.after_stream);
      });
    });
  });
}

// metrics.what_if: several fixes replayed together (analyzers::WhatIf).
// metrics.cpu_load: per rank whose recording sampled it (issue 60.5), what its steady steps got of
// the CPUs: its threads' run and wait time, other programs' CPU time (-1: unknown), over wall_ns.
void WriteCpuLoadJson(JsonWriter& w, const analyzers::Report& report) {
  w.Key("cpu_load");
  w.BeginArray();
  for (const auto& c : report.metrics.cpu_load) {
    const auto& l = c.load;
    w.BeginObject();
    w.Field("rank", c.rank);
    w.Field("steps", c.steps);
    w.Field("span_covered", c.span_covered, 4);
    w.Field("wall_ns", l.wall_ns, 15);
    w.Field("run_ns", l.run_ns, 15);
    w.Field("wait_ns", l.wait_ns, 15);
    w.Field("wait_share", l.WaitShare(), 6);
    w.Field("waiting_threads", l.WaitingThreads(), 6);
    w.Field("own_cpus", l.OwnCpus(), 6);
    w.Field("other_cpus", l.OtherCpus(), 6);
    w.Field("children_ns", l.children_ns, 15);
    w.Field("involuntary_switches", l.involuntary, 15);
    w.Field("cpus", l.cpus, 4);
    w.EndObject();
  }
  w.EndArray();
}

void WriteWhatIfJson(JsonWriter& w, const analyzers::Report& report) {
  w.Objects("what_if", report.metrics.what_if, [&](const auto& x) {
    w.Field("rank", x.rank);
    w.Field("label", x.label);
    w.Array("transforms", x.transforms, [&](const auto& n) { w.String(n); });
    sets::WritePredictionFields(w, x.prediction);
  });
}

// metrics.critical_path: per rank, the mean step's path by class, its largest items, and the median
// step's segments (analyzers::CriticalPath).
void WriteCriticalPathJson(JsonWriter& w, const analyzers::Report& report) {
  w.Objects("critical_path", report.metrics.critical_paths, [&](const auto& p) {
    w.Field("rank", p.rank);
    w.Field("steps", p.steps);
    w.Field("mean_ns", p.mean_ns);
    if (p.device_pace_ns > 0) {
      w.Field("device_pace_ns", p.device_pace_ns);
      w.Field("host_pace_ns", p.host_pace_ns);
      w.Field("steps_behind", p.steps_behind);
      w.Field("steps_compared", p.steps_compared);
      w.Field("device_behind", p.DeviceBehind());
    }
    w.Field("sync_records", p.sync_records);
    w.Field("linked", p.linked);
    w.Field("note", p.note);
    w.Object("class_ns", [&] {
      for (int k = 0; k < analyzers::kPathClasses; ++k)
        w.Field(analyzers::PathClassName(static_cast<analyzers::PathClass>(k)), p.class_ns[k]);
    });
    w.Objects("top", p.top, [&](const auto& item) {
      w.Field("class", analyzers::PathClassName(item.cls));
      w.Field("what", item.what);
      w.Field("ns", item.ns);
    });
    w.Objects("segments", p.segments, [&](const auto& s) {
      w.Field("start_ns", s.start_ns);
      w.Field("end_ns", s.end_ns);
      w.Field("class", analyzers::PathClassName(s.cls));
      w.Field("what", s.what);
      w.Field("slack_ns", s.slack_ns);
    });
  });
}

// metrics.utilization: per rank with costed ops (issue 52): MFU, the peak and its source, and the
// op classes' and top ops' FLOPs, bytes, time and achieved throughput.
void WriteCostRowJson(JsonWriter& w, const analyzers::OpCostRow& r, bool op) {
  w.BeginObject();
  if (op) w.Field("name", r.name);
  w.Field("class", r.op_class);
  if (op) w.Field("dtype", r.dtype);
  w.Field("calls", r.calls, 6);
  w.Field("flops", r.flops, 15);
  w.Field("bytes", r.bytes, 15);
  w.Field("time_ns", r.time_ns, 15);
  w.Field("tflops", r.tflops, 6);
  w.Field("gbps", r.gbps, 6);
  w.Field("intensity", r.intensity, 6);
  w.Field("bound", r.bound);
  w.EndObject();
}
void WriteUtilizationJson(JsonWriter& w, const analyzers::Report& report) {
  w.Objects("utilization", report.metrics.utilization, [&](const auto& u) {
    w.Field("rank", u.rank);
    w.Field("device", u.device);
    w.Field("time_from", u.device_time ? "kernels" : "cpu_ops");
    w.Field("dtype", u.dtype);
    w.Field("peak_tflops", u.peak_tflops, 6);
    w.Field("peak_gbps", u.peak_gbps, 6);
    w.Field("peak_source", u.peak_source);
    w.Field("steps", u.steps);
    w.Field("steps_costed", u.steps_costed);
    w.Field("model_flops", u.model_flops, 15);
    w.Field("other_flops", u.other_flops, 15);
    w.Field("recompute_flops", u.recompute_flops, 15);
    w.Field("bytes", u.bytes, 15);
    w.Field("params", u.params, 15);
    w.Field("tokens", u.tokens, 15);
    w.Field("six_n_tokens", u.six_n_tokens, 15);
    w.Field("step_ns", u.step_ns, 15);
    w.Field("achieved_tflops", u.achieved_tflops, 6);
    w.Field("mfu", u.mfu, 6);
    w.Field("mfu_lower_bound", u.mfu_lower_bound);
    w.Field("hfu", u.hfu, 6);
    w.Field("costed_ns", u.costed_ns, 15);
    w.Field("total_ns", u.total_ns, 15);
    w.Field("covered_share", u.covered_share, 6);
    w.Field("note", u.note);
    w.Array("classes", u.classes, [&](const auto& c) { WriteCostRowJson(w, c, false); });
    w.Array("ops", u.ops, [&](const auto& o) { WriteCostRowJson(w, o, true); });
  });
}

// metrics.launch_stats: per rank.
void WriteLaunchStatsJson(JsonWriter& w, const analyzers::Report& report) {
  w.Objects("launch_stats", report.metrics.launch, [&](const auto& l) {
    w.Field("rank", l.rank);
    w.Field("kernels", l.kernels);
    w.Field("mean_launch_us", l.mean_cpu_us);
    w.Field("mean_kernel_us", l.mean_gpu_us);
    w.Field("mean_launch_delay_us", l.mean_delay_us);
    w.Field("short_kernels", l.short_kernels);
    w.Field("long_launches", l.long_launches);
    w.Field("long_delays", l.long_delays);
  });
}

// metrics.memory: one entry per (rank, device) with allocator samples.
void WriteMemoryJson(JsonWriter& w, const analyzers::Report& report) {
  w.Key("memory");  // one entry per (rank, device) with allocator samples (docs/json-schema.md)
  w.BeginArray();
  for (const auto& m : report.metrics.memory) {
    w.BeginObject();
    w.Field("rank", m.rank);
    w.Field("device", m.device);
    w.Field("samples", m.samples);
    w.Field("peak_allocated_bytes", m.peak_allocated);
    w.Field("peak_reserved_bytes", m.peak_reserved);
    w.Field("capacity_bytes", m.capacity);
    w.Field("median_step_peak_bytes", m.median_step_peak);
    w.Field("growth_bytes_per_step", static_cast<int64_t>(std::llround(m.growth_per_step)));
    w.Field("growth_steps", m.growth_steps);
    w.Field("increasing_steps", m.increases);
    w.Field("oom_events", m.oom_events);
    w.Field("oom_request_bytes", m.oom_request_bytes);
    w.Field("oom_op", m.oom_op);
    w.Field("oom_ts_ns", m.oom_ts_ns);
    w.Field("capacity_source", m.capacity_source);
    w.Field("allocated_at_peak_reserved_bytes", m.allocated_at_peak_reserved);
    w.Field("release_steps", m.release_steps);
    w.Field("released_bytes_per_step", static_cast<int64_t>(std::llround(m.released_bytes_per_step)));
    w.Field("samples_per_step", m.samples_per_step);
    w.Field("micro_steps", static_cast<int64_t>(m.micro_steps));
    w.Field("bytes_per_sample", static_cast<int64_t>(std::llround(m.bytes_per_sample)));
    w.Field("fits_samples", m.fits_samples);
    w.Field("median_step_samples", m.median_step_samples);
    w.Field("alloc_retries", m.alloc_retries);
    for (const auto& [key, list] : {std::pair{"step_start_bytes", &m.step_start}, std::pair{"step_peak_bytes", &m.step_peak}}) {
      w.Key(key);
      w.BeginArray();
      for (int64_t v : *list) w.Int(v);
      w.EndArray();
    }
    w.EndObject();
  }
  w.EndArray();
}

// metrics.compile: one entry per rank with torch.compile in its trace.
void WriteCompileJson(JsonWriter& w, const analyzers::Report& report) {
  w.Objects("compile", report.metrics.compile, [&](const auto& c) {
    w.Field("rank", c.rank);
    w.Field("marks", c.marks);
    w.Field("compilations", c.compiles);
    w.Field("compile_ns", c.compile_ns);
    w.Field("compile_in_steps_ns", c.compile_in_steps_ns);
    w.Field("recompiles", c.recompiles);
    w.Field("recompiles_in_steps", c.recompiles_in_steps);
    w.Field("steps_with_regions", c.steps_with_regions);
    w.Field("regions_per_step", c.regions_per_step);
    w.Field("regions_per_call", c.regions_per_call);
    w.Field("eager_between_ns", static_cast<int64_t>(std::llround(c.eager_between_ns)));
    for (const auto& [key, sites] : {std::pair{"graph_breaks", &c.graph_breaks}, std::pair{"recompile_sites", &c.recompile_sites}}) {
      w.Objects(key, *sites, [&](const auto& s) {
        w.Field("where", s.where);
        w.Field("function", s.function);
        w.Field("reason", s.reason);
        w.Field("count", s.count);
      });
    }
  });
}

}  // namespace

void WriteJson(const profiler::Trace& trace, const analyzers::Report& report, const analyzers::Thresholds& thresholds,
               const RenderOptions& options, std::ostream& out) {
  JsonWriter w(out, /*pretty=*/true);
  w.BeginObject();
  w.Field("schema", kJsonSchema);
  w.Array("inputs", options.inputs, [&](const auto& in) { w.String(in); });
  WriteRunJson(w, report, options);

  WriteIngestJson(w, trace);

  WriteRanksJson(w, trace);

  const auto& steps = report.metrics.steps;
  WriteStepsJson(w, steps);

  w.Object("metrics", [&] {
    WriteStepBreakdownJson(w, steps);
    WriteTemporalJson(w, report);
    WriteCriticalPathJson(w, report);
    WriteWhatIfJson(w, report);
    WriteUtilizationJson(w, report);
    WriteCpuLoadJson(w, report);
    WriteLaunchStatsJson(w, report);
    WriteNameTable(w, "op_table", report.metrics.op_table, /*self=*/true);
    WriteNameTable(w, "kernel_table", report.metrics.kernel_table, /*self=*/false);
    WriteNameTable(w, "module_table", report.metrics.module_table, /*self=*/true);
    WriteMemoryJson(w, report);
    WriteCompileJson(w, report);
  });

  w.Array("findings", report.findings, [&](const auto& f) { WriteFinding(w, f); });

  w.Object("thresholds", [&] {
    for (const auto& [k, v] : thresholds.all()) w.Field(k, v.first);
  });
  w.EndObject();
  out << '\n';
}

}  // namespace trainrx::reports
