bash scripts/gpu-validate --part build >/dev/null 2>&1 || { tail -20 $OUT/gpu-validate.log; exit 1; }
source .device-debs/unpack.sh >/dev/null
B=$PWD/build-gpu; S=tests/gpu/train_gpu.py
$B/trainrx record -o /tmp/t.json -- python3 $S --steps 10 --workers 2 2>&1 | head -3
timeout 200 $B/trainrx record -o /tmp/g.json -- cuda-gdb -batch -ex "set pagination off" -ex "set follow-fork-mode parent" -ex "catch throw" -ex run -ex "bt 40" --args python3 $S --steps 10 --workers 2 > $OUT/gdb.log 2>&1
grep -v "Cuda Driver error\|^\[New Thread\|^\[Thread\|^\[Detaching" $OUT/gdb.log | grep -A45 "Catchpoint\|hit Catch" | head -90
