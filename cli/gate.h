// `trainrx gate record-baseline | check | self-test`: options, files and exit codes around the
// gate in experiments/gate.h; reports/gate.h renders.
#pragma once

#include <string>
#include <vector>

#include "trainrx/experiments/gate.h"

namespace trainrx::cli {

struct GateOptions {
  experiments::GateRun run;
  std::vector<std::string> spec;  // after --: workload spec tokens or a command
  std::string output;             // record-baseline -o
  bool keep_trace = false;        // record-baseline --keep-trace
  std::string baseline, current;  // check
  std::string inconclusive = "error";  // exit 3; "pass" -> 0, "fail" -> 1
  std::string format = "text";    // text | md | junit | json
  std::string report;
  int repeats = 20;               // self-test
  bool across_processes = false;  // self-test: separate processes per side
  bool compare_rules = false;     // self-test: judge the same samples by stricter rules too
  std::vector<double> self_test_pcts = {0, 3, 5, 10};  // injected slowdowns, % (0 = A/A)
};

// Exit codes: 0 pass, 1 regression, 2 usage or input error, 3 inconclusive.
int GateRecordBaseline(GateOptions o);
int GateCheck(GateOptions o);
int GateSelfTest(GateOptions o);

}  // namespace trainrx::cli
