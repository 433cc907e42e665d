// trainrx::analyzers compile — the time a run spent compiling with torch.compile, for the experiment
// engine: `ab --cmd` times its trials by their steady steps (the compile falls outside them), and
// states each side's compile time beside them so that "compiled is 10 % faster a step" comes with
// "after 18 s of compiling: it pays back after N steps". Pure; no I/O.
#pragma once

#include <cstdint>

#include "trainrx/profiler/trace.h"

namespace trainrx::analyzers {

// The summed time of the outermost compilations on `rank`'s CPU threads: the start-up hook's
// "trainrx::compile <id>" ranges (trainrx record), else torch.profiler's "_compile.compile_inner"
// spans (dynamo's, while a profiler runs). 0 when the trace has neither.
int64_t CompileTimeNs(const profiler::Trace& trace, int32_t rank);

}  // namespace trainrx::analyzers
