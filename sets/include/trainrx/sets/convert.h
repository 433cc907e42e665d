// trainrx::sets convert — `trainrx convert`: any supported trace(s) read and written back as
// Kineto JSON (Perfetto, HTA), the ranks' clocks aligned as `analyze` aligns them.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "trainrx/profiler/status.h"

namespace trainrx::sets {

// Reads `paths`, aligns the ranks' clocks unless keep_clocks (each rank that is not the reference
// said on `log` with why), and writes `output`, or with several ranks one file per rank named as
// a launch's ranks name theirs ("out.rank1.json"), each said on `log`. An error when a read or a
// write failed.
Status ConvertTraces(const std::vector<std::string>& paths, const std::string& output, bool keep_clocks,
                     std::ostream& log);

}  // namespace trainrx::sets
