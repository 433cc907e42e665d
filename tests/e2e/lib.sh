# Shared by the end-to-end scripts (source it after setting PY): results and finding ids.
#   ok MSG / bad MSG   print a result line; bad makes the script's exit status 1 ($fail)
#   ids_of REPORT      the sorted finding ids of a --format json report, space-separated
#   has LIST ID        whether the space-separated LIST holds ID
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
ids_of() { "$PY" -c 'import json,sys; print(" ".join(sorted({f["id"] for f in json.load(open(sys.argv[1]))["findings"]})))' "$1"; }
has() { [[ " $1 " == *" $2 "* ]]; }
