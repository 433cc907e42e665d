/* Callgrind's instrumentation switched from Python (ctypes) around the steps a bench counts
 * (bench/step_instructions.py): the program runs under `valgrind --tool=callgrind
 * --instr-atstart=no` at near full speed through its start-up (torch's import), and only the
 * steady steps are counted. Outside valgrind the client requests do nothing. */
#include <valgrind/callgrind.h>

extern "C" {
void trainrx_bench_instr_on() { CALLGRIND_START_INSTRUMENTATION; }
void trainrx_bench_instr_off() { CALLGRIND_STOP_INSTRUMENTATION; }
}
