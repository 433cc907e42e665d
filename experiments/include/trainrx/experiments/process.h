// trainrx::experiments process — the one place trainrx starts programs (fork/exec/wait), used by
// `record`, `run` (one process per rank) and the trial launcher.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "trainrx/profiler/status.h"

namespace trainrx::experiments {

struct EnvChange {
  // kPrepend: "value:old" (LD_PRELOAD); kOwnPid: the started process's own pid (value unused).
  enum Mode { kSet, kSetIfUnset, kPrepend, kUnset, kOwnPid };
  std::string name, value;
  Mode mode = kSet;
};

struct ProcessSpec {
  std::vector<std::string> argv;  // argv[0] is the program
  // Look argv[0] up in PATH (a user's command), else a path. A user's command's leading NAME=value
  // words are set in its environment, as a shell does (`record -- VAR=1 python train.py`).
  bool search_path = false;
  std::vector<EnvChange> env;     // applied in order, in the child only
  std::string log;                // stdout and stderr to this file; "" keeps ours
  // > 0: the child's RLIMIT_DATA (its writable private memory: heap, tensors, thread stacks), the
  // CPU stand-in for a device's capacity (`sweep --memory-cap`); allocations past it fail.
  uint64_t data_limit_bytes = 0;
};

// How many of a user's command's first words are NAME=value assignments (a program follows them).
size_t LeadingAssignments(const std::vector<std::string>& argv);

// Starts the program: its pid, or an error when fork fails (kInternal when spec.argv is empty: the
// caller's bug). A program that cannot be executed exits 127 after saying so on its stderr (the
// log, if any).
StatusOr<pid_t> StartProcess(const ProcessSpec& spec);
// Waits (through EINTR) and returns the exit code, 128+N when signal N ended it.
int WaitProcess(pid_t pid);
// Whether the process has ended (its code in *code, as WaitProcess), without waiting.
bool ProcessEnded(pid_t pid, int* code);
// Start and wait: the exit code (as WaitProcess), or StartProcess's error.
StatusOr<int> RunProcess(const ProcessSpec& spec);

// Splits a command line into words as a shell would, without running one: quotes and escapes are
// honoured. Empty when the line needs a shell (pipes, redirections, `;`, `&&`, $VAR, globs, $(...),
// a leading VAR=value).
std::vector<std::string> SplitCommand(const std::string& command);

// Whether a failed run's log says it ran out of memory (torch's CPU allocator: "can't allocate
// memory"; CUDA's OutOfMemoryError / "CUDA out of memory"; Python's MemoryError; std::bad_alloc),
// with the request's size when the message gives it ("tried to allocate 1200000000 bytes",
// "Tried to allocate 2.00 GiB") and the line that said so.
struct OutOfMemory {
  bool found = false;
  int64_t request_bytes = 0;
  std::string line;
};
OutOfMemory FindOutOfMemory(const std::string& log_text);

// A file's whole text ("" when it cannot be read).
std::string FileText(const std::string& path);
// The last `max_bytes` of a log file (error messages about a failed trial).
std::string LogTail(const std::string& path, size_t max_bytes = 600);

}  // namespace trainrx::experiments
