#!/bin/bash
# One error shape across the commands (issue 35.5, cli/terminal.h): a sample of bad inputs, each
# must exit 2 with its first stderr line "trainrx: error: SUBJECT: WHAT", SUBJECT the thing the user
# gave that is wrong (checked per case), any further lines indented (a list to choose from), and no
# CLI11 "Run with --help", no crash. Nothing here runs a workload or needs torch: ~1 s.
# usage: errors_test.sh path/to/trainrx
trainrx=${1:?usage: errors_test.sh TRAINRX}
PY=python3
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "not json" >"$tmp/bad.txt"
echo '{"a": 1}' >"$tmp/notrace.json"

# expect SUBJECT ARGS...: run trainrx ARGS, check the exit code and the error's shape and subject.
expect() {
  local subject=$1
  shift
  "$trainrx" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$? first rest
  first=$(head -n 1 "$tmp/err")
  rest=$(tail -n +2 "$tmp/err" | grep -v '^ ' | head -n 1)
  local what="trainrx $*"
  if [ $rc -ne 2 ]; then
    bad "$what: exit $rc, expected 2 ($(head -c 200 "$tmp/err"))"
  elif [[ "$first" != "trainrx: error: $subject: "?* ]]; then
    bad "$what: first line is not 'trainrx: error: $subject: WHAT': $first"
  elif [ -n "$rest" ]; then
    bad "$what: a second line that is not indented: $rest"
  elif grep -q -e "Run with --help" -e "terminate called" -e "internal error" "$tmp/err"; then
    bad "$what: not in trainrx's shape: $(cat "$tmp/err")"
  else
    ok "$what -> ${first:0:110}"
  fi
}

expect "$tmp/missing.json" analyze "$tmp/missing.json"
expect "$tmp/bad.txt" analyze "$tmp/bad.txt"
expect "$tmp/notrace.json" analyze "$tmp/notrace.json"
expect "analyze" analyze
expect "analyze" analyze --sample "$tmp/bad.txt"
expect "analyze" analyze --sample --bogus
expect "analyze" analyze --sample --format xml
expect "--threshold nope=1" analyze --sample --threshold nope=1
expect "--what-if nope" analyze --sample --what-if nope
expect "sample_cpu_training.json.gz" analyze --sample --step nosuch
expect "$tmp/missing.json" diff "$tmp/missing.json" "$tmp/bad.txt"
expect "$tmp/bad.txt" summarize -o "$tmp/s" "$tmp/bad.txt"
expect "$tmp/bad.txt" convert -o "$tmp/c" "$tmp/bad.txt"
expect "anlyze" anlyze "$tmp/bad.txt"
expect "--memory-cap lots" record --memory-cap lots -o "$tmp/r.json" -- true
expect "record" record -o "$tmp/r.json" --format json -- true
expect "gpt" run gpt
expect "--set nosuch=1" run cnn --set nosuch=1
expect "--set workers=x" run cnn --set workers=x
expect "--preset nosuch" run cnn --preset nosuch
expect "'nosuch=1'" fix cnn --set nosuch=1
expect "'preset=nosuch'" fix cnn --preset nosuch
expect "fix" fix
expect "--cmd" fix cnn --cmd "python3 train.py"
expect "--also" fix cnn --also fused
expect "--also amp" fix --cmd "python3 train.py" --also amp
expect "--also workers" fix --cmd "python3 train.py" --also workers
expect "--memory-cap lots" sweep cnn --grid workers=0,1 --memory-cap lots
expect "ab" ab --a cnn
expect "'gpt'" ab --a cnn --b gpt
expect "--trials" ab --a cnn --b "cnn slowdown=5" --trials 3
expect "--grid workers" sweep cnn --grid workers
expect "gate" gate --baseline "$tmp/missing.json" -- cnn
expect "gate check" gate check
exit $fail
