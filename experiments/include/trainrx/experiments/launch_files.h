// trainrx::experiments launch files — the traces a launch's processes wrote: the first process
// `base` ("run.json"), the others `base` tagged before its ".json" ("run.rank1.json",
// "run.pid77.json", "run.rank1.json.gz"). The names are built and parsed by profiler/trace_names.h
// (ProcessTracePath, RankTracePath, ParseTaggedTraceName), the one rule the probes follow too.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace trainrx::experiments {

// The traces a recorded launch wrote since `since`: `output` (the launched process, if it loaded
// torch) and the tagged files of its other processes, sorted.
std::vector<std::string> LaunchTraces(const std::filesystem::path& output, std::filesystem::file_time_type since);

// A process killed by SIGKILL or the OOM killer (or one that left through os._exit) runs no exit
// handler and writes no trace, only its journal ("<trace>.partial", probes/journal.h). Each such
// journal of this launch (the root's and its tagged children's, written since `since`, whose
// trace is missing) becomes the trace it stands for: read (the cut-off tail dropped and counted),
// marked incomplete with its end reason (`root_end_reason` for `output`'s, else "killed"), given
// its steps, written under the trace's name; the journal is then removed. `ended_ns` (wall
// clock) is when the launch was seen to end: the gap since the last flush is what is missing.
// Returns a line per journal for the user ("run.json: made from its journal ..."), errors included.
std::vector<std::string> FinishJournals(const std::filesystem::path& output, std::filesystem::file_time_type since,
                                        const std::string& root_end_reason, int64_t ended_ns);

}  // namespace trainrx::experiments
