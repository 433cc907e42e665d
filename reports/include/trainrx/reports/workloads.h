// trainrx::reports workloads — `trainrx workloads`: the reference workloads, their knobs (with
// the finding each fixes) and presets, from the knob table (workloads/knobs.h).
#pragma once

#include <ostream>

namespace trainrx::reports {

void WriteWorkloads(std::ostream& out);

}  // namespace trainrx::reports
