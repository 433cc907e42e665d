// A LibTorch training program that uses the trainrx C++ API, with the same switchable planted
// problems as tests/python/train_planted.py. tests/e2e/record_test.sh checks that it produces the
// same findings for the same problems, and none when clean.
//
//   planted_train OUT.json [--costly-data] [--item] [--anomaly] [--conv-bias] [--eval-grad] [--all-problems]
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "trainrx/probes/probes.h"

namespace tp = trainrx::probes;

struct Net : torch::nn::Module {
  explicit Net(bool bias)
      : c1(register_module("c1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 32, 3).padding(1).bias(bias)))),
        b1(register_module("b1", torch::nn::BatchNorm2d(32))),
        c2(register_module("c2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 32, 3).padding(1).bias(bias)))),
        b2(register_module("b2", torch::nn::BatchNorm2d(32))),
        fc(register_module("fc", torch::nn::Linear(32, 10))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(b1(c1(x)));
    x = torch::relu(b2(c2(x)));
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return fc(x);
  }
  torch::nn::Conv2d c1;
  torch::nn::BatchNorm2d b1;
  torch::nn::Conv2d c2;
  torch::nn::BatchNorm2d b2;
  torch::nn::Linear fc;
};

// In-process loading (workers = 0); with costly=true each sample costs ~5 ms of CPU (anomaly
// mode, planted with it, makes a torch 2.x step ~0.5 s here: the wait must still stand out).
std::pair<torch::Tensor, torch::Tensor> LoadBatch(int step, int batch, bool costly) {
  torch::manual_seed(1000 + step);
  auto x = torch::randn({batch, 3, 16, 16});
  auto y = torch::randint(0, 10, {batch});
  if (costly) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(5000 * batch);
    while (std::chrono::steady_clock::now() < until) {
    }
  }
  return {x, y};
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: planted_train OUT.json [--costly-data] [--item] [--anomaly] [--conv-bias] [--eval-grad] [--all-problems]\n");
    return 2;
  }
  bool costly = false, item = false, anomaly = false, bias = false, eval_grad = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const bool all = a == "--all-problems";
    costly |= all || a == "--costly-data";
    item |= all || a == "--item";
    anomaly |= all || a == "--anomaly";
    bias |= all || a == "--conv-bias";
    eval_grad |= all || a == "--eval-grad";
  }
  tp::StartOptions options;
  options.output = argv[1];
  if (!tp::Start(options)) return 3;
  tp::SetConfig("workers", 0);
  torch::manual_seed(0);
  if (anomaly) torch::autograd::AnomalyMode::set_enabled(true);
  Net net(bias);
  torch::optim::SGD opt(net.parameters(), torch::optim::SGDOptions(0.05));
  const int steps = 12, batch = 16;
  auto running = torch::zeros({});
  net.train();
  for (int s = 0; s < steps; ++s) {
    tp::MarkStep(s);
    torch::Tensor x, y;
    {
      tp::ScopedPhase p(tp::Phase::kData);
      std::tie(x, y) = LoadBatch(s, batch, costly);
    }
    torch::Tensor loss;
    {
      tp::ScopedPhase p(tp::Phase::kForward);
      opt.zero_grad();
      loss = torch::nn::functional::cross_entropy(net.forward(x), y);
    }
    {
      tp::ScopedPhase p(tp::Phase::kBackward);
      loss.backward();
    }
    {
      tp::ScopedPhase p(tp::Phase::kOptimizer);
      opt.step();
    }
    if (item) running += loss.item<float>();
    else running += loss.detach();
  }
  tp::EndStep();
  net.eval();
  int64_t correct = 0;
  {
    tp::ScopedPhase p(tp::Phase::kEval);
    for (int v = 0; v < 3; ++v) {
      auto [x, y] = LoadBatch(100 + v, batch, false);
      if (eval_grad) {
        correct += (net.forward(x).argmax(1) == y).sum().item<int64_t>();
      } else {
        torch::NoGradGuard no_grad;
        correct += (net.forward(x).argmax(1) == y).sum().item<int64_t>();
      }
    }
  }
  std::printf("mean loss %.6f\nval correct %lld\n", running.item<float>() / steps, static_cast<long long>(correct));
  const std::string written = tp::Stop();
  return written.empty() ? 4 : 0;
}
