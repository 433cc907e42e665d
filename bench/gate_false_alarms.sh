#!/usr/bin/env bash
# The gate's false-alarm and detection rates, measured through its own decision path
# (`trainrx gate self-test`, experiments::SelfTest -> DecideGate) on the reference cnn workload:
#   in-process:       AA_INPROC A/A decisions (up to 3 processes of paired A/B blocks each, a look
#                     after each: experiments/gate_sequential.h), then
#                     DETECT decisions each for 3 %, 5 % and 10 % slowdowns;
#   across processes: AA_ACROSS A/A decisions (6 processes per side, interleaved; the two-sample
#                     rule the gate applies to stored samples and commands), then DETECT each.
# Each line gives the rate with its 95 % Wilson interval, for the gate's rule and (--compare-rules)
# three stricter rules judged on the same samples. Target: false alarms <= 1 %, the
# interval's upper end under 2 %.
# A copy: TRAINRX=/tmp/b/trainrx LD_LIBRARY_PATH=/tmp/b (the workload binary finds its probe there first).
# Usage: bench/gate_false_alarms.sh [AA_INPROC=300] [AA_ACROSS=150] [DETECT=40]   (~70 min here)
set -euo pipefail
cd "$(dirname "$0")/.."
aa_in=${1:-300}; aa_across=${2:-150}; detect=${3:-40}
spec="cnn steps=10 eval_every=0"
T=${TRAINRX:-build/trainrx}  # TRAINRX=copy/trainrx: a copy, so that rebuilding build/ meanwhile cannot break the run
echo "== in-process (paired blocks), $(date -u +%FT%TZ)"
$T gate self-test --compare-rules --repeats "$aa_in" --trials 3 --slowdowns 0 -- "$spec"
$T gate self-test --compare-rules --repeats "$detect" --trials 3 --slowdowns 3,5,10 -- "$spec"
echo "== across processes (two-sample), $(date -u +%FT%TZ)"
$T gate self-test --compare-rules --across-processes --repeats "$aa_across" --trials 6 --slowdowns 0 -- "$spec"
$T gate self-test --compare-rules --across-processes --repeats "$detect" --trials 6 --slowdowns 3,5,10 -- "$spec"
echo "== done $(date -u +%FT%TZ)"
