"""The start-up hook's in-process switching (TRAINRX_ALT_FIX, probes/python/sitecustomize.py; issue 40).

A small training script runs with the hook on PYTHONPATH (no `trainrx record` needed: the hook acts
on `import torch`) and writes down, inside every step, the flags the step ran with. The test checks
that after the warm-up the steps follow A B B A / B A A B, that a B step runs with each fix and an A
step as the script set it, that the hook's record (TRAINRX_ALT_RESULT) holds one timed step per
switched step with its arm, and the risks: a script that sets a switched flag itself every step
(switching stops, the record says which fix), `with torch.autograd.detect_anomaly():` blocks and
set_detect_anomaly(True) every step (still switched), the optimizers' fused / foreach (set on every
param group before each step), torch.compile (no switching), a token that
cannot switch, a process that is not the launch's root, and that switching changes no number the
script computes. Run by ctest (python.alt_fix):
    .venv/bin/python tests/python/alt_fix_test.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HOOK = REPO / "probes" / "python"
PATTERN = "ABBABAAB"

SCRIPT = r'''
import contextlib, json, sys
import torch
import torch.nn.functional as F

mode, out, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
if "compiled" in mode:
    model = torch.compile(model, backend="eager")
opt = torch.optim.AdamW(model.parameters(), lr=0.01) if "adamw" in mode else torch.optim.SGD(model.parameters(), lr=0.1)
if "handsgd" in mode:  # parameters updated by hand, as pytorch/examples' word language model does
    opt = None
if "anomaly" in mode:
    torch.autograd.set_detect_anomaly(True)
if "deterministic" in mode:
    torch.use_deterministic_algorithms(True)
x, y = torch.randn(32, 8), torch.randint(0, 4, (32,))
seen, losses = [], []
try:
    for i in range(steps):
        if "overwrite_anomaly" in mode:
            torch.set_anomaly_enabled(True)
        if "overwrite_benchmark" in mode:
            torch.backends.cudnn.benchmark = False
        if "every_step" in mode:
            torch.autograd.set_detect_anomaly(True)
        if opt is not None:
            opt.zero_grad(set_to_none=False)
        else:
            model.zero_grad()
        kept = all(p.grad is not None for p in model.parameters())
        with torch.autograd.detect_anomaly() if "block" in mode else contextlib.nullcontext():
            seen.append({"anomaly": torch.is_anomaly_enabled(), "benchmark": torch.backends.cudnn.benchmark,
                         "precision": torch.get_float32_matmul_precision(),
                         "deterministic": torch.are_deterministic_algorithms_enabled(), "grads_kept": kept})
            loss = F.cross_entropy(model(x), y)
            loss.backward()
        losses.append(loss.item())
        if opt is None:
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(p.grad, alpha=-0.1)
            continue
        opt.step()
        seen[-1].update(foreach=opt.param_groups[0].get("foreach"), fused=opt.param_groups[0].get("fused"))
finally:
    with open(out, "w") as f:
        json.dump({"seen": seen, "losses": losses, "params": [p.detach().flatten().tolist() for p in model.parameters()]}, f)
'''


def run(tmp: Path, name: str, mode: str, steps: int, fixes: str | None, warmup: int = 2, alt_steps: int = 16,
        extra_env: dict | None = None):
    """Runs the script; returns (exit code, what it saw, the hook's record or None, stderr)."""
    script = tmp / "train_alt.py"
    script.write_text(SCRIPT)
    out, record = tmp / f"{name}.seen.json", tmp / f"{name}.alt.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINRX_")}
    env["PYTHONPATH"] = str(HOOK)
    env["PYTHONWARNINGS"] = "ignore"
    if fixes is not None:
        env.update(TRAINRX_ALT_FIX=fixes, TRAINRX_ALT_RESULT=str(record), TRAINRX_ALT_WARMUP=str(warmup),
                   TRAINRX_ALT_STEPS=str(alt_steps))
    env.update(extra_env or {})
    p = subprocess.run([sys.executable, str(script), mode, str(out), str(steps)], env=env, capture_output=True,
                       text=True, timeout=300)
    seen = json.loads(out.read_text()) if out.exists() else None
    rec = json.loads(record.read_text()) if record.exists() else None
    return p.returncode, seen, rec, p.stderr


def main() -> int:
    try:
        import torch  # noqa: F401
    except ImportError:
        print("skip: no torch")
        return 77
    failures = []

    def check(ok: bool, what: str, detail: object = "") -> None:
        print(("ok: " if ok else "FAIL: ") + what + ("" if ok else f"  ({detail})"))
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        arms = (PATTERN * 4)[:16]

        # Every switchable fix at once on a script that sets anomaly mode and deterministic
        # algorithms: B steps run with every fix, A steps as the script set them; 2 warm-up + 16 steps.
        rc, seen, rec, err = run(tmp, "all", "anomaly,deterministic", 40,
                                 "anomaly_off,zero_grad_none,tf32,cudnn_benchmark,deterministic_off")
        check(rc == 0 and rec is not None, "all fixes: exit 0 and a record", err[-400:])
        if rec:
            check(rec["schema"] == "trainrx.alt/1" and rec["stopped"] == "" and rec["warmup"] == 2, "record header", rec)
            check("".join(s["arm"] for s in rec["steps"]) == arms, "arms A B B A / B A A B after the warm-up",
                  [s["arm"] for s in rec["steps"]])
            check(all(s["ms"] > 0 for s in rec["steps"]), "every switched step timed")
        if seen:
            check(len(seen["seen"]) == 18, "the hook ended the run after 2 + 16 steps", len(seen["seen"]))
            warm = seen["seen"][:2]
            check(all(s["anomaly"] and s["deterministic"] and not s["benchmark"] for s in warm), "warm-up steps as the script set them", warm)
            wrong = []
            for i, (arm, s) in enumerate(zip(arms, seen["seen"][2:])):
                b = arm == "B"
                want = {"anomaly": not b, "deterministic": not b, "benchmark": b, "grads_kept": not b,
                        "precision": "high" if b else "highest"}
                if any(s[k] != v for k, v in want.items()):
                    wrong.append((i, arm, s))
            check(not wrong, "each step ran with its arm's flags (B: every fix; A: the script's)", wrong[:3])

        # slowdown_us=N (gate self-test --cmd): B steps are N us longer, A steps unchanged.
        rc, seen, rec, err = run(tmp, "slow", "", 40, "slowdown_us=20000")
        ok = rc == 0 and rec is not None and rec["stopped"] == "" and len(rec["steps"]) == 16
        check(ok, "slowdown_us: switched to the end", (rc, rec and rec["stopped"], err[-300:]))
        if ok:
            a = sorted(s["ms"] for s in rec["steps"] if s["arm"] == "A")
            b = sorted(s["ms"] for s in rec["steps"] if s["arm"] == "B")
            gap = b[len(b) // 2] - a[len(a) // 2]
            check(15.0 <= gap <= 40.0, "slowdown_us: B's median step 20 ms longer than A's", (gap, a[:3], b[:3]))

        # A script that updates its parameters by hand never steps an optimizer: the hook cannot switch,
        # and must not keep the trial running to the script's end (hours of epochs for a real one):
        # after warm-up + steps backward passes without a step it stops, says why, and leaves.
        rc, seen, rec, err = run(tmp, "handsgd", "handsgd,anomaly", 200, "anomaly_off")
        check(rc == 0 and rec is not None and "no torch.optim optimizer stepped in 18 backward passes" in rec["stopped"],
              "hand-written SGD: switching stops with the reason", (rc, rec, err[-300:]))
        check(seen is not None and len(seen["seen"]) == 19 and rec is not None and rec["steps"] == [],
              "hand-written SGD: the hook ended the run at the 19th backward, no step timed", seen and len(seen["seen"]))

        # `with torch.autograd.detect_anomaly():` around each step's forward and backward, and
        # set_detect_anomaly(True) every step: inside the block, B steps still run without anomaly mode.
        for mode in ("block", "anomaly,every_step"):
            rc, seen, rec, err = run(tmp, mode.replace(",", "_"), mode, 40, "anomaly_off")
            ok = rc == 0 and rec and rec["stopped"] == "" and seen and len(seen["seen"]) == 18
            check(bool(ok), f"{mode}: switched to the end", (rc, rec and rec["stopped"], err[-300:]))
            if ok:
                got = "".join("A" if s["anomaly"] else "B" for s in seen["seen"][2:])
                check(got == arms, f"{mode}: anomaly mode on in A steps, off in B steps", got)

        # The optimizers' foreach and fused (a global step pre hook sets every param group before each
        # step): B steps step with the option, A steps with the script's own (None: torch's default).
        for token, want_b in (("fused", {"fused": True, "foreach": False}), ("foreach", {"foreach": True, "fused": None})):
            rc, seen, rec, err = run(tmp, token, "adamw", 40, token)
            ok = rc == 0 and rec and rec["stopped"] == "" and seen and len(seen["seen"]) == 18
            check(bool(ok), f"{token}: switched to the end", (rc, rec and rec["stopped"], err[-300:]))
            if ok:
                # (the 16th switched step ends the run in its step hook: its flags are never read back)
                wrong = [(i, arm, s) for i, (arm, s) in enumerate(zip(arms, seen["seen"][2:17]))
                         if {k: s[k] for k in want_b} != (want_b if arm == "B" else {k: None for k in want_b})]
                check(not wrong and all(s["fused"] is None and s["foreach"] is None for s in seen["seen"][:2]),
                      f"{token}: AdamW steps with {want_b} in B steps, as the script made it in A steps", wrong[:3])

        # A script that sets a switched flag itself every step: switching stops at the first boundary
        # after a B step, the record says which fix, and the script runs on to its end as A.
        for mode, token in (("overwrite_anomaly", "anomaly_off"), ("overwrite_benchmark", "cudnn_benchmark")):
            rc, seen, rec, err = run(tmp, mode, mode, 12, token, alt_steps=0)
            check(rc == 0 and seen is not None and len(seen["seen"]) == 12, f"{mode}: the script ran on to its end", (rc, err[-300:]))
            check(bool(rec) and rec["token"] == token and "the script sets" in rec["stopped"], f"{mode}: the record says {token} was overwritten",
                  rec)
            if rec:  # warm-up 2: step 3 (A) and step 4 (B, read back at its end) are timed, none after
                check([s["arm"] for s in rec["steps"]] == ["A", "B"], f"{mode}: no step timed after switching stopped",
                      rec["steps"])
                check(all(s["anomaly"] for s in seen["seen"][4:]) if "anomaly" in mode else True,
                      f"{mode}: the steps after it ran as the script set them")

        # torch.compile: never switched.
        rc, seen, rec, err = run(tmp, "compiled", "anomaly,compiled", 12, "anomaly_off", alt_steps=0)
        check(rc == 0 and bool(rec) and "torch.compile" in rec["stopped"] and not rec["steps"], "torch.compile: no switching, said",
              (rc, rec, err[-300:]))
        if seen:
            check(all(s["anomaly"] for s in seen["seen"]), "torch.compile: every step as the script set it")

        # A fix that cannot switch between steps: said in the record, the script runs as it is.
        rc, seen, rec, err = run(tmp, "workers", "anomaly", 12, "workers=2", alt_steps=0)
        check(rc == 0 and bool(rec) and "cannot be switched" in rec["stopped"] and rec["token"] == "workers=2",
              "workers=2: cannot switch, said", (rc, rec))

        # Not the launch's root process (a DataLoader worker, a rank under a launcher): nothing.
        rc, seen, rec, err = run(tmp, "child", "anomaly", 12, "anomaly_off", extra_env={"TRAINRX_ROOT_PID": "1"})
        check(rc == 0 and rec is None and seen and all(s["anomaly"] for s in seen["seen"]), "not the root process: no switching",
              (rc, rec))

        # Switching changes how, not what: the same losses and parameters, bit for bit, as unobserved.
        rc0, plain, _, err0 = run(tmp, "plain", "anomaly", 24, None)
        rc1, switched, rec, err1 = run(tmp, "switched", "anomaly", 24, "anomaly_off,zero_grad_none", alt_steps=0)
        check(rc0 == 0 and rc1 == 0 and bool(rec) and len(rec["steps"]) == 22, "whole run switched (TRAINRX_ALT_STEPS=0)",
              (rc0, rc1, rec and len(rec["steps"]), err1[-300:]))
        check(bool(plain and switched) and plain["losses"] == switched["losses"] and plain["params"] == switched["params"],
              "the same losses and parameters as unobserved")

    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
