#include "trainrx/sets/convert.h"

#include <fmt/format.h>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/reader.h"
#include "trainrx/profiler/kineto_writer.h"
#include "trainrx/profiler/trace_names.h"

namespace trainrx::sets {

Status ConvertTraces(const std::vector<std::string>& paths, const std::string& output, bool keep_clocks,
                     std::ostream& log) {
  profiler::Trace trace;
  if (Status st = profiler::ReadTraces(paths, trace); !st.ok()) return st;
  if (!keep_clocks) {
    for (const auto& c : analyzers::AlignRankClocks(trace))
      if (c.status != "reference") log << fmt::format("rank {}: {}\n", c.rank, c.why);
  }
  const auto ranks = trace.RankIds();
  for (int32_t rank : ranks) {
    // Several ranks: one file each, named as a launch's ranks name theirs ("out.rank1.json").
    const std::string path = ranks.size() > 1 ? profiler::RankTracePath(output, rank) : output;
    if (Status st = profiler::WriteKinetoFile(trace, rank, path); !st.ok()) return st;
    log << fmt::format("wrote rank {} to {}\n", rank, path);
  }
  return {};
}

}  // namespace trainrx::sets
