#!/usr/bin/env bash
# scripts/include-floors (issue 83): the floors inside analyzers/ hold on the real tree, and the
# checker catches each kind of break on a made-up one (an include going up a floor, two analysis
# folders including each other, a folder with no floor), so a silent checker is not taken for a
# clean tree.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CHECK="$REPO/scripts/include-floors"
fail=0
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
out=$("$CHECK" "$REPO/analyzers"); rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: analyzers/ breaks its floors"; fail=1; }
mkdir -p "$W/a/families" "$W/a/dependency" "$W/a/cost" "$W/a/extra"
echo '#include "families/families.h"' > "$W/a/steps.cc"          # floor 0 -> floor 1
echo '' > "$W/a/families/families.h"
echo '#include "dependency/dependency.h"' > "$W/a/cost/utilization.cc"
echo '#include "cost/cost.h"' > "$W/a/dependency/dependency.h"  # cost <-> dependency
echo '' > "$W/a/cost/cost.h"
echo '' > "$W/a/extra/new.cc"
out=$("$CHECK" "$W/a"); rc=$?
echo "$out" | sed 's/^/  made-up: /'
for want in "steps.cc:1: #include \"families/families.h\": up from floor 0" "cost/ and dependency/ include each other" \
            "analyzers/extra/ has no floor"; do
  echo "$out" | grep -qF "$want" || { echo "FAIL: the checker missed: $want"; fail=1; }
done
[ $rc -eq 1 ] || { echo "FAIL: the checker exited $rc on a broken tree"; fail=1; }
[ $fail -eq 0 ] && echo "ok: analyzers/ keeps its floors; the checker catches each kind of break"
exit $fail
