#!/usr/bin/env bash
# Issue 34's step path on the H200, as run through the device tool: what each CUDA primitive
# costs at a step boundary, diag's costs itemised, a profile window's stall, and the A/B.
# Needs in .whl/: this tree's wheel and msgspec's (see bench/overhead_ab_session.sh); for `ab`,
# a reference wheel in the folder named (e.g. .whl/ref/ for ddd7987).
#   bash bench/step_path_session.sh OUT [prims|costs|stall[:SPEC]|ab:WHEELDIR:MODE:TOTAL_S[:PROFILE]]...
# (stall's SPEC: diag record --profile, default `default`, i.e. new-shapes,steady:2)
# Outputs: OUT/summary.txt (versions, exit codes, RESULT lines) and one OUT/PART.txt per part.
set -u
out=${1:?usage: step_path_session.sh OUT [prims|costs|stall|ab:WHEELDIR:MODE:TOTAL_S]...}; shift
parts=${*:-prims costs stall}
repo=$(pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$repo"/.whl/diag-*.whl "$repo"/.whl/msgspec-*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache
mkdir -p "$out"
summary=$out/summary.txt
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
  echo "cpus $(nproc); diag wheel sha256 $(sha256sum "$repo"/.whl/diag-*.whl | cut -c1-16)"
} > "$summary"
cd /tmp  # the checkout's diag/ folder would shadow the installed package
for part in $parts; do
  started=$SECONDS
  case $part in
    prims)
      python3 "$repo/bench/cuda_step_primitives.py" --json "$out/prims.json" > "$out/prims.txt" 2>&1
      ;;
    costs)
      python3 "$repo/bench/record_costs.py" --device cuda --size large --backend inductor \
        --budget-s 200 --json "$out/costs.json" > "$out/costs.txt" 2>&1
      ;;
    stall*)
      # Three 10-step requests of one shape: a new-shape window at r0's step 0, a steady one;
      # the program's thread waits for each window's stop and JSON write.
      spec=${part#stall}; spec=${spec#:}; spec=${spec:-default}
      echo "RESULT stall --profile $spec" >> "$out/stall.txt"
      python3 -m diag record -o /tmp/stall --force --profile "$spec" -- \
        python3 -m diag.fixtures --device cuda --size large --compile --backend inductor \
        --requests 4x48x96:10,4x48x96:10,4x48x96:10 -q >> "$out/stall.txt" 2>&1
      python3 - /tmp/stall >> "$out/stall.txt" <<'PY'
import glob, json, sys
for path in sorted(glob.glob(sys.argv[1] + "/runs/**/events.jsonl", recursive=True)):
    for line in open(path):
        e = json.loads(line)
        if e.get("ev") == "profile_window_end":
            parts = " ".join(f"{k}={e[k]:.4f}" for k in ("stop_s", "save_s", "gzip_s") if k in e)
            print(f"RESULT window {e['window']} export_s={e['export_s']:.4f} {parts}")
PY
      ;;
    ab:*)
      IFS=: read -r _ dir mode total profile <<< "$part"
      ref=$(ls "$repo/$dir"/diag-*.whl | head -n 1)
      python3 "$repo/bench/record_overhead_interleaved.py" --device cuda --size large \
        --backend inductor --mode "$mode" --against "$ref" --pip python3 --rounds 2 \
        --profile "${profile:-none}" --budget-s "$total" --total-s "$total" \
        > "$out/ab-${dir//\//_}-$mode-${profile:-none}.txt" 2>&1
      ;;
  esac
  echo "$part rc=$? $((SECONDS - started))s" >> "$summary"
  grep -h '^RESULT' "$out"/*.txt 2>/dev/null | sort -u > "$out/results.txt"
done
cat "$summary" "$out/results.txt"
tail -n 25 "$out"/prims.txt "$out"/costs.txt 2>/dev/null
