#include "trainrx/analyzers/catalog.h"

#include <fmt/args.h>
#include <fmt/format.h>

#include <stdexcept>
#include <utility>
#include <vector>

namespace trainrx::analyzers {

namespace {

constexpr const char* kFindings = "docs/findings.md";
constexpr const char* kMemory = "docs/memory.md";
constexpr const char* kCompile = "docs/compile.md";
constexpr const char* kNotPython = "Not applicable (torch.compile is Python).";
// Texts that several variants or findings share.
constexpr const char* kLoaderPython =
    "DataLoader(..., num_workers=N, pin_memory=True, persistent_workers=True, prefetch_factor=2); "
    "pick N on your own script with `trainrx sweep --cmd \"python3 train.py --workers {{workers}}\" --grid "
    "workers=0,2,4` (more is not always faster); `trainrx fix --cmd \"python3 train.py\"` measures workers=2 "
    "applied from outside, unmodified";
constexpr const char* kLoaderCpp =
    "torch::data::make_data_loader(dataset, DataLoaderOptions().workers(N)) and keep the decode/augment work "
    "in the dataset's get() so it runs on the worker threads";
constexpr const char* kStragglerCpp =
    "Give every rank the same work per step and the same resources; move rank-specific work (logging, "
    "checkpoints) off the training step.";
constexpr const char* kSyncCpp =
    "Accumulate on the device and read back with .item<float>() every N steps; avoid .cpu() and "
    "cudaStreamSynchronize in the step.";
constexpr const char* kTf32Cpp =
    "at::globalContext().setAllowTF32CuBLAS(true); at::globalContext().setAllowTF32CuDNN(true); "
    "(or at::globalContext().setFloat32MatmulPrecision(\"high\"))";
constexpr const char* kNoCompileCpp =
    "LibTorch has no torch.compile: fewer, larger ops (fused kernels, a larger batch) or CUDA graphs "
    "(at::cuda::CUDAGraph).";

// The gpu findings.
std::vector<CatalogEntry> GpuEntries() {
  return {
      {"gpu.idle", "gpu",
       "the device waits idle in the steps; each gap is host-starved (nothing launched yet), in an allocator call, or "
       "queued (launched work waiting on another stream, a collective or a graph's order)",
       {{"host",
         "Find what the host does during the gaps: data loading (DataLoader(num_workers>0, pin_memory=True)), "
         "host-device syncs (.item(), .cpu()), or Python overhead (torch.compile / CUDA graphs).",
         "Overlap input with compute (worker threads, pinned buffers, non_blocking copies); remove syncs from the step; "
         "capture the step in a CUDA graph.",
         "", true, "host_free"},
        {"queued",
         "The GPU had work launched and did not run it: it waited on another stream (torch.cuda.Stream.wait_stream, "
         "an event from a side stream or a NCCL stream) or on a collective. Make the waited-for work start earlier or "
         "run beside it: launch side-stream copies and collectives as soon as their inputs exist, split a large "
         "collective so compute can overlap it, and do not make the compute stream wait on a stream whose work "
         "starts late (the streams named above).",
         "The GPU had work launched and did not run it: it waited on another stream's event or a collective. "
         "Record events right after the work they guard, launch side-stream work early, and wait on a stream only "
         "where its result is needed (the streams named above).",
         ""},
        {"allocator",
         "The host was in cudaMalloc/cudaFree (hipMalloc/hipFree) while the GPU idled: see gpu.allocator.",
         "The host was in cudaMalloc/cudaFree (hipMalloc/hipFree) while the GPU idled: see gpu.allocator.", "", true,
         "caching_allocator"}},
       "", "", "", kFindings},
      {"gpu.allocator", "gpu", "device memory allocated or freed through the runtime (cudaMalloc / cudaFree, hipMalloc / hipFree) inside the steps",
       {{"",
         "Keep PyTorch's caching allocator on (unset PYTORCH_NO_CUDA_MEMORY_CACHING), do not call torch.cuda.empty_cache() "
         "in the loop, and lower memory pressure so the allocator stops freeing its cache and retrying "
         "(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, a smaller batch, activation checkpointing); every cudaFree "
         "waits for the whole device.",
         "Use c10's caching allocator (the default; do not set PYTORCH_NO_CUDA_MEMORY_CACHING), allocate buffers once "
         "outside the step and reuse them, and avoid c10::cuda::CUDACachingAllocator::emptyCache() in the loop.",
         ""}},
       "", "", "", kFindings, "caching_allocator"},
      {"gpu.launch_bound", "gpu", "most GPU activities run shorter than their launch call",
       {{"",
         "Give the GPU bigger pieces of work: a larger batch, torch.compile (fusion), or CUDA graphs "
         "(torch.cuda.graphs / mode=\"reduce-overhead\").",
         "Increase the batch, fuse small ops, or capture the step with at::cuda::CUDAGraph.", "batch"}},
       "", "", "", kFindings, "cuda_graphs"},
  };
}

// The dist findings about communication.
std::vector<CatalogEntry> DistEntries() {
  return {
      {"dist.comm_overlap", "dist", "communication runs with no compute beside it (NCCL/RCCL kernels, or Gloo ranges)",
       {{"gpu",
         "Let DDP overlap its all-reduce with backward: DistributedDataParallel(model, bucket_cap_mb=<smaller, "
         "e.g. 10-25>, gradient_as_bucket_view=True, static_graph=True); under gradient accumulation wrap "
         "the micro-steps but the last in `with model.no_sync():`; with FSDP, "
         "backward_prefetch=BackwardPrefetch.BACKWARD_PRE and forward_prefetch=True.",
         "Launch collectives asynchronously (c10d work handles) per gradient bucket as backward produces them, "
         "on a separate stream, and wait only before the optimizer step; all-reduce once per optimizer step.",
         ""},
        {"gloo",
         "Let DDP overlap its all-reduce with backward: DistributedDataParallel(model, bucket_cap_mb=<smaller, "
         "e.g. 1-10, so the first buckets start while backward goes on>, gradient_as_bucket_view=True, "
         "static_graph=True); under gradient accumulation wrap the micro-steps but the last in "
         "`with model.no_sync():`. On GPUs, NCCL instead of Gloo.",
         "Launch the all-reduce of each gradient bucket as soon as backward produced it (c10d work handles), "
         "wait only before the optimizer step, all-reduce once per optimizer step.",
         "bucket_mb"},
        {"gloo_contended",
         "Communicate less often: accumulate gradients over k micro-batches and wrap all but the last in "
         "`with model.no_sync():` (one all-reduce per k), or a larger batch per rank; on one machine, fewer ranks "
         "with more intra-op threads each (torch.set_num_threads) instead of ranks that share its cores. Smaller "
         "buckets do not help here: no core is free for Gloo's threads.",
         "All-reduce once per k micro-batches (accumulate locally), or a larger batch per rank; on one machine, fewer "
         "ranks with more intra-op threads each (at::set_num_threads).",
         ""}},
       "", "", "", kFindings, "comm_overlap"},
      {"dist.data_parallel", "dist", "torch.nn.DataParallel replicates the model over 2+ GPUs at every step",
       {{"",
         "Use DistributedDataParallel, one process per GPU: `torchrun --nproc-per-node=<GPUs> train.py` with "
         "`dist.init_process_group('nccl')`, `model = DDP(model.to(local_rank), device_ids=[local_rank])` and a "
         "DistributedSampler; no replication per step, no GIL shared by the replicas, gradients all-reduced while "
         "backward runs.",
         "One process per GPU with torch::nn::parallel / c10d all-reduce of gradients, instead of "
         "torch::nn::parallel::data_parallel (which replicates the module at every call).",
         ""}},
       "", "", "", kFindings},
      {"dist.no_sync", "dist", "gradient accumulation whose micro-steps before the last launch collectives",
       {{"",
         "Skip the gradient sync on all micro-steps but the last: `ctx = model.no_sync() if (i + 1) % accum != 0 "
         "else contextlib.nullcontext()`, then `with ctx: loss.backward()` (FSDP has no_sync too).",
         "All-reduce the accumulated gradients once, after the last micro-step's backward.", "accum_sync"}},
       "accum_sync", "", "", kFindings},
  };
}

// The dist findings about ranks that differ: the mismatch and the straggler.
std::vector<CatalogEntry> RankEntries() {
  return {
      {"dist.rank_mismatch", "dist", "data-parallel ranks that do not do the same work (step counts, input shapes)",
       {{"steps",
         "Give every rank the same number of batches: DistributedSampler(dataset, drop_last=True) for a map-style "
         "dataset, an IterableDataset that yields equally many batches per rank (drop the remainder), or, for "
         "inputs that are uneven by nature, `with model.join():` around the loop (DDP's Join).",
         "Shard the data so every rank gets the same number of batches (drop the remainder).", ""},
        {"shapes",
         "Give every rank an equal batch: per-rank batch_size = global_batch // world_size with the global batch "
         "divisible by the world size, DistributedSampler(dataset, drop_last=True), and no rank-dependent batch "
         "logic (DataLoader(..., drop_last=True) for a ragged last batch).",
         "Give every rank the same batch size (global batch divisible by the world size; drop the ragged remainder).",
         ""}},
       "batch_skew", "", "", kFindings},
      // dist.straggler's Python fix is "contention" (when the rank's machine has no free core) followed
      // by the variant of the cause its steps show.
      {"dist.straggler", "dist", "the rank the others wait for at their collectives",
       {{"contention",
         "Give each rank cores of its own first (fewer intra-op threads with torch.set_num_threads, fewer ranks per "
         "machine, or ranks pinned to disjoint cores with taskset/numactl); if it is still late: ",
         "", ""},
        {"not_visible",
         "Make rank {rank}'s steps as fast as the others': check its GPU (clocks, thermal throttling, another process) "
         "and its host (CPU load, NUMA)",
         kStragglerCpp,
         ""},
        {"data",
         "Make rank {rank}'s steps as fast as the others': more DataLoader workers or faster storage for it, or "
         "balanced data shards",
         kStragglerCpp,
         ""},
        {"compute",
         "Make rank {rank}'s steps as fast as the others': balance the work per rank (equal batch sizes, sequence "
         "lengths bucketed across ranks, an even model split), and check its device",
         kStragglerCpp,
         ""},
        {"other",
         "Make rank {rank}'s steps as fast as the others': find what else runs on its host (logging, checkpointing on "
         "rank 0 only: move it off the step or to a thread)",
         kStragglerCpp,
         ""}},
       "straggler_ms", "", "", kFindings},
  };
}

// The input findings.
std::vector<CatalogEntry> InputEntries() {
  return {
      {"input.dataloader_bound", "input", "the steps wait for data",
       {{"in_loop",
         kLoaderPython, kLoaderCpp,
         "workers"},
        {"workers_behind",
         "The loader already runs worker processes and the loop still waits for them: more workers help "
         "only where CPUs are free beside the training threads, and on a machine with few CPUs fewer "
         "workers (or num_workers=0 for cheap samples: each batch costs a crossing between processes) can "
         "be faster; measure N with `trainrx sweep --cmd \"python3 train.py --workers {{workers}}\" --grid "
         "workers=0,1,2,4`, and make each sample cheaper (decode once and cache; persistent_workers=True, "
         "prefetch_factor=4)",
         "Raise DataLoaderOptions().workers(N) only where CPUs are free, and make the dataset's get() cheaper "
         "(decode once, cache)",
         "workers", false}},
       "data_cost", "workers=2", "DataLoader(..., num_workers=2, persistent_workers=True)", kFindings, "loader_workers"},
      {"input.workers", "input", "single-process loading while the steps wait for data, or more workers than CPUs",
       {{"single_process",
         kLoaderPython, kLoaderCpp,
         "workers"},
        {"too_many",
         "Lower num_workers to at most the CPUs available (minus intra-op threads); measure with "
         "`trainrx sweep --cmd \"python3 train.py --workers {{workers}}\" --grid workers=0,1,2,4`.",
         "Lower DataLoaderOptions().workers(N) to at most the available CPUs.", "workers"}},
       "workers", "workers=2",
       "DataLoader(..., num_workers=2, persistent_workers=True); pick N with `trainrx sweep --cmd \"... {workers}\" "
       "--grid workers=0,1,2,4`",
       kFindings, "loader_workers"},
      {"input.pin_memory", "input", "host-to-device copies from pageable memory",
       {{"", "DataLoader(..., pin_memory=True) and batch.to(device, non_blocking=True)",
         "Allocate host batches with .pin_memory() and copy with .to(device, /*non_blocking=*/true)", "pin_memory"}},
       "pin_memory", "pin_memory", "DataLoader(..., pin_memory=True) and batch.to(device, non_blocking=True)",
       kFindings, "pinned_copies"},
  };
}

// The sync, optim, precision and tensor findings.
std::vector<CatalogEntry> SyncOptimEntries() {
  return {
      {"sync.host_device", "sync", "host-device syncs (scalar reads, blocking runtime calls) in the steps",
       {{"device_sums",
         "Keep running sums on the device (total += loss.detach()) and call .item() / .cpu() every N "
         "steps; find the rest with torch.cuda.set_sync_debug_mode(\"warn\").",
         kSyncCpp,
         "item_every_step"},
        {"loading",
         "Most reads come from data loading: tensors used as indices or sizes (indexing a NumPy array "
         "or memmap with a 0-d tensor calls __index__ -> .item()). Convert the indices once "
         "(ix = torch.randint(...).tolist()) or draw them with NumPy/random, and index with ints.",
         kSyncCpp,
         "item_every_step"}},
       "item_every_step", "", "", kFindings, "unblock_syncs"},
      {"sync.blocking_copy", "sync", "synchronous host-to-device cudaMemcpy of 64 KB or more",
       {{"", "batch.to(device, non_blocking=True) from pinned memory (DataLoader(pin_memory=True))",
         "tensor.pin_memory().to(device, /*non_blocking=*/true)", "pin_memory"}},
       "", "", "", kFindings, "unblock_syncs"},
      {"optim.zero_grad", "optim", "zero_grad writes zeros instead of setting gradients to None",
       {{"", "optimizer.zero_grad(set_to_none=True) (the default since PyTorch 2.0)",
         "optimizer.zero_grad(/*set_to_none=*/true)", "zero_grad_none"}},
       "zero_grad_none", "zero_grad_none", "optimizer.zero_grad(set_to_none=True) (the default since torch 2.0)",
       kFindings, "zero_grad_none"},
      {"optim.single_tensor", "optim", "an optimizer step with one op per parameter (no foreach / fused ops)",
       {{"",
         "torch.optim.{optimizer}(params, ..., fused=True) where torch has a fused step (Adam, AdamW, SGD, Adagrad: "
         "CUDA, and the CPU since torch 2.4); other optimizers foreach=True (the default only when every parameter is "
         "on CUDA; on the CPU it can be slower than the loop: measure it with trainrx fix)",
         "LibTorch's C++ optimizers loop over parameters and have no foreach option; for a hot optimizer write "
         "the update with the multi-tensor ops over the parameter list (at::_foreach_mul_, at::_foreach_add_, "
         "at::_foreach_addcdiv_, ...)",
         // the reference workloads use LibTorch's optimizers: no foreach to switch
         ""}},
       "foreach", "fused", "fused=True in the optimizer's constructor (torch.optim.AdamW(params, ..., fused=True))", kFindings,
       "fused_optimizer"},
      {"precision.fp32_matmul", "precision", "FP32 GEMM/conv kernels on an sm_80+ GPU with TF32 off",
       {{"matmul",
         "torch.set_float32_matmul_precision(\"high\") (or torch.backends.cuda.matmul.allow_tf32 = True; "
         "convolutions: torch.backends.cudnn.allow_tf32 = True), or autocast to bf16. TF32 keeps "
         "10 mantissa bits: check the loss curve",
         kTf32Cpp,
         // no reference-workload knob switches TF32 (amp=bf16 is the bigger step: precision.no_amp)
         ""},
        {"conv",
         "torch.backends.cudnn.allow_tf32 = True (the default; something turned it off), or autocast to bf16",
         kTf32Cpp,
         ""}},
       "", "tf32", "torch.set_float32_matmul_precision(\"high\") (TF32 matmuls on Ampere and newer)", kFindings,
       "tf32"},
      {"precision.matmul_alignment", "precision", "bf16/fp16 matmuls with a size that is not a multiple of 8",
       {{"",
         "Pad the sizes you choose to multiples of 8: hidden / feature sizes, vocabulary and class counts "
         "(nn.Linear(32, 16) and ignore the extra logits), batch x sequence tokens; keep the model's "
         "own numbers unchanged only where they are fixed by the data",
         "The same in LibTorch: torch::nn::Linear(in, (out + 7) / 8 * 8) and slice the output; batch sizes multiple of 8",
         ""}},
       "", "", "", kFindings},
      {"tensor.cpu_then_copy", "tensor", "a tensor filled on the host and copied to the device right away",
       {{"",
         "Create it where it is used: torch.zeros(n, device=x.device, dtype=x.dtype) (ones / full / randn "
         "alike), or build it once outside the loop",
         "torch::zeros({{n}}, x.options()) (or torch::TensorOptions().device(device).dtype(...)), or hoist it out of "
         "the loop",
         ""}},
       "", "", "", kFindings},
  };
}

// The memory findings (with batch.small).
std::vector<CatalogEntry> MemoryEntries() {
  return {
      {"memory.growth", "memory", "allocated memory at step starts rises step after step",
       {{"",
         "Find what outlives its step: tensors appended to a list keep their whole graph and activations "
         "(append loss.item() or t.detach().cpu()); in evaluation, wrap the loop in torch.no_grad() so "
         "`total += loss` does not keep every batch's graph; caches keyed by step or batch need a bound. In a training "
         "loop that calls backward(), `total += loss` keeps only each step's graph nodes (backward freed the "
         "activations): use `total += loss.item()`. torch.cuda.memory._record_memory_history() shows the allocation's "
         "stack.",
         "Keep no tensor (or tensor with requires_grad history) across steps: store t.detach() or its value; "
         "evaluate under torch::NoGradGuard.",
         "leak=0"}},
       "leak", "", "", kMemory},
      {"memory.fragmentation", "memory", "the CUDA caching allocator holds memory it does not use on a nearly full device",
       {{"",
         "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (set before the first CUDA call, e.g. in the job's "
         "environment): segments grow in place instead of new cudaMalloc blocks, so freed memory is not stranded "
         "between sizes. Costs: growing a segment maps pages (a little slower the first time), and it is not "
         "supported everywhere (memory shared across processes through CUDA IPC). Measure it: `trainrx ab --cmd --a \"python train.py\" "
         "--b \"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python train.py\"`. Steps whose tensor sizes vary (sequence lengths) fragment most: pad to a few "
         "fixed lengths.",
         "Same environment variable (read by c10's CUDA caching allocator at start-up).", ""}},
       "", "", "", kMemory},
      {"memory.empty_cache", "memory", "torch.cuda.empty_cache() called in most steps",
       {{"",
         "Remove torch.cuda.empty_cache() from the training loop: the caching allocator reuses freed blocks, and "
         "emptying it only makes the next step call cudaMalloc again (and synchronizes the device). It helps only to "
         "hand memory to another process, or between phases that need different shapes (once, not every step). If "
         "memory runs out without it, see memory.fragmentation (expandable_segments) or lower the batch.",
         "Remove c10::cuda::CUDACachingAllocator::emptyCache() from the loop.", ""}},
       "", "", "", kMemory},
      {"batch.small", "memory", "the batch uses a small part of the device's memory while the GPU waits",
       {{"",
         "Raise the batch toward {suggest} (DataLoader(batch_size=...)) and measure: `trainrx sweep --cmd \"python "
         "train.py --batch-size {{batch}}\" --grid batch={batch},{half},{suggest}` ranks the cells by samples per "
         "second and runs past one that runs out of memory. A larger batch changes the optimization: scale the "
         "learning rate with it (linear scaling with warm-up), or keep the effective batch with gradient "
         "accumulation.",
         "Raise the batch size of the data loader; scale the learning rate, or accumulate gradients, as for Python.",
         "batch={suggest}"}},
       "", "", "", kMemory},
  };
}

// The compile findings.
std::vector<CatalogEntry> CompileEntries() {
  return {
      {"compile.graph_break", "compile", "torch.compile's graph breaks split each step into several compiled regions",
       {{"other",
         "See the reason above, and torch._dynamo.explain(model)(inputs) for every break; the common ones are listed "
         "at the link in the reason.",
         kNotPython, ""},
        {"scalar",
         "A tensor's value read in Python (.item(), float(t), a branch on it) ends the graph: keep the value a tensor "
         "(torch.where instead of if), or set torch._dynamo.config.capture_scalar_outputs = True so .item() stays "
         "in the graph.",
         kNotPython, ""},
        {"logging",
         "Logging inside forward (print, logger calls, a tensor's shape as text) ends the graph: log outside the "
         "compiled function, or list the function in torch._dynamo.config.reorderable_logging_functions.",
         kNotPython, ""},
        {"control_flow",
         "Control flow on a tensor's value ends the graph: torch.cond (both branches traced) or torch.where.",
         kNotPython, ""}},
       "", "", "", kCompile},
      {"compile.recompiles", "compile", "a function compiled again, or compiled inside the steady steps",
       {{"value",
         "A Python value the compiled code reads (a module attribute, a global, an argument that is a Python int or "
         "float) changes from call to call, and the guard on its value fails: pass it as a tensor, keep it constant, "
         "or mark it dynamic (torch._dynamo.mark_dynamic, or torch.compile(dynamic=True) for scalars). After "
         "torch._dynamo.config.recompile_limit compiles the function runs eagerly.",
         kNotPython, ""},
        {"shapes",
         "Shapes that change (batch or sequence length) recompile: torch.compile(dynamic=True), "
         "torch._dynamo.mark_dynamic(x, 0) on the varying dimension, or pad to a few fixed lengths.",
         kNotPython, ""},
        {"scalar",
         "A Python number read from a tensor (.item()) is a constant to the compiled code: every new value "
         "recompiles. Keep it a tensor, or set torch._dynamo.config.capture_scalar_outputs = True.",
         kNotPython, ""},
        {"mode_switch",
         "Nothing to change: switching between train() and eval() (or grad mode for evaluation) compiles each mode "
         "once, and later switches reuse both graphs. It recurs only if the mode's guard fails again (a new "
         "module state each evaluation).",
         kNotPython, ""},
        // A torch.profiler trace (compilations, without the guard that failed): this, then "value".
        {"guard_unknown", "TORCH_LOGS=recompiles python train.py prints each guard that failed; ", "", ""}},
       "", "", "", kCompile},
      {"compile.time", "compile", "compile time is a large part of the recording",
       {{"",
         "Compare eager and compiled steady steps before counting on it: `trainrx ab --cmd --a \"python train.py\" "
         "--b \"TRAINRX_FIX=compile_off python train.py\"` (the second runs the model eagerly, no code change); compile pays "
         "back after compile time / (eager step - compiled step) steps. Recompiles (compile.recompiles) add to it; "
         "PyTorch's compile caches (FX graph and autotune caches, on by default in recent versions) shorten the next "
         "run on the same machine.",
         kNotPython, ""}},
       "", "compile_off",
       "run the model eagerly (drop torch.compile) where compiling does not pay back within the job's steps", kCompile},
      {"compile.not_compiled", "compile", "a launch-bound GPU, or a step whose critical path runs through kernels torch.compile fuses, and a model that is not compiled",
       {{"",
         "model = torch.compile(model) (mode=\"reduce-overhead\" for CUDA graphs), then measure: the first "
         "steps compile (compile.time), the steady step is what counts: `trainrx ab --cmd --a \"python train.py\" "
         "--b \"python train_compiled.py\"` compares the two scripts' steady steps.",
         kNoCompileCpp,
         ""}},
       "", "", "", kCompile, "compile_fusion"},
      {"compile.reduce_overhead", "compile", "a compiled model that is still launch-bound, without CUDA graphs",
       {{"",
         "Measure it without editing the script: `trainrx ab --cmd --a \"python train.py\" --b "
         "\"TRAINRX_FIX=compile_mode=reduce-overhead python train.py\"`. CUDA graphs need static shapes and "
         "no CPU sync inside the step; inductor says why it skipped them (TORCH_LOGS=perf_hints).",
         kNoCompileCpp,
         ""}},
       "", "", "", kCompile, "cuda_graphs"},
  };
}

// The python, model and debug findings.
std::vector<CatalogEntry> ModelAndDebugEntries() {
  return {
      {"python.loop_indexing", "python", "a Python loop over a tensor: select + the same ops repeated in a step",
       {{"",
         "Vectorize: one op over the whole tensor, e.g. x.mul_(gains.view(-1, 1, 1, 1)) instead of "
         "`for i in range(n): x[i].mul_(gains[i])`; torch.where / index_put_ / advanced indexing for "
         "conditional or scattered updates",
         "The same with tensor ops: x.mul_(gains.view({{-1, 1, 1, 1}})) or x.index_put_({{idx}}, v) instead of "
         "a loop over x[i]",
         ""}},
       "", "", "", kFindings},
      {"model.bias_before_norm", "model", "a conv/linear bias that the norm after it cancels",
       {{"",
         "nn.Conv2d(..., bias=False) before BatchNorm / InstanceNorm; nn.Linear(..., bias=False) before "
         "BatchNorm1d (not before LayerNorm / GroupNorm: there the bias is not cancelled)",
         "torch::nn::Conv2dOptions(...).bias(false) / LinearOptions(...).bias(false) before a batch (or, for "
         "convolutions, instance) norm layer",
         "bias"}},
       "bias", "", "", kFindings, "drop_bias"},
      {"debug.anomaly_detection", "config", "autograd anomaly detection on during the steps",
       {{"",
         "Remove torch.autograd.set_detect_anomaly(True) / detect_anomaly() from training runs; enable it only while "
         "hunting a NaN",
         "Remove torch::autograd::AnomalyMode::set_enabled(true) / DetectAnomalyGuard from the training loop",
         "anomaly=0"}},
       "anomaly", "anomaly_off", "remove torch.autograd.set_detect_anomaly(True) / detect_anomaly() from training",
       kFindings, "anomaly_off"},
      {"debug.profiler", "config", "another profiler's callbacks active during the steps",
       {{"",
         "Leave torch.profiler / torch.autograd.profiler.profile / emit_nvtx out of production runs "
         "(profile a few steps with a schedule, or use trainrx record)",
         "Remove torch::autograd::profiler::RecordProfile / enableProfiler from the training loop", "profiler=0"}},
       "profiler", "", "", kFindings, "profiler_off"},
      {"debug.launch_blocking", "config", "CUDA_LAUNCH_BLOCKING=1, or deterministic algorithms forced",
       {{"blocking", "Unset CUDA_LAUNCH_BLOCKING (a debugging switch)", "Unset CUDA_LAUNCH_BLOCKING in the environment",
         "launch_blocking=0"},
        {"deterministic", "torch.use_deterministic_algorithms(False) unless bit-reproducibility is required",
         "at::globalContext().setDeterministicAlgorithms(false, false)", "launch_blocking=0"}},
       "launch_blocking", "", "", kFindings},
  };
}

// The cuDNN, eval, steps, threads, layout and machine findings.
std::vector<CatalogEntry> ConfigEntries() {
  return {
      {"cudnn.benchmark_off", "config", "the cuDNN autotuner is off while convolutions run on a GPU",
       {{"", "torch.backends.cudnn.benchmark = True (with fixed input shapes)",
         "at::globalContext().setBenchmarkCuDNN(true)", "cudnn_benchmark=1"}},
       "cudnn_benchmark", "cudnn_benchmark", "torch.backends.cudnn.benchmark = True", kFindings, "cudnn_benchmark"},
      {"cudnn.deterministic_on", "config", "deterministic cuDNN convolutions are forced",
       {{"", "torch.backends.cudnn.deterministic = False (unless reproducibility is required: then keep it and say so)",
         "at::globalContext().setDeterministicCuDNN(false)", "cudnn_deterministic=0"}},
       "cudnn_deterministic", "deterministic_off",
       "drop torch.use_deterministic_algorithms(True) / cudnn.deterministic = True from training runs", kFindings},
      {"eval.grad_enabled", "eval", "evaluation runs with autograd on",
       {{"", "Wrap evaluation in `with torch.no_grad():` (or torch.inference_mode()) after model.eval()",
         "Wrap evaluation in `torch::NoGradGuard no_grad;` (or c10::InferenceMode guard)", "eval_no_grad=1"}},
       "eval_no_grad", "eval_no_grad", "run evaluation under `with torch.no_grad():` (or torch.inference_mode())",
       kFindings, "eval_no_grad"},
      {"steps.slow", "steps", "steady steps far slower than the median after the warm-up: periodic, a burst, or scattered",
       {{"look",
         "Look at what runs in those steps (the examples name them; the HTML report's timeline shows them: `trainrx analyze "
         "trace.json --format html -o report.html`): a slow step after the warm-up is not the model's cost.",
         "Look at what runs in those steps (the examples name them): a slow step after the warm-up is not the model's cost.", ""},
        {"periodic",
         "An event every k steps (logging that syncs, checkpointing, evaluation): make it rarer, asynchronous "
         "(torch.distributed.checkpoint.async_save, a background thread), or move it out of the timed loop.",
         "An event every k steps (logging, checkpointing, evaluation): make it rarer or asynchronous.", ""},
        {"contention",
         "Another process took the CPUs: run on a quiet machine, pin the job (taskset / numactl, "
         "torch.set_num_threads below the cores left), and repeat the recording before trusting a timing.",
         "Another process took the CPUs: run on a quiet machine, pin the job (taskset / numactl), and repeat the recording.",
         ""}},
       "", "", "", kFindings},
      {"threads.oversubscribed", "config", "more intra-op threads or loader workers than the CPUs allowed",
       {{"threads", "torch.set_num_threads({n:.0f}) (CPUs / local ranks)",
         "at::set_num_threads(N) with N = CPUs / local ranks", "threads"},
        {"workers", "DataLoader(num_workers={n:.0f}) (CPUs / local ranks)",
         "DataLoaderOptions().workers(N) with N = CPUs / local ranks", "threads"}},
       "threads", "", "", kFindings},
      {"model.channels_last", "layout", "an NCHW (channels-first) convolutional model whose convolutions and pooling take much of the step",
       {{"",
         "model = model.to(memory_format=torch.channels_last) once, and each batch x = x.to(memory_format=torch.channels_last) "
         "(4-D inputs); keep it if `fix` measures it faster",
         "model->to(torch::MemoryFormat::ChannelsLast) is not available: convert each conv's weight and the input with "
         ".contiguous(torch::MemoryFormat::ChannelsLast)",
         "channels_last=1"}},
       "", "channels_last", "model = model.to(memory_format=torch.channels_last); x = x.to(memory_format=torch.channels_last)",
       kFindings},
      {"machine.busy", "machine", "the program waited for a CPU: another program, or its own threads, took the CPUs",
       {{"quiet",
         "Time on a quiet machine (or pin the job: taskset / numactl, cgroups); until then trust no timing of this run "
         "and give `fix`, `ab` and `sweep` more trials",
         "Time on a quiet machine (or pin the job: taskset / numactl, cgroups); until then trust no timing of this run",
         ""},
        {"threads",
         "torch.set_num_threads(k) with k at most the CPUs left to the job (threads x local ranks + busy loader workers "
         "<= CPUs)",
         "at::set_num_threads(k) with k at most the CPUs left to the job", ""}},
       "", "", "", kFindings},
  };
}

}  // namespace

// The texts are fmt templates: literal braces are doubled ("torch::zeros({{n}}, ...)").
const std::vector<CatalogEntry>& Catalog() {
  static const std::vector<CatalogEntry> kCatalog = [] {
    std::vector<CatalogEntry> all;
    for (auto part : {GpuEntries, DistEntries, RankEntries, InputEntries, SyncOptimEntries, MemoryEntries, CompileEntries, ModelAndDebugEntries, ConfigEntries})
      for (auto& e : part()) all.push_back(std::move(e));
    return all;
  }();
  return kCatalog;
}

const std::vector<std::string>& FindingIds() {
  static const std::vector<std::string> kIds = [] {
    std::vector<std::string> ids;
    for (const auto& e : Catalog()) ids.push_back(e.id);
    return ids;
  }();
  return kIds;
}

const CatalogEntry* FindCatalogEntry(std::string_view id) {
  for (const auto& e : Catalog())
    if (id == e.id) return &e;
  return nullptr;
}

const CatalogEntry* FindingPlantedBy(std::string_view knob) {
  for (const auto& e : Catalog())
    if (*e.planted_by && knob == e.planted_by) return &e;
  return nullptr;
}

bool OutsideFixSwitches(std::string_view token) {
  // The start-up hook's _ALT_SWITCHES table (tests/analyzers/catalog_test.cc holds them together).
  const OutsideFix* f = FindOutsideFix(token);
  return f != nullptr && f->switches && token.find('=') == std::string_view::npos;
}

const std::vector<OutsideFix>& OutsideFixes() {
  // code "": a catalog entry names the token and holds its outside_code (OutsideFixCode).
  static const std::vector<OutsideFix> k = {
      {"anomaly_off", "anomaly_off", "", true},
      {"zero_grad_none", "zero_grad_none", "", true},
      {"workers", "loader_workers", "", false, "N"},
      {"pin_memory", "pinned_copies", "", false},
      {"eval_no_grad", "eval_no_grad", "", false},
      {"cudnn_benchmark", "cudnn_benchmark", "", true},
      {"deterministic_off", "", "", true},
      {"tf32", "tf32", "", true},
      {"foreach", "foreach_optimizer", "foreach=True in the optimizer's constructor", true},
      {"fused", "fused_optimizer", "", true},
      {"channels_last", "", "", false},
      {"compile_off", "", "", false},
      {"compile_mode", "", "torch.compile(model, mode=...)", false, "M"},
  };
  return k;
}

std::string OutsideFixCode(std::string_view token) {
  const std::string_view key = token.substr(0, token.find('='));
  for (const auto& e : Catalog())
    if (const std::string_view t = e.outside_token; !t.empty() && t.substr(0, t.find('=')) == key) return e.outside_code;
  const OutsideFix* f = FindOutsideFix(token);
  return f != nullptr ? f->code : "";
}

const OutsideFix* FindOutsideFix(std::string_view token) {
  const std::string_view key = token.substr(0, token.find('='));
  for (const OutsideFix& f : OutsideFixes())
    if (key == f.token) return &f;
  return nullptr;
}

StatusOr<std::string> ResolveOutsideFix(const std::string& name) {
  if (const OutsideFix* f = FindOutsideFix(name); f != nullptr) {
    const bool takes_value = *f->value != '\0';
    const size_t eq = name.find('=');
    if (takes_value && (eq == std::string::npos || eq + 1 == name.size()))
      return Status::Error(fmt::format("--also {}: {} takes a value ({}=2)", name, f->token, f->token));
    if (!takes_value && eq != std::string::npos)
      return Status::Error(fmt::format("--also {}: {} takes no value", name, f->token));
    if (std::string_view(f->token) == "workers") {
      const std::string n = name.substr(eq + 1);
      if (n.find_first_not_of("0123456789") != std::string::npos || std::stoll(n.substr(0, 6)) < 1)
        return Status::Error(fmt::format("--also {}: workers takes a number of worker processes, 1 or more", name));
    }
    return name;
  }
  for (const OutsideFix& f : OutsideFixes())
    if (*f.transform && name == f.transform)
      return std::string_view(f.token) == "workers" ? std::string("workers=2") : std::string(f.token);
  if (const CatalogEntry* e = FindCatalogEntry(name); e != nullptr && *e->outside_token) return std::string(e->outside_token);
  std::string known;
  for (const OutsideFix& f : OutsideFixes())
    known += fmt::format("{}{}{}{}", known.empty() ? "" : ", ", f.token, *f.value ? "=" : "", f.value);
  return Status::Error(fmt::format("--also {}: not a fix trainrx applies from outside a script; known: {} (or a transform "
                                   "or finding id that names one, e.g. fused_optimizer, optim.single_tensor)",
                                   name, known));
}

FixText FormatFix(std::string_view id, std::string_view variant, const std::vector<FixArg>& args) {
  const CatalogEntry* e = FindCatalogEntry(id);
  if (!e) throw std::invalid_argument(fmt::format("finding '{}' is not in the catalog (analyzers/catalog.cc)", id));
  const FixVariant* v = variant.empty() ? &e->fixes.front() : nullptr;
  for (const auto& x : e->fixes)
    if (!v && variant == x.name) v = &x;
  if (!v) throw std::invalid_argument(fmt::format("finding '{}' has no fix variant '{}' in the catalog", id, variant));
  fmt::dynamic_format_arg_store<fmt::format_context> store;
  for (const auto& [name, value] : args) std::visit([&, n = name](const auto& x) { store.push_back(fmt::arg(n, x)); }, value);
  const auto format = [&](const char* text) {
    try {
      return fmt::vformat(text, store);
    } catch (const fmt::format_error& err) {
      throw std::invalid_argument(fmt::format("finding '{}' fix '{}': {} in \"{}\"", id, v->name, err.what(), text));
    }
  };
  return {format(v->python), format(v->cpp), format(v->knob), v->outside};
}

void SetFix(Finding& f, std::string_view variant, const std::vector<FixArg>& args) {
  FixText t = FormatFix(f.id, variant, args);
  f.fix_python = std::move(t.python);
  f.fix_cpp = std::move(t.cpp);
  f.knob = std::move(t.knob);
  f.outside_fix = t.outside;
  f.fix_variant = std::string(variant);
}

std::string_view BoundTransform(const Finding& f) {
  const CatalogEntry* e = FindCatalogEntry(f.id);
  if (e == nullptr) return {};
  if (*e->transform) return e->transform;
  for (const FixVariant& v : e->fixes)
    if (f.fix_variant.empty() ? &v == &e->fixes.front() : f.fix_variant == v.name) return v.bound;
  return {};
}

}  // namespace trainrx::analyzers
