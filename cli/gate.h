// `trainrx gate`: see gate.cc and reports/gate.h.
#pragma once

#include <string>
#include <vector>

#include "trainrx/reports/gate.h"

namespace trainrx::cli {

struct GateOptions {
  std::vector<std::string> spec;  // after --: workload spec tokens or a command
  bool command = false;           // --cmd
  std::string output;             // record-baseline -o
  std::string baseline, current;  // check
  int trials = 6;
  double budget_s = 0;
  bool strict = false;
  bool stored_only = false;       // never re-run the baseline spec
  std::string inconclusive = "error";  // exit 3; "pass" -> 0, "fail" -> 1
  std::string format = "text";    // text | md | junit | json
  std::string report;
  int repeats = 20;               // self-test
  std::vector<double> self_test_pcts = {0, 5, 10};  // injected slowdowns, % (0 = A/A)
  reports::GateRule rule;
  std::string torch_version;
};

// Exit codes: 0 pass, 1 regression, 2 usage or input error, 3 inconclusive.
int GateRecordBaseline(const GateOptions& o);
int GateCheck(const GateOptions& o);
int GateSelfTest(const GateOptions& o);

}  // namespace trainrx::cli
