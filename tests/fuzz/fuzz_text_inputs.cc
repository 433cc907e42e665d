// libFuzzer target: the small text inputs trainrx parses from users and files. The first byte picks
// the parser: a workload SPEC (`trainrx run cnn --set workers=0`, `ab "cnn workers=0" ...`), a
// threshold assignment (--threshold key=value), a gate baseline document, a run result document.
// None may crash or trip a sanitizer; each either parses or says why.
#include <cstddef>
#include <cstdint>
#include <string>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/experiments/gate.h"
#include "trainrx/experiments/run_result.h"
#include "trainrx/experiments/spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainrx;
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      experiments::Spec spec;
      (void)experiments::ParseSpec(text, &spec);
      break;
    }
    case 1: {
      analyzers::Thresholds th;
      (void)th.Parse(text);
      break;
    }
    case 2: {
      experiments::Baseline b;
      (void)experiments::ParseBaseline(text, "fuzz.baseline.json", &b);
      break;
    }
    default: {
      experiments::RunResult r;
      (void)experiments::ParseRunResult(text, "fuzz.result.json", &r);
      break;
    }
  }
  return 0;
}
