// trainrx-workload — the reference workloads (cnn, lm), every trick in docs/findings.md that LibTorch can
// reproduce as a knob (workloads/knobs.h), recorded through the probes' C++ API. `trainrx run`
// launches it (one process per rank); it can also run alone:
//
//   trainrx-workload cnn --set workers=0 --set anomaly=1 -o trace.json --result result.json
//
// Distributed: RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT (env://, as torchrun sets them);
// gradients are all-reduced in buckets from autograd hooks, so communication overlaps backward as
// DDP's does, with DDP's no_sync behaviour under gradient accumulation unless accum_sync=1.
//
// The only torch translation unit of workloads/ (compile time on 2 cores).
#define USE_C10D_GLOO 1
#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/anomaly_mode.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "knobs.h"
#include "trainrx/probes/probes.h"
#include "trainrx/profiler/cpu_wait.h"
#include "trainrx/profiler/json_writer.h"
#include "trainrx/profiler/memory_counters.h"

namespace tp = trainrx::probes;
using trainrx::workloads::Config;
using Clock = std::chrono::steady_clock;

namespace {

void BusyWaitUs(double us) {
  if (us <= 0) return;
  const auto until = Clock::now() + std::chrono::nanoseconds(static_cast<int64_t>(us * 1000));
  while (Clock::now() < until) {
  }
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// ---------------------------------------------------------------------------------------------
// Data: synthetic, learnable, deterministic per index; "decode + augment" costs real CPU time.

class Images : public torch::data::datasets::Dataset<Images> {
 public:
  Images(int64_t n, double cost_us, uint64_t seed) : n_(n), cost_us_(cost_us), seed_(seed) {
    auto g = at::detail::createCPUGenerator(seed);
    templates_ = torch::randn({kClasses, 3, kSize, kSize}, g);
  }
  torch::data::Example<> get(size_t i) override {
    auto g = at::detail::createCPUGenerator(seed_ * 1000003 + i);
    const int64_t y = static_cast<int64_t>(i % kClasses);
    auto x = templates_[y] + 0.8 * torch::randn({3, kSize, kSize}, g);
    if (i % 2) x = x.flip({2});  // augment
    BusyWaitUs(cost_us_);         // decode stand-in
    return {x, torch::tensor(y)};
  }
  c10::optional<size_t> size() const override { return static_cast<size_t>(n_); }
  static constexpr int64_t kClasses = 10, kSize = 16;

 private:
  int64_t n_;
  double cost_us_;
  uint64_t seed_;
  torch::Tensor templates_;
};

// Token windows of a noisy affine sequence: next = (a * cur + b) mod V, 10% random tokens.
class Tokens : public torch::data::datasets::Dataset<Tokens> {
 public:
  Tokens(int64_t n, double cost_us, uint64_t seed) : n_(n), cost_us_(cost_us), seed_(seed) {}
  torch::data::Example<> get(size_t i) override {
    auto g = at::detail::createCPUGenerator(seed_ * 1000003 + i);
    auto noise = torch::rand({kSeq + 1}, g);
    auto rnd = torch::randint(0, kVocab, {kSeq + 1}, g);
    std::vector<int64_t> t(kSeq + 1);
    t[0] = static_cast<int64_t>(i % kVocab);
    auto nacc = noise.accessor<float, 1>();
    auto racc = rnd.accessor<int64_t, 1>();
    for (int64_t k = 1; k <= kSeq; ++k) t[k] = nacc[k] < 0.1 ? racc[k] : (t[k - 1] * 5 + 3) % kVocab;
    BusyWaitUs(cost_us_);
    auto all = torch::tensor(t);
    return {all.slice(0, 0, kSeq), all.slice(0, 1, kSeq + 1)};
  }
  c10::optional<size_t> size() const override { return static_cast<size_t>(n_); }
  static constexpr int64_t kVocab = 128, kSeq = 32;

 private:
  int64_t n_;
  double cost_us_;
  uint64_t seed_;
};

// ---------------------------------------------------------------------------------------------
// Models.

struct ConvBn : torch::nn::Module {
  ConvBn(int64_t in, int64_t out, int64_t stride, bool bias)
      : conv(register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(bias)))),
        bn(register_module("bn", torch::nn::BatchNorm2d(out))) {}
  torch::Tensor forward(const torch::Tensor& x) { return bn(conv(x)); }
  torch::nn::Conv2d conv;
  torch::nn::BatchNorm2d bn;
};

struct ResBlock : torch::nn::Module {
  ResBlock(int64_t c, bool bias)
      : a(register_module("a", std::make_shared<ConvBn>(c, c, 1, bias))),
        b(register_module("b", std::make_shared<ConvBn>(c, c, 1, bias))) {}
  torch::Tensor forward(const torch::Tensor& x) { return torch::relu(b->forward(torch::relu(a->forward(x))) + x); }
  std::shared_ptr<ConvBn> a, b;
};

struct Cnn : torch::nn::Module {
  explicit Cnn(bool bias)
      : stem(register_module("stem", std::make_shared<ConvBn>(3, 32, 1, bias))),
        r1(register_module("r1", std::make_shared<ResBlock>(32, bias))),
        down(register_module("down", std::make_shared<ConvBn>(32, 64, 2, bias))),
        r2(register_module("r2", std::make_shared<ResBlock>(64, bias))),
        fc(register_module("fc", torch::nn::Linear(64, Images::kClasses))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = torch::relu(stem->forward(x));
    h = r1->forward(h);
    h = torch::relu(down->forward(h));
    h = r2->forward(h);
    return fc(torch::adaptive_avg_pool2d(h, {1, 1}).flatten(1));
  }
  std::shared_ptr<ConvBn> stem;
  std::shared_ptr<ResBlock> r1;
  std::shared_ptr<ConvBn> down;
  std::shared_ptr<ResBlock> r2;
  torch::nn::Linear fc;
};

struct TBlock : torch::nn::Module {
  TBlock(int64_t d, int64_t heads, bool bias)
      : ln1(register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})))),
        attn(register_module("attn", torch::nn::MultiheadAttention(torch::nn::MultiheadAttentionOptions(d, heads)))),
        ln2(register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})))),
        fc1(register_module("fc1", torch::nn::Linear(d, 4 * d))),
        fc2(register_module("fc2", torch::nn::Linear(4 * d, d))),
        proj(register_module("proj", torch::nn::Linear(torch::nn::LinearOptions(d, d).bias(bias)))),
        lnp(register_module("lnp", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})))) {}
  // x: (L, N, D)
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& mask) {
    auto h = ln1(x);
    x = x + std::get<0>(attn->forward(h, h, h, /*key_padding_mask=*/torch::Tensor(), /*need_weights=*/false, mask));
    x = x + fc2(torch::gelu(fc1(ln2(x))));
    return x + lnp(proj(x));  // Linear -> LayerNorm: the bias knob's pattern
  }
  torch::nn::LayerNorm ln1;
  torch::nn::MultiheadAttention attn;
  torch::nn::LayerNorm ln2;
  torch::nn::Linear fc1, fc2, proj;
  torch::nn::LayerNorm lnp;
};

struct Lm : torch::nn::Module {
  explicit Lm(bool bias)
      : emb(register_module("emb", torch::nn::Embedding(Tokens::kVocab, kDim))),
        pos(register_parameter("pos", torch::randn({Tokens::kSeq, 1, kDim}) * 0.02)),
        b1(register_module("b1", std::make_shared<TBlock>(kDim, 4, bias))),
        b2(register_module("b2", std::make_shared<TBlock>(kDim, 4, bias))),
        head(register_module("head", torch::nn::Linear(kDim, Tokens::kVocab))) {}
  // tokens: (N, L) -> logits (N * L, V)
  torch::Tensor forward(const torch::Tensor& tokens) {
    const int64_t L = tokens.size(1);
    auto mask = torch::full({L, L}, -std::numeric_limits<float>::infinity()).triu(1).to(tokens.device());
    auto x = emb(tokens.t()) + pos.slice(0, 0, L);
    x = b2->forward(b1->forward(x, mask), mask);
    return head(x.transpose(0, 1)).reshape({-1, Tokens::kVocab});
  }
  static constexpr int64_t kDim = 64;
  torch::nn::Embedding emb;
  torch::Tensor pos;
  std::shared_ptr<TBlock> b1, b2;
  torch::nn::Linear head;
};

// ---------------------------------------------------------------------------------------------
// Gradient all-reduce in buckets from autograd hooks (what DDP's Reducer does, minus its graph
// analysis): a bucket is launched as soon as all its gradients are ready, while backward goes on.

class Reducer {
 public:
  Reducer(c10::intrusive_ptr<c10d::ProcessGroupGloo> pg, std::vector<torch::Tensor> params, double bucket_mb, int world)
      : pg_(std::move(pg)), params_(std::move(params)), world_(world) {
    // Reverse order: gradients arrive roughly from the last layer back (as DDP assumes).
    const int64_t cap = static_cast<int64_t>(bucket_mb * 1024 * 1024 / 4);
    int64_t fill = cap;
    for (int i = static_cast<int>(params_.size()) - 1; i >= 0; --i) {
      if (fill + params_[i].numel() > cap && !(buckets_.size() && buckets_.back().members.empty())) {
        buckets_.push_back({});
        fill = 0;
      }
      buckets_.back().members.push_back(i);
      bucket_of_.resize(params_.size());
      bucket_of_[i] = static_cast<int>(buckets_.size() - 1);
      fill += params_[i].numel();
    }
    for (size_t i = 0; i < params_.size(); ++i) {
      params_[i].register_hook([this, i](torch::Tensor g) {
        Ready(static_cast<int>(i), g);
        return g;
      });
    }
  }
  void set_sync(bool sync) { sync_ = sync; }
  size_t buckets() const { return buckets_.size(); }

  // After backward: wait for every launched bucket, average, write the gradients.
  void Finish() {
    if (!sync_) return;
    for (auto& b : buckets_) {
      if (!b.work) continue;
      RECORD_USER_SCOPE("trainrx::allreduce_wait");
      b.work->wait();
      b.flat.div_(world_);
      int64_t off = 0;
      for (int i : b.members) {
        auto& p = params_[i];
        const int64_t n = p.numel();
        p.mutable_grad() = b.flat.slice(0, off, off + n).view_as(p).clone();
        off += n;
      }
      b.work.reset();
      b.ready = 0;
      b.grads.clear();
    }
  }

 private:
  struct Bucket {
    std::vector<int> members;
    std::map<int, torch::Tensor> grads;
    size_t ready = 0;
    torch::Tensor flat;
    c10::intrusive_ptr<c10d::Work> work;
  };
  void Ready(int i, const torch::Tensor& g) {
    if (!sync_) return;
    Bucket& b = buckets_[bucket_of_[i]];
    // Under accumulation the incoming gradient joins what earlier micro-steps left in .grad.
    const auto& acc = params_[i].grad();
    b.grads[i] = acc.defined() ? (acc + g).detach() : g.detach();
    if (++b.ready < b.members.size()) return;
    std::vector<torch::Tensor> flat;
    for (int m : b.members) flat.push_back(b.grads[m].reshape({-1}));
    b.flat = torch::cat(flat);
    std::vector<torch::Tensor> tensors{b.flat};
    RECORD_USER_SCOPE("trainrx::allreduce");
    b.work = pg_->allreduce(tensors);
  }
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
  std::vector<torch::Tensor> params_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;
  int world_;
  bool sync_ = true;
};

c10::intrusive_ptr<c10d::ProcessGroupGloo> MakeGloo(int rank, int world) {
  const char* addr = std::getenv("MASTER_ADDR");
  const int port = EnvInt("MASTER_PORT", 29500);
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<uint16_t>(port);
  opts.isServer = rank == 0;
  opts.numWorkers = world;
  opts.timeout = std::chrono::seconds(60);
  auto store = c10::make_intrusive<c10d::TCPStore>(addr ? addr : "127.0.0.1", opts);
  auto options = c10d::ProcessGroupGloo::Options::create();
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  const std::string host = addr ? addr : "127.0.0.1";
  if (ifname && *ifname) options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  else if (host == "127.0.0.1" || host == "localhost") options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  else options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);
}

void SetAutocast(bool on, const std::string& amp, bool cuda) {
  const auto dtype = amp == "fp16" ? at::kHalf : at::kBFloat16;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  const auto dev = cuda ? at::kCUDA : at::kCPU;
  at::autocast::set_autocast_enabled(dev, on);
  if (on) at::autocast::set_autocast_dtype(dev, dtype);
#else
  if (cuda) {
    at::autocast::set_enabled(on);
    if (on) at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_cpu_enabled(on);
    if (on) at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
  if (!on) at::autocast::clear_cache();
}

struct StepResult {
  double ms;
  char arm;            // 'A' (the configuration) or 'B' (--alt-set), see AltArm()
  torch::Tensor loss;  // read after training: no sync inside the loop
  int64_t heap_bytes;  // what malloc holds at the step's end, outside its time (-1: unknown)
};

// In-process A/B: knobs that can change between steps, and the step order A B B A | B A A B | ...
// (blocks of four whose orientation alternates, so over two blocks each arm takes every position:
// a periodic effect — the loader's prefetch, a timer — cannot favour one arm).
// The optimizers of torch.optim with foreach=True, written with LibTorch's multi-tensor ops:
// a handful of ops per step instead of several per parameter. LibTorch's C++ optimizers have no
// foreach option. Same update rules as torch::optim::SGD (momentum, no dampening) and AdamW
// (decoupled weight decay, bias-corrected moments).
class ForeachOptimizer {
 public:
  ForeachOptimizer(std::vector<torch::Tensor> params, bool adamw, double lr)
      : params_(std::move(params)), adamw_(adamw), lr_(lr) {}
  // Returns false (nothing done) when some parameter has no gradient: the caller falls back.
  bool Step() {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> g;
    for (const auto& p : params_) {
      if (!p.grad().defined()) return false;
      g.push_back(p.grad());
    }
    ++step_;
    if (!adamw_) {
      if (buf_.empty()) {
        for (const auto& x : g) buf_.push_back(x.clone());
      } else {
        at::_foreach_mul_(buf_, 0.9);
        at::_foreach_add_(buf_, g);
      }
      at::_foreach_add_(params_, buf_, -lr_);
      return true;
    }
    constexpr double b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 1e-2;
    if (m_.empty()) {
      for (const auto& p : params_) {
        m_.push_back(torch::zeros_like(p));
        v_.push_back(torch::zeros_like(p));
      }
    }
    at::_foreach_mul_(params_, 1 - lr_ * wd);
    at::_foreach_mul_(m_, b1);
    at::_foreach_add_(m_, g, 1 - b1);
    at::_foreach_mul_(v_, b2);
    at::_foreach_addcmul_(v_, g, g, 1 - b2);
    const double bc1 = 1 - std::pow(b1, step_), bc2 = 1 - std::pow(b2, step_);
    auto denom = at::_foreach_sqrt(v_);
    at::_foreach_div_(denom, std::sqrt(bc2));
    at::_foreach_add_(denom, eps);
    at::_foreach_addcdiv_(params_, m_, denom, -lr_ / bc1);
    return true;
  }

 private:
  std::vector<torch::Tensor> params_, buf_, m_, v_;
  bool adamw_;
  double lr_;
  int64_t step_ = 0;
};

// This process's batch size. batch_skew moves that many samples from rank 0's batch to the last
// rank's in a --nproc run: uneven per-rank batches, the same global batch (so its fix compares
// like with like).
int64_t RankBatch(const Config& cfg) {
  const int rank = std::max(0, EnvInt("RANK", 0)), world = std::max(1, EnvInt("WORLD_SIZE", 1));
  const int64_t batch = cfg.Int("batch"), skew = std::clamp<int64_t>(cfg.Int("batch_skew"), 0, batch - 1);
  if (world < 2) return batch;
  return rank == world - 1 ? batch + skew : rank == 0 ? batch - skew : batch;
}

char AltArm(int64_t i) {
  static const char kPattern[] = {'A', 'B', 'B', 'A', 'B', 'A', 'A', 'B'};
  return kPattern[i % 8];
}

int Usage(const char* msg) {
  std::cerr << "trainrx-workload: error: " << msg
            << "\nusage: trainrx-workload cnn|lm [--set knob=value]... [--preset NAME] [-o TRACE | --no-trace] [--result JSON] [--alt-set knob=value]...\n";
  return 2;
}

// Where the step runs and how its tensors get there: the device, pinned copies, autocast.
struct Placement {
  bool cuda = false;
  torch::Device device = torch::Device(torch::kCPU);
  bool pin = false;
  std::string amp;
  bool channels_last = false;

  torch::Tensor ToDevice(torch::Tensor t) const {
    if (!cuda) return t;
    if (pin) t = t.pin_memory();
    return t.to(device, /*non_blocking=*/pin);
  }
};

// The model's parameters in channels-last layout (channels_last=1, cnn).
template <typename Model>
void ToChannelsLast(Model& model) {
  torch::NoGradGuard no_grad;
  for (auto& p : model.parameters())
    if (p.dim() == 4) p.set_data(p.data().contiguous(torch::MemoryFormat::ChannelsLast));
}

// A --nproc run's gradient all-reduce: the same initial weights on every rank (DDP broadcasts
// from rank 0), then the bucketed reducer.
template <typename Model>
std::unique_ptr<Reducer> JoinRanks(Model& model, const Config& cfg, int rank, int world) {
  auto pg = MakeGloo(rank, world);
  for (auto& p : model.parameters()) {
    std::vector<torch::Tensor> t{p.data()};
    pg->broadcast(t)->wait();
  }
  return std::make_unique<Reducer>(pg, model.parameters(), cfg.Double("bucket_mb"), world);
}

// The optimizer (AdamW for lm, SGD with momentum for cnn), its foreach twin, and the names of
// the ranges torch.optim records around step() and zero_grad().
struct Optimizers {
  std::vector<torch::Tensor> params;
  std::unique_ptr<torch::optim::Optimizer> opt;
  std::unique_ptr<ForeachOptimizer> foreach_opt;
  bool foreach = false;
  std::string zero_name, step_name;
};

template <typename Model>
Optimizers MakeOptimizers(Model& model, const std::string& name, const Config& cfg) {
  Optimizers o;
  o.params = model.parameters();
  if (name == "lm") o.opt = std::make_unique<torch::optim::AdamW>(o.params, torch::optim::AdamWOptions(3e-3));
  else o.opt = std::make_unique<torch::optim::SGD>(o.params, torch::optim::SGDOptions(0.05).momentum(0.9));
  o.foreach_opt = std::make_unique<ForeachOptimizer>(o.params, name == "lm", name == "lm" ? 3e-3 : 0.05);
  o.foreach = cfg.Bool("foreach");
  const char* opt_name = name == "lm" ? "AdamW" : "SGD";
  o.zero_name = std::string("Optimizer.zero_grad#") + opt_name + ".zero_grad";
  o.step_name = std::string("Optimizer.step#") + opt_name + ".step";
  return o;
}

// The optimizer phase of a step: step(), then zero_grad() (zeros, or None with zero_grad_none=1).
void OptimizerPhase(Optimizers& o, const Config& k) {
  tp::ScopedPhase p(tp::Phase::kOptimizer);
  {
    RECORD_USER_SCOPE(o.step_name.c_str());
    if (!o.foreach || !o.foreach_opt->Step()) o.opt->step();
  }
  RECORD_USER_SCOPE(o.zero_name.c_str());
  for (auto& p : o.params) {
    if (!p.grad().defined()) continue;
    if (k.Bool("zero_grad_none")) p.mutable_grad() = torch::Tensor();
    else p.mutable_grad().zero_();
  }
}

// The forward pass under autocast (amp=bf16/fp16) and the loss, in fp32.
template <typename Model>
torch::Tensor ForwardLoss(Model& model, torch::Tensor x, torch::Tensor y, const Placement& at) {
  SetAutocast(at.amp != "off", at.amp, at.cuda);
  auto out = model.forward(x);
  SetAutocast(false, at.amp, at.cuda);
  return torch::nn::functional::cross_entropy(out.to(torch::kFloat), y.reshape({-1}));
}

// This rank's part of a step's work: its micro-steps, and the straggler it may plant.
struct RankWork {
  int rank = 0, world = 1;
  int64_t accum = 1;
  double straggler_us = 0;  // per micro-step
};

// The step's micro-steps (data, forward, backward each, gradients all-reduced on the last unless
// accum_sync=1); returns the summed loss, not read.
template <typename Model, typename NextBatch>
torch::Tensor MicroSteps(Model& model, NextBatch& next_batch, const Placement& at, const RankWork& w, Reducer* reducer,
                         const Config& cfg, std::vector<torch::Tensor>& kept) {
  torch::Tensor loss_total = torch::zeros({}, torch::TensorOptions().device(at.device));
  for (int64_t m = 0; m < w.accum; ++m) {
    torch::Tensor x, y;
    {
      tp::ScopedPhase p(tp::Phase::kData);
      auto b = next_batch();
      x = at.ToDevice(b.data);
      y = at.ToDevice(b.target);
      if (at.channels_last) x = x.contiguous(torch::MemoryFormat::ChannelsLast);
    }
    torch::Tensor loss;
    {
      tp::ScopedPhase p(tp::Phase::kForward);
      loss = ForwardLoss(model, x, y, at) / static_cast<double>(w.accum);
      if (w.straggler_us > 0 && w.world > 1 && w.rank == w.world - 1) {  // the planted straggler
        RECORD_USER_SCOPE("trainrx::straggler");
        BusyWaitUs(w.straggler_us);
      }
    }
    {
      tp::ScopedPhase p(tp::Phase::kBackward);
      const bool last = m + 1 == w.accum;
      if (reducer) reducer->set_sync(last || cfg.Bool("accum_sync"));
      loss.backward();
      if (reducer) reducer->Finish();
    }
    // The planted leak (leak=1): a second forward "to log the predictions later", kept with its
    // graph and the activations it saved, never freed (memory.growth).
    if (cfg.Bool("leak")) kept.push_back(model.forward(x));
    loss_total += loss.detach();
  }
  return loss_total;
}

// The evaluation phase (eval_every): two batches forward, under no_grad unless eval_no_grad=0.
template <typename Model, typename NextBatch>
void Evaluate(Model& model, NextBatch& next_batch, const Placement& at, const Config& cfg) {
  tp::EndStep();
  tp::ScopedPhase p(tp::Phase::kEval);
  model.eval();
  for (int v = 0; v < 2; ++v) {
    auto b = next_batch();
    auto x = at.ToDevice(b.data);
    if (cfg.Bool("eval_no_grad")) {
      torch::NoGradGuard no_grad;
      model.forward(x);
    } else {
      model.forward(x);
    }
  }
  model.train();
}

// The run's result document (trainrx.run/1): knobs, per-step times and losses (read now: one sync
// after the loop), median and mean step, and throughput (from the mean). Returns 0, or 2 when it could not be written.
int WriteRunResult(const std::string& result_path, const std::string& name, const Config& cfg, bool alt,
                   const RankWork& w, int64_t warmup, int64_t batch, const std::vector<StepResult>& results,
                   const Reducer* reducer, const trainrx::profiler::CpuLoad& cpu) {
  std::vector<double> times;
  for (const auto& r : results) times.push_back(r.ms);
  std::sort(times.begin(), times.end());
  const double median = times.empty() ? 0 : times[times.size() / 2];
  // The time a step that throughput follows: the mean (a loader whose workers hand batches over in
  // bursts makes steps alternate, long and short, and the median is the short ones', issue 62).
  double mean = 0;
  for (double t : times) mean += t / static_cast<double>(times.size());
  std::ofstream out(result_path);
  trainrx::profiler::JsonWriter j(out, /*pretty=*/true);
  j.BeginObject();
  j.Field("schema", "trainrx.run/1");
  j.Field("workload", name);
  j.Field("rank", w.rank);
  j.Field("world_size", w.world);
  j.Key("knobs");
  j.BeginObject();
  for (const auto& [k, v] : cfg.values()) j.Field(k, v);
  j.EndObject();
  j.Field("changed", cfg.Changed());
  j.Key("steps");
  j.BeginArray();
  for (size_t i = 0; i < results.size(); ++i) {
    j.BeginObject();
    j.Field("step", static_cast<int64_t>(warmup + i));
    j.Field("ms", results[i].ms, 4);
    if (alt) j.Field("arm", std::string(1, results[i].arm));
    if (results[i].heap_bytes >= 0) j.Field("heap_bytes", results[i].heap_bytes);
    j.Field("loss", static_cast<double>(results[i].loss.item<float>()), 6);
    j.EndObject();
  }
  j.EndArray();
  j.Field("median_step_ms", median, 4);
  j.Field("mean_step_ms", mean, 4);
  j.Field("samples_per_s", mean > 0 ? 1000.0 * batch * w.accum * w.world / mean : 0.0, 2);
  if (!results.empty()) {
    j.Field("first_loss", static_cast<double>(results.front().loss.item<float>()), 6);
    j.Field("last_loss", static_cast<double>(results.back().loss.item<float>()), 6);
  }
  if (reducer) j.Field("allreduce_buckets", static_cast<int64_t>(reducer->buckets()));
  if (cpu.measured) {  // what the timed steps got of the CPUs (issue 60.5: a busy machine)
    j.Key("cpu");
    j.BeginObject();
    j.Field("wall_ns", cpu.wall_ns, 0);
    j.Field("run_ns", cpu.run_ns, 0);
    j.Field("wait_ns", cpu.wait_ns, 0);
    j.Field("involuntary", cpu.involuntary, 0);
    j.Field("children_ns", cpu.children_ns, 0);
    j.Field("others_ns", cpu.others_ns, 0);
    j.Field("cpus", cpu.cpus, 0);
    j.EndObject();
  }
  j.EndObject();
  out << "\n";
  return out ? 0 : 2;
}

template <typename Model, typename Data>
int Train(const std::string& name, const Config& cfg, const Config* alt, Model& model, Data dataset,
          const std::string& result_path) {
  RankWork w;
  w.rank = std::max(0, EnvInt("RANK", 0));
  w.world = std::max(1, EnvInt("WORLD_SIZE", 1));
  const int rank = w.rank, world = w.world;
  Placement at;
  at.cuda = cfg.Get("device") == "cuda";
  at.device = at.cuda ? torch::Device(torch::kCUDA, EnvInt("LOCAL_RANK", 0)) : torch::Device(torch::kCPU);
  const int64_t steps = cfg.Int("steps"), warmup = cfg.Int("warmup");
  const int64_t batch = RankBatch(cfg);
  w.accum = std::max<int64_t>(1, cfg.Int("grad_accum"));
  w.straggler_us = cfg.Double("straggler_ms") * 1000.0 / static_cast<double>(w.accum);
  at.pin = at.cuda && cfg.Bool("pin_memory");
  at.amp = cfg.Get("amp");
  at.channels_last = cfg.Bool("channels_last") && name == "cnn";
  model.to(at.device);
  if (at.channels_last) ToChannelsLast(model);

  std::unique_ptr<Reducer> reducer;
  if (world > 1) {
    if (cfg.Get("backend") != "gloo") return Usage("backend=nccl is not implemented in the C++ workloads yet (use gloo)");
    reducer = JoinRanks(model, cfg, rank, world);
  }

  const int64_t workers = cfg.Int("workers");
  auto loader = torch::data::make_data_loader(
      std::move(dataset).map(torch::data::transforms::Stack<>()),
      // Large enough never to run out (eval batches included): re-starting a LibTorch DataLoader
      // iterator mid-run is an error.
      torch::data::samplers::DistributedSequentialSampler(
          static_cast<size_t>(batch * ((warmup + steps) * (w.accum + 2) + 16) * world), world, rank),
      torch::data::DataLoaderOptions().batch_size(batch).workers(workers).max_jobs(std::max<int64_t>(1, workers * cfg.Int("prefetch"))));
  auto it = loader->begin();
  auto next_batch = [&]() {
    if (it == loader->end()) it = loader->begin();
    auto b = *it;
    ++it;
    return b;
  };

  Optimizers optimizers = MakeOptimizers(model, name, cfg);

  std::unique_ptr<torch::autograd::profiler::RecordProfile> legacy;
  std::ostringstream legacy_sink;
  if (cfg.Bool("profiler")) legacy = std::make_unique<torch::autograd::profiler::RecordProfile>(legacy_sink);

  std::vector<StepResult> results;
  std::vector<torch::Tensor> kept;  // leak=1
  torch::Tensor running = torch::zeros({}, torch::TensorOptions().device(at.device));
  const int64_t eval_every = cfg.Int("eval_every");
  model.train();
  trainrx::profiler::CpuWaitSample cpu_first;
  Clock::time_point timed_start;
  for (int64_t s = 0; s < warmup + steps; ++s) {
    if (s == warmup) {
      cpu_first = trainrx::profiler::ReadCpuWait(0);  // no child process: LibTorch's loader runs threads
      timed_start = Clock::now();
    }
    // With --alt-set, timed steps alternate between the two configurations (switchable knobs).
    const char arm = alt && s >= warmup ? AltArm(s - warmup) : 'A';
    const Config& k = arm == 'B' ? *alt : cfg;
    if (alt) torch::autograd::AnomalyMode::set_enabled(k.Bool("anomaly"));
    const double slowdown = k.Double("slowdown");
    const auto t0 = Clock::now();
    tp::MarkStep(s);
    torch::Tensor loss_total = MicroSteps(model, next_batch, at, w, reducer.get(), cfg, kept);
    OptimizerPhase(optimizers, k);
    if (k.Bool("item_every_step")) running += loss_total.item<float>();  // the planted sync
    else running += loss_total;
    if (cfg.Bool("empty_cache") && at.cuda) {
      // c10::cuda's allocator is not part of the CPU build's headers: not available here.
    }
    if (slowdown > 0) {
      RECORD_USER_SCOPE("trainrx::slowdown");
      BusyWaitUs(slowdown);
    }
    if (eval_every > 0 && (s + 1) % eval_every == 0) Evaluate(model, next_batch, at, cfg);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (s >= warmup) results.push_back({ms, arm, loss_total, trainrx::profiler::HeapInUseBytes()});
  }
  const trainrx::profiler::CpuLoad cpu = trainrx::profiler::LoadBetween(
      cpu_first, trainrx::profiler::ReadCpuWait(0),
      results.empty() ? 0.0 : std::chrono::duration<double, std::nano>(Clock::now() - timed_start).count());
  tp::EndStep();
  legacy.reset();
  tp::SetEnabled(false);  // reading the results back (one .item() per step) is not part of the run
  return WriteRunResult(result_path, name, cfg, alt != nullptr, w, warmup, batch, results, reducer.get(), cpu);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage("which workload? cnn or lm");
  const std::string name = argv[1];
  Config cfg;
  std::string trace = "trainrx_" + name + ".json", result = "";
  bool no_trace = false;  // experiments time the program itself, not the program under the probes
  std::vector<std::string> alt_sets;  // in-process A/B: B = the configuration with these
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const bool takes_value = a == "--set" || a == "--preset" || a == "-o" || a == "--result" || a == "--alt-set";
    if (takes_value && i + 1 >= argc) return Usage((a + " needs a value").c_str());
    if (a == "--set") {
      if (const auto st = cfg.Set(argv[++i]); !st.ok()) return Usage(st.message().c_str());
    } else if (a == "--preset") {
      if (const auto st = cfg.ApplyPreset(argv[++i]); !st.ok()) return Usage(st.message().c_str());
    } else if (a == "-o") {
      trace = argv[++i];
    } else if (a == "--result") {
      result = argv[++i];
    } else if (a == "--no-trace") {
      no_trace = true;
    } else if (a == "--alt-set") {
      alt_sets.push_back(argv[++i]);
    } else {
      return Usage(("unknown argument " + a).c_str());
    }
  }
  if (name != "cnn" && name != "lm") return Usage(("unknown workload '" + name + "'").c_str());
  std::unique_ptr<Config> alt;
  if (!alt_sets.empty()) {
    alt = std::make_unique<Config>(cfg);
    for (const auto& a : alt_sets) {
      const std::string knob = a.substr(0, a.find('='));
      if (!trainrx::workloads::IsSwitchable(knob))
        return Usage(("--alt-set " + knob + ": only " + trainrx::workloads::SwitchableKnobs() + " switch between steps").c_str());
      if (const auto st = alt->Set(a); !st.ok()) return Usage(st.message().c_str());
    }
  }
  if (result.empty()) result = trace + ".result.json";
  if (cfg.Get("device") == "cuda" && !torch::cuda::is_available()) return Usage("device=cuda but no CUDA device is available");
  if (cfg.Get("amp") == "fp16" && cfg.Get("device") != "cuda") return Usage("amp=fp16 needs device=cuda (use amp=bf16 on CPU)");
  if (cfg.Bool("empty_cache")) return Usage("empty_cache=1 is not implemented in the C++ workloads yet");

  // Process-wide switches first: the probes' snapshots read them.
  if (cfg.Bool("launch_blocking")) setenv("CUDA_LAUNCH_BLOCKING", "1", 1);
  if (cfg.Int("threads") > 0) at::set_num_threads(static_cast<int>(cfg.Int("threads")));
  at::globalContext().setBenchmarkCuDNN(cfg.Bool("cudnn_benchmark"));
  at::globalContext().setDeterministicCuDNN(cfg.Bool("cudnn_deterministic"));
  torch::autograd::AnomalyMode::set_enabled(cfg.Bool("anomaly"));
  torch::manual_seed(static_cast<uint64_t>(cfg.Int("seed")));

  tp::StartOptions options;
  options.output = trace;
  if (!no_trace && !tp::Start(options)) return 3;
  tp::SetConfig("workers", static_cast<double>(cfg.Int("workers")));
  tp::SetConfig("batch", static_cast<double>(RankBatch(cfg)));
  tp::SetConfigText("workload", name);
  tp::SetConfigText("knobs_changed", cfg.Changed());
  try {
    int rc = 0;
    const double cost = cfg.Double("data_cost");
    const uint64_t seed = static_cast<uint64_t>(cfg.Int("seed"));
    const int64_t n = 1 << 20;  // indices; samples are generated on demand
    if (name == "cnn") {
      Cnn model(cfg.Bool("bias"));
      rc = Train(name, cfg, alt.get(), model, Images(n, cost, seed), result);
    } else {
      Lm model(cfg.Bool("bias"));
      rc = Train(name, cfg, alt.get(), model, Tokens(n, cost, seed), result);
    }
    if (!no_trace && tp::Stop().empty()) return 3;
    return rc;
  } catch (const std::exception& e) {
    std::cerr << "trainrx-workload: error: " << e.what() << "\n";
    return 1;
  }
}
