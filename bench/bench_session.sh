#!/usr/bin/env bash
# The H200 runs behind issue 26 (`diag bench`) and the magi loop of issue 23, as run through the
# device tool. Needs .magi/ and .whl/ as bench/causes_session.sh says.
#   bash bench/bench_session.sh OUT [2x2|planted|loop]...
# Each bench directory goes to /tmp/benches/NAME with its printed tables in NAME.txt; they come
# back as OUT/benches.tgz.part-* (15 MB parts), with OUT/summary.txt.
set -u
out=${1:?usage: bench_session.sh OUT [2x2|planted|loop]...}; shift
parts=${*:-2x2}
repo=$(pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$repo"/.whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$repo/.magi PYTHONUNBUFFERED=1
benches=/tmp/benches
mkdir -p "$out" "$benches"
summary=$out/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$summary"
python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)" >> "$summary"
cd /tmp  # the checkout's diag/ folder would shadow the installed package
export MAGI_COMPILE_CACHE_ROOT_DIR=$benches/magi-cache TORCHINDUCTOR_CACHE_DIR=$benches/inductor-cache
S='python3 -m diag.fixtures --device cuda --size large --blocks 4 -q --requests 4x48x96:10,4x64x96:10,4x48x128:10'
bench() {  # NAME [diag bench options]
  local name=$1; shift
  local started=$SECONDS
  timeout "${BENCH_TIMEOUT_S:-540}" python3 -m diag bench -o "$benches/$name" --force "$@" \
    > "$benches/$name.txt" 2> "$benches/$name.log"
  echo "$name rc=$? $((SECONDS - started))s" >> "$summary"
  cp "$benches/$name.txt" "$out/$name.txt"
}
for part in $parts; do
  case $part in
    2x2)
      # The MagiCompiler post's Table 2: the hand-written Triton RMSNorm route on and off
      # (`--plant routing` sends compiled code around it) x torch.compile and magi.
      bench h200-2x2 --trials 3 \
        --config torch-triton="$S --compile --backend inductor" \
        --config torch-aten="$S --compile --backend inductor --plant routing" \
        --config magi-triton="$S --compiler magi" \
        --config magi-aten="$S --compiler magi --plant routing"
      ;;
    planted)
      bench h200-planted --trials 2 \
        --config clean="$S --compile --backend inductor" \
        --config empty-cache="$S --compile --backend inductor --plant empty-cache" \
        --config eager="$S"
      ;;
    loop)
      mkdir -p /tmp/traces
      timeout 200 python3 -m diag record -o /tmp/traces/magi-loop --force -- python3 \
        "$repo/bench/gpu_programs/magi_loop.py" > /tmp/traces/magi-loop.log 2>&1
      echo "magi-loop rc=$?" >> "$summary"
      timeout 200 python3 -m diag record -o /tmp/traces/magi-loop-nosplit --force --profile none \
        -- python3 "$repo/bench/gpu_programs/magi_loop.py" \
        --split-op aten::_scaled_dot_product_cudnn_attention > /tmp/traces/magi-loop-nosplit.log 2>&1
      echo "magi-loop-nosplit rc=$?" >> "$summary"
      (cd /tmp && tar czf - --exclude='*.diag-cache*' traces) > "$out/traces.tgz"
      ;;
  esac
done
(cd "$benches" && tar czf - --exclude=magi-cache --exclude=inductor-cache --exclude='*.diag-cache*' .) \
  | split -b 15m - "$out/benches.tgz.part-"
ls -la "$out"
cat "$summary"
