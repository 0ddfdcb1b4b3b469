#!/usr/bin/env bash
# Issue 34's A/B on the H200, as run through the device tool: the interleaved bench with
# --against, this tree's diag against a reference wheel (last round's ddd7987), recorded
# processes of both alternating on one host in one run, once per torch.compile mode. Needs in
# .whl/ (built here first, no network on the device):
#   this tree's wheel and msgspec's:  pip wheel --no-deps --no-build-isolation -w .whl .
#   REF's wheel, in .whl/ref/ (its own folder: both wheels are named diag-0.1.0-*.whl):
#     git archive ddd7987 | tar -x -C /tmp/ref-src && pip wheel --no-deps --no-build-isolation -w .whl/ref /tmp/ref-src
#   bash bench/overhead_ab_session.sh OUT [MODE[:TOTAL_S]]...   (default: default:210 reduce-overhead:210)
# Each run's output is OUT/ab-MODE.txt; OUT/summary.txt has the versions, exit codes, RESULT lines.
set -u
out=${1:?usage: overhead_ab_session.sh OUT [MODE[:TOTAL_S]]...}; shift
runs=${*:-default:210 reduce-overhead:210}
repo=$(pwd)
ref=$(ls "$repo"/.whl/ref/diag-*.whl 2>/dev/null | head -n 1)
[ -n "$ref" ] || { echo "no REF wheel in .whl/ref/" >&2; exit 1; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$repo"/.whl/diag-*.whl "$repo"/.whl/msgspec-*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache
mkdir -p "$out"
summary=$out/summary.txt
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
  echo "cpus $(nproc); REF wheel $(basename "$ref") sha256 $(sha256sum "$ref" | cut -c1-16)"
} > "$summary"
cd /tmp  # the checkout's diag/ folder would shadow the installed package
for run in $runs; do
  mode=${run%%:*}; total=${run#*:}; [ "$total" = "$run" ] && total=210
  started=$SECONDS
  python3 "$repo"/bench/record_overhead_interleaved.py --device cuda --size large \
    --backend inductor --mode "$mode" --against "$ref" --pip python3 --rounds 2 \
    --budget-s "$total" --total-s "$total" > "$out/ab-$mode.txt" 2>&1
  echo "$mode rc=$? $((SECONDS - started))s" >> "$summary"
  grep -h '^RESULT' "$out/ab-$mode.txt" >> "$summary"
done
cat "$summary"; tail -n 12 "$out"/ab-*.txt
