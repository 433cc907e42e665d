// The predictions' measured record, per transform (issue 79.7): how many of its predictions were
// measured by a rerun and how many of those measured a significant saving outside the predicted
// interval. `fix --skip-unlikely` skips a row only where its transform's record allows it.
//
// Every figure below is a measurement written in docs/what-if.md or docs/gpu-validation.md (the
// command and the machine are there); a row is one fix measured on one script and machine.
#include <fmt/format.h>

#include <string_view>
#include <vector>

#include "trainrx/experiments/plans.h"

namespace trainrx::experiments {

namespace {

const std::vector<TransformRecord>& Records() {
  static const std::vector<TransformRecord> k = {
      {"anomaly_off", 4, 2,
       "fix cnn on CPU 82.9 % [56.0, 86.4] measured 84.2 %, and on 2026-11-27 86.1 % [59.1, 88.9] measured 85.5 %; on "
       "an H200 83.9 % [61.2, 85.6] measured 85.9 %; an op-heavy CNN script 20.5 % [16, 22] measured 15.2 %"},
      {"loader_workers", 11, 4,
       "fix cnn 8.8 % [-1.0, 9.9] measured 13.0 %, and on 2026-11-27 5.7 % [-1.4, 6.3] measured 6.1 %; a CNN script "
       "-5.8 % [-9.7, 48.4] measured -19.2 %; a script with a DataLoader per training -57.8 % measured 12.7x slower; "
       "imagenet 0.7 % [-1.2, 7.9] measured -11.4 %; tb-plugin's public pair within 5 points; the corpus's DDP "
       "tutorial, one rank and two: not predictable (wider than 50 points), measured 5.0x and 2.1x slower; 2026-11-28 "
       "14:27: one rank not predictable, measured 4.7x slower, two ranks (each rank's share of the CPUs since) not "
       "predictable, measured 1.9x slower (no significant difference); Lightning's Transformer 0.1 % [-1.1, 0.3] "
       "measured -6.9 % (no significant difference)"},
      {"eval_no_grad", 2, 2,
       "fix cnn 0.0 % [0.0, 0.0] measured 17.0 % (the replay left evaluation out); on 2026-11-27, the work between "
       "steps replayed, 12.4 % [9.1, 12.4] measured 16.3 %"},
      {"drop_bias", 2, 1, "fix cnn: no prediction, measured 14.8 %; on 2026-11-27 9.7 % [4.9, 14.5] measured 13.6 %"},
      {"fused_optimizer", 53, 7,
       "four public scripts (LSTM and Transformer LMs, a GAN, a GPT): 3.9 % [2.4, 4.9] measured 6.4 %, 3.6 % [2.5, "
       "4.3] measured 5.7 %, 6.5 % [4.8, 7.5] measured 7.9 %, one inside; the corpus (bench/prediction), 2026-11-27: "
       "4 of 5 significant savings inside (nanoGPT with 4 micro-batches 5.8 % [3.8, 7.0] measured 8.3 %), 2 rows no "
       "difference; 2026-11-28, with the --also rows: 3 of 5 inside (nanoGPT 11.0 % [7.5, 13.0] measured 6.6 %, with "
       "4 micro-batches 5.8 % [3.9, 7.0] measured 9.1 %), 6 rows no difference; 2026-11-28 14:27, 17 scripts, the "
       "intervals calibrated on the two runs before (2.1 points each side): 7 of 8 significant savings inside "
       "(nanoGPT with 4 micro-batches 7.0 % [2.5, 10.5] measured 11.2 %), 7 rows no difference; that script alone "
       "again 6.0 % [0.8, 10.4] measured 8.5 %; 2026-11-28 17:56, 17 scripts, calibrated on the runs before (2.8 "
       "points each side): 9 of 9 significant savings inside, 6 rows no difference; intervals since calibrated on "
       "all four runs (1.9 points each side)"},
      {"foreach_optimizer", 34, 5,
       "not predictable on a CPU-only rank; the corpus's 9 --also rows (2026-11-28 06:09): 8 no difference, nanoGPT "
       "4.9 % slower; 12 rows at 14:27: 10 no difference, nanoGPT 5.6 % slower, makemore's GRU 2.8 % faster; 12 rows "
       "at 17:56: 10 no difference, nanoGPT 5.7 % slower, makemore's Transformer 3.0 % faster"},
      {"unblock_syncs", 2, 0, "fix cnn on CPU and on an H200: 0.0 % predicted, 1.1 % [-6.8, 5.0] measured (no difference)"},
      {"zero_grad_none", 30, 0,
       "fix cnn on CPU, twice: 0.0 % predicted, +0.4 % and -0.1 % measured (no difference); the corpus's 5 --also rows "
       "(2026-11-28 06:09): 0.0 % predicted, -3.0 to +0.6 % measured (no difference); 11 rows at 14:27: -4.7 to "
       "+16.6 % measured, none significant; 12 rows at 17:54-17:56, none significant; intervals since calibrated "
       "(1.4 points each side)"},
      {"cuda_graphs", 1, 0, "train_gpu.py on an H200 43.7 % [25.0, 51.3] measured 44.9 %"},
      {"tf32", 4, 1,
       "an H200 GPU-bound CNN 15.1 % [10.3, 17.4] measured about 35 % (since corrected); on 2026-11-28 the same CNN "
       "34.7 % [11.2, 52.7] measured 34.8 %, an MLP not predictable measured 80.3 %, ResNet-18 33.4 % [15.7, 49.8] "
       "measured 40.6 % (docs/gpu-validation.md's accuracy table)"},
      {"amp_bf16", 5, 2,
       "an H200 GPU-bound CNN 21.0 % [8.0, 26.9] measured about 2 % (since recalibrated on that pair); at batch 1024 "
       "-0.0 % measured 19.7 % (the runs' data generation); on 2026-11-28 an MLP not predictable measured 35.9 %, "
       "ResNet-18 -2.3 % [-6.5, 1.8] measured -12.0 % (undecided)"},
      {"compile_fusion", 5, 4,
       "H200 pairs, 2026-11-28: a device-bound CNN 19.5 % [2.4, 29.1] measured 77.6 % and in fp32 6.0 % [0.8, 8.9] "
       "measured 59.3 %, an MLP 21.4 % [8.0, 26.8] measured 7.1 %, ResNet-18 21.5 % [9.5, 23.2] measured 25.7 % "
       "(refitted on the first three since); a host-bound CNN 6.2 % measured no difference"},
  };
  return k;
}

}  // namespace

const TransformRecord* FindTransformRecord(std::string_view transform) {
  for (const TransformRecord& r : Records())
    if (transform == r.transform) return &r;
  return nullptr;
}

std::string RecordText(const TransformRecord* record, std::string_view transform) {
  return record != nullptr ? record->Text() : fmt::format("{}: never measured against a rerun", transform);
}

bool TransformRecord::AllowsSkip() const { return rows >= kRowsToSkip && missed == 0; }

std::string TransformRecord::Text() const {
  return fmt::format("{}: {} measured row{}, {} with a significant saving outside its interval ({})", transform, rows,
                     rows == 1 ? "" : "s", missed, source);
}

}  // namespace trainrx::experiments
