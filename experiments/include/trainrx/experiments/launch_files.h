// trainrx::experiments launch files — where a launch's processes write their traces: the first
// process `base` ("run.json"), the others `base` tagged before its ".json" ("run.rank1.json",
// "run.pid77.json", "run.rank1.json.gz"). The probes' ChildOutputPath (probes/session.cc, built
// against LibTorch) follows the same rule; tests/experiments checks the two agree on examples.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace trainrx::experiments {

// "dir/run.json" + ".rank1" -> "dir/run.rank1.json"; without ".json" in the file name the tag
// goes at the end.
std::string TaggedTracePath(const std::string& base, const std::string& tag);
inline std::string RankTracePath(const std::string& base, int rank) {
  return TaggedTracePath(base, ".rank" + std::to_string(rank));
}

// The traces a recorded launch wrote since `since`: `output` (the launched process, if it loaded
// torch) and the tagged files of its other processes, sorted.
std::vector<std::string> LaunchTraces(const std::filesystem::path& output, std::filesystem::file_time_type since);

}  // namespace trainrx::experiments
