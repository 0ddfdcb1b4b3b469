#!/usr/bin/env bash
# Part of `bench/fidelity.py --n N` on the H200 host's CPUs, through the device tool (the programs
# run on CPU with aot_eager, as on a laptop; the GPU idles). Needs .whl/ as bench/causes_session.sh
# says (diffusers and a diag wheel built from this checkout).
#   bash bench/fidelity_session.sh OUT START N [JOBS] [LIMIT_S]
# Kept run folders come back as OUT/fidelity.tgz.part-* (15 MB parts) with the report; evaluate
# them here with `python bench/fidelity.py --reuse DIR` after unpacking.
set -u
out=${1:?usage: fidelity_session.sh OUT START N [JOBS] [LIMIT_S]}
start=${2:?START}
n=${3:?N}
jobs=${4:-7}
limit=${5:-500}
repo=$(pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$repo"/.whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1
mkdir -p "$out"
keep=/tmp/fidkeep
python3 -c "import sys, torch, diffusers; print(sys.version.split()[0], torch.__version__, diffusers.__version__)" \
  > "$out/versions.txt"
cd /tmp  # the checkout's diag/ folder would shadow the installed package
timeout "$limit" python3 "$repo/bench/fidelity.py" --seed 1 --n "$n" --start "$start" \
  --jobs "$jobs" --keep "$keep" --out "$out/fidelity_part.txt" \
  --note "H200 host CPUs (CUDA hidden, OMP_NUM_THREADS=1), programs $start..$((n - 1))" \
  > "$out/stdout.txt" 2> "$out/progress.txt"
echo "fidelity rc=$?" >> "$out/versions.txt"
tar -C "$keep" -czf - . | split -b 15M - "$out/fidelity.tgz.part-"
ls -la "$out"
