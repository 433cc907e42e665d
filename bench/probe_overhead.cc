// Probe overhead, measured side by side in one process (these machines are noisy): a tight loop of
// 1-element at::add (cost per op) and a small CNN training step (cost per step), each run four
// ways, interleaved round by round: plain, under the trainrx probes, under torch.profiler's own
// backend (the Kineto profiler with CPU activity, what `torch.profiler.profile()` enables), and
// under LibTorch's legacy profiler (RecordProfile). Prints medians and the ratios issue 16 targets:
//   per op: trainrx adds <= 1/5 of what torch.profiler adds
//   per step: trainrx adds <= 3 % to the median step
// TRAINRX_PROBE_FLOOR=1 swaps the probes' callback for one that records nothing: what LibTorch's
// RecordFunction machinery costs any global observer.
// Usage: trainrx_probe_bench [rounds=7]
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <set>
#include <sstream>
#include <vector>

#include "torch_profiler_start.h"
#include "trainrx/probes/probes.h"

namespace tp = trainrx::probes;
using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double OpsNs(int n) {
  auto a = torch::ones({1});
  auto b = torch::ones({1});
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) a = at::add(a, b);
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / n;
}

struct Net : torch::nn::Module {
  Net()
      : c1(register_module("c1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 32, 3).padding(1).bias(false)))),
        b1(register_module("b1", torch::nn::BatchNorm2d(32))),
        c2(register_module("c2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 32, 3).padding(1).bias(false)))),
        b2(register_module("b2", torch::nn::BatchNorm2d(32))),
        fc(register_module("fc", torch::nn::Linear(32, 10))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(b1(c1(x)));
    x = torch::relu(b2(c2(x)));
    return fc(torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1));
  }
  torch::nn::Conv2d c1;
  torch::nn::BatchNorm2d b1;
  torch::nn::Conv2d c2;
  torch::nn::BatchNorm2d b2;
  torch::nn::Linear fc;
};

double StepMs(Net& net, torch::optim::SGD& opt, const torch::Tensor& x, const torch::Tensor& y, int steps) {
  std::vector<double> t;
  for (int s = 0; s < steps; ++s) {
    const auto t0 = Clock::now();
    opt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(net.forward(x), y);
    loss.backward();
    opt.step();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return Median(t);
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
  const int ops = 20000, steps = 20;
  torch::manual_seed(0);
  tp::StartOptions o;
  o.output = "/tmp/trainrx_probe_bench.json";
  o.input_capture_steps = 0;  // steady state: no inputs boxed
  o.max_events = 50'000'000;
  tp::Start(o);
  tp::SetEnabled(false);
  Net net;
  torch::optim::SGD opt(net.parameters(), torch::optim::SGDOptions(0.01));
  auto x = torch::randn({16, 3, 16, 16});
  auto y = torch::randint(0, 10, {16});
  StepMs(net, opt, x, y, 5);  // warm-up
  OpsNs(ops);
  std::vector<double> op_plain, op_trainrx, op_legacy, st_plain, st_trainrx, st_legacy, op_kineto, st_kineto;
  bool kineto = true;
  for (int r = 0; r < rounds; ++r) {
    op_plain.push_back(OpsNs(ops));
    st_plain.push_back(StepMs(net, opt, x, y, steps));
    tp::SetEnabled(true);
    op_trainrx.push_back(OpsNs(ops));
    st_trainrx.push_back(StepMs(net, opt, x, y, steps));
    tp::SetEnabled(false);
    if (kineto && (kineto = StartTorchProfiler())) {
      op_kineto.push_back(OpsNs(ops));
      st_kineto.push_back(StepMs(net, opt, x, y, steps));
      torch::autograd::profiler::disableProfiler();  // its events are collected and dropped here, outside the timed parts
    }
    {
      std::ostringstream sink;
      torch::autograd::profiler::RecordProfile legacy(sink);
      op_legacy.push_back(OpsNs(ops));
      st_legacy.push_back(StepMs(net, opt, x, y, steps));
    }
  }
  const double p = Median(op_plain), t = Median(op_trainrx), l = Median(op_legacy);
  const double k = kineto ? Median(op_kineto) : 0;
  std::printf("per op (1-element at::add, %d ops x %d rounds, medians):\n", ops, rounds);
  std::printf("  plain %.0f ns   trainrx %.0f ns (+%.0f)", p, t, t - p);
  if (kineto) std::printf("   torch.profiler %.0f ns (+%.0f)", k, k - p);
  std::printf("   legacy profiler %.0f ns (+%.0f)\n", l, l - p);
  if (kineto) {
    std::printf("  trainrx adds %.0f ns/op = %.2f of torch.profiler's addition (target <= 0.20)\n", t - p,
                (t - p) / std::max(1.0, k - p));
  }
  std::printf("  trainrx adds %.2f of the legacy profiler's addition\n", (t - p) / std::max(1.0, l - p));
  const double sp = Median(st_plain), stx = Median(st_trainrx), sl = Median(st_legacy);
  std::printf("per CNN step (%d steps x %d rounds, medians of medians):\n", steps, rounds);
  std::printf("  plain %.3f ms   trainrx %.3f ms (%+.2f%%)", sp, stx, 100 * (stx / sp - 1));
  if (kineto) {
    const double sk = Median(st_kineto);
    std::printf("   torch.profiler %.3f ms (%+.2f%%)", sk, 100 * (sk / sp - 1));
  }
  std::printf("   legacy profiler %.3f ms (%+.2f%%)   target <= 3%%\n", sl, 100 * (sl / sp - 1));
  tp::Stop();
  return 0;
}
