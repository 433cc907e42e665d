#include "knobs.h"

#include <cstdlib>
#include <stdexcept>

namespace trainrx::workloads {

const std::vector<Knob>& Knobs() {
  static const std::vector<Knob> kKnobs = {
      {"workers", "2", "0", "cpu", "DataLoader worker threads (0: load on the training thread)"},
      {"data_cost", "5", "", "cpu", "CPU time per sample of 'decode + augment', microseconds"},
      {"prefetch", "2", "", "cpu", "batches in flight per worker (LibTorch max_jobs = workers x prefetch)"},
      {"pin_memory", "1", "0", "gpu", "pinned host batches + non_blocking copies (device=cuda)"},
      {"batch", "32", "", "cpu", "samples per step"},
      {"steps", "30", "", "cpu", "training steps (after warm-up)"},
      {"warmup", "3", "", "cpu", "warm-up steps, not timed"},
      {"device", "cpu", "", "cpu", "cpu | cuda"},
      {"threads", "0", "", "cpu", "intra-op threads (0: LibTorch's default)"},
      {"amp", "off", "", "cpu", "off | bf16 | fp16 (fp16 with a gradient scaler; CPU supports bf16)"},
      {"cudnn_benchmark", "1", "0", "gpu", "cuDNN autotuner"},
      {"cudnn_deterministic", "0", "1", "gpu", "deterministic cuDNN algorithms"},
      {"anomaly", "0", "1", "cpu", "autograd anomaly detection"},
      {"profiler", "0", "1", "cpu", "LibTorch's own (legacy) profiler left on"},
      {"launch_blocking", "0", "1", "cpu", "CUDA_LAUNCH_BLOCKING=1"},
      {"item_every_step", "0", "1", "cpu", "loss.item() every step"},
      {"zero_grad_none", "1", "0", "cpu", "zero_grad sets gradients to none (0: writes zeros)"},
      {"foreach", "1", "0", "cpu", "optimizer step in multi-tensor (_foreach_*) ops (0: torch::optim's per-parameter loop)"},
      {"bias", "0", "1", "cpu", "conv bias before BatchNorm (cnn; lm's Linear->LayerNorm bias is not redundant and is not flagged)"},
      {"eval_no_grad", "1", "0", "cpu", "evaluation under NoGradGuard"},
      {"eval_every", "10", "", "cpu", "evaluate every N steps (0: never)"},
      {"grad_accum", "1", "", "cpu", "micro-steps per optimizer step"},
      {"accum_sync", "0", "1", "dist", "all-reduce on every micro-step (0: only the last, like DDP no_sync)"},
      {"channels_last", "0", "", "cpu", "channels-last memory format (cnn; the default NCHW gets model.channels_last: 1.22x slower than 1 on a 2-core CPU)"},
      {"empty_cache", "0", "1", "gpu", "empty the CUDA caching allocator every step"},
      {"leak", "0", "1", "cpu", "keep every step's predictions with their graph (a second forward after backward, never freed: memory grows every step)"},
      {"backend", "gloo", "", "dist", "gloo | nccl"},
      {"bucket_mb", "25", "", "dist", "gradient all-reduce bucket size, MB (as DDP)"},
      {"straggler_ms", "0", "20", "dist", "extra forward compute on the last rank, ms per step (a straggler; with --nproc 2+)"},
      {"batch_skew", "0", "16", "dist", "samples moved from rank 0's batch to the last rank's: uneven per-rank batches, the same global batch (with --nproc 2+)"},
      {"slowdown", "0", "", "cpu", "busy work added to every step, microseconds (for A/B and gate tests)"},
      {"seed", "0", "", "cpu", "random seed"},
  };
  return kKnobs;
}

const std::vector<Workload>& Workloads() {
  static const std::vector<Workload> kWorkloads = {
      {"cnn", "small ResNet-style CNN (Conv-BN-ReLU blocks) on synthetic 16x16 images, SGD with momentum"},
      {"lm", "small Transformer language model (embedding, attention, Linear-LayerNorm) on synthetic tokens, AdamW"},
  };
  return kWorkloads;
}

namespace {
// What workloads/train.cc re-reads every step (the rest is fixed when the model, optimizer and
// loader are built).
constexpr const char* kSwitchable[] = {"slowdown", "item_every_step", "zero_grad_none", "anomaly"};
}  // namespace

bool IsSwitchable(const std::string& name) {
  for (const char* k : kSwitchable)
    if (name == k) return true;
  return false;
}

std::string SwitchableKnobs() {
  std::string out;
  for (const char* k : kSwitchable) out += (out.empty() ? "" : ", ") + std::string(k);
  return out;
}

const Knob* FindKnob(const std::string& name) {
  for (const auto& k : Knobs())
    if (name == k.name) return &k;
  return nullptr;
}

const std::vector<Preset>& Presets() {
  static const std::vector<Preset> kPresets = {
      {"good", "every knob at its default (the recommended setting)", {}},
      {"seeds", "everything the seed articles warn about",
       {{"workers", "0"}, {"data_cost", "1500"}, {"anomaly", "1"}, {"item_every_step", "1"}, {"zero_grad_none", "0"}, {"bias", "1"},
        {"eval_no_grad", "0"}, {"cudnn_benchmark", "0"}, {"pin_memory", "0"}}},
      {"debug-left-on", "debugging switches left in a training run",
       {{"anomaly", "1"}, {"profiler", "1"}, {"launch_blocking", "1"}}},
      {"starved", "a data-bound loop: costly samples loaded on the training thread",
       {{"workers", "0"}, {"data_cost", "1500"}}},
  };
  return kPresets;
}

Config::Config() {
  for (const auto& k : Knobs()) values_[k.name] = k.default_value;
}

namespace {
bool IsNumber(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}
}  // namespace

Status Config::Set(const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    return Status::Error("--set expects knob=value, got '" + assignment + "'");
  }
  const std::string name = assignment.substr(0, eq), value = assignment.substr(eq + 1);
  const Knob* k = FindKnob(name);
  if (!k) {
    std::string known;
    for (const auto& kn : Knobs()) known += std::string(known.empty() ? "" : ", ") + kn.name;
    return Status::Error("unknown knob '" + name + "'; knobs: " + known);
  }
  const bool text = name == "device" || name == "amp" || name == "backend";
  if (text) {
    static const std::map<std::string, std::vector<std::string>> kAllowed = {
        {"device", {"cpu", "cuda"}}, {"amp", {"off", "bf16", "fp16"}}, {"backend", {"gloo", "nccl"}}};
    const auto& allowed = kAllowed.at(name);
    bool ok = false;
    for (const auto& a : allowed) ok = ok || a == value;
    if (!ok) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : " | ") + a;
      return Status::Error("knob " + name + ": '" + value + "' is not one of " + list);
    }
  } else if (!IsNumber(value) || std::strtod(value.c_str(), nullptr) < 0) {
    return Status::Error("knob " + name + ": '" + value + "' is not a non-negative number");
  }
  values_[name] = value;
  return Status::Ok();
}

Status Config::ApplyPreset(const std::string& name) {
  for (const auto& p : Presets()) {
    if (name != p.name) continue;
    for (const auto& [k, v] : p.settings) values_[k] = v;
    return Status::Ok();
  }
  std::string known;
  for (const auto& p : Presets()) known += std::string(known.empty() ? "" : ", ") + p.name;
  return Status::Error("unknown preset '" + name + "'; presets: " + known);
}

const std::string& Config::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw std::invalid_argument("unknown knob " + name);
  return it->second;
}
int64_t Config::Int(const std::string& name) const { return std::strtoll(Get(name).c_str(), nullptr, 10); }
double Config::Double(const std::string& name) const { return std::strtod(Get(name).c_str(), nullptr); }
bool Config::Bool(const std::string& name) const { return Double(name) != 0; }

std::string Config::Changed() const {
  std::string out;
  for (const auto& k : Knobs()) {
    const std::string& v = values_.at(k.name);
    if (v != k.default_value) out += std::string(out.empty() ? "" : " ") + k.name + "=" + v;
  }
  return out;
}

}  // namespace trainrx::workloads
