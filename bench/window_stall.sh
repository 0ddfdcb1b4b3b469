#!/usr/bin/env bash
# A profile window's stall on the program's thread, commits side by side (issue 34):
#   bash bench/window_stall.sh ROUNDS REF...   e.g.  bash bench/window_stall.sh 3 ddd7987 47d7db2
# Each REF is unpacked (git archive) into a venv of its own beside this checkout's shared
# packages; the working tree itself runs as "branch". Rounds interleave the commits, so a
# shared, loaded CPU slows them alike. Prints each window's export_s (and, where the commit
# records them, stop_s, save_s and gzip_s) from the events.
set -euo pipefail
rounds=$1; shift
top=$(git rev-parse --show-toplevel)
work=$(mktemp -d -t diag-window-stall-XXXX)
deps=$(cd "$top" && .venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
for ref in "$@"; do
  mkdir "$work/$ref"; (cd "$top" && git archive "$ref") | tar -x -C "$work/$ref"
  python3.11 -m venv "$work/$ref/.venv"
  cat "$deps"/_main_deps.pth > "$work/$ref/.venv/lib/python3.11/site-packages/_main_deps.pth"
  (cd "$work/$ref" && PYTHONWARNINGS=ignore .venv/bin/python -m pip install -q --no-deps -e . >/dev/null 2>&1)
done
for r in $(seq 1 "$rounds"); do
  for who in "$@" branch; do
    dir=$top; [ "$who" = branch ] || dir=$work/$who
    out=$work/trace-$who-$r
    (cd "$dir" && nice .venv/bin/diag record -o "$out" --profile new-shapes,steady:4 -- \
      .venv/bin/python -m diag.fixtures --compile --backend aot_eager --warmup \
      --requests 2x8x8:10,2x8x8:10,2x8x8:10 >/dev/null 2>&1)
    for f in "$out"/runs/compiled/*/events.jsonl; do
      python3 - "$who" "$r" "$f" <<'PY'
import json, os, sys
who, r, f = sys.argv[1:]
for line in open(f):
    e = json.loads(line)
    if e.get("ev") == "profile_window_end":
        parts = " ".join(f"{k}={e[k]:.3f}" for k in ("stop_s", "save_s", "gzip_s") if k in e)
        print(f"{who} round {r} {e['window']} export_s={e['export_s']:.3f} {parts} "
              f"load={os.getloadavg()[0]:.1f}", flush=True)
PY
    done
  done
done
rm -rf "$work"
