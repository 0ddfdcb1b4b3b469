#!/usr/bin/env bash
# The H200 figure of issue 18's overhead target, as run through the device tool: the interleaved
# bench (bench/record_overhead_interleaved.py) once per torch.compile mode. Needs diag's wheel,
# built from the commit under test, and msgspec's in .whl/
# (`pip wheel --no-deps --no-build-isolation -w .whl .`).
#   bash bench/overhead_session.sh OUT [MODE[:TOTAL_S]]...      (default: default:240 reduce-overhead:240)
# Each run's output is OUT/MODE.txt; OUT/summary.txt has the versions and exit codes.
set -u
out=${1:?usage: overhead_session.sh OUT [MODE[:TOTAL_S]]...}; shift
runs=${*:-default:240 reduce-overhead:240}
repo=$(pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$repo"/.whl/diag-*.whl "$repo"/.whl/msgspec-*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache
mkdir -p "$out"
summary=$out/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$summary"
python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)" >> "$summary"
nproc >> "$summary"
cd /tmp  # the checkout's diag/ folder would shadow the installed package
for run in $runs; do
  mode=${run%%:*}; total=${run#*:}; [ "$total" = "$run" ] && total=240
  started=$SECONDS
  python3 "$repo"/bench/record_overhead_interleaved.py --device cuda --size large \
    --backend inductor --mode "$mode" --budget-s "$total" --plain-share 0.3 --total-s "$total" \
    > "$out/$mode.txt" 2>&1
  echo "$mode rc=$? $((SECONDS - started))s" >> "$summary"
done
cat "$summary"; tail -n 3 "$out"/*.txt
