#!/usr/bin/env bash
# The H200 recordings of issue 16's CUDA-graph part (tests/data/h200/cudagraph-*), as run through
# the device tool. Needs the wheels in .whl/ (diffusers, msgspec and diag's own wheel built from
# the commit under test: `pip wheel --no-deps --no-build-isolation -w .whl .`).
#   bash bench/cudagraph_session.sh OUT
# Each recording is written to /tmp/traces/NAME with its log NAME.log; they come back as
# OUT/traces.tgz.part-* (15 MB parts), with OUT/summary.txt (versions, exit codes, times).
set -u
out=${1:?usage: cudagraph_session.sh OUT}
repo=$(pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$repo"/.whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache
traces=/tmp/traces
mkdir -p "$out" "$traces"
summary=$out/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$summary"
python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)" >> "$summary"
cd /tmp  # the checkout's diag/ folder would shadow the installed package
fixture=(python3 -m diag.fixtures --device cuda --size large --blocks 4 --compile --backend inductor -q)
program=$repo/tests/data/h200/cudagraph-diffusers/program.py
budget=${CUDAGRAPH_SESSION_BUDGET_S:-450}  # stop starting recordings after this many seconds
record() {  # NAME [diag record options] -- COMMAND...
  local name=$1; shift
  local started=$SECONDS
  if [ "$SECONDS" -ge "$budget" ]; then echo "$name skipped (time budget)" >> "$summary"; return; fi
  timeout 150 python3 -m diag record -o "$traces/$name" --force "$@" > "$traces/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - started))s" >> "$summary"
}
# The plant, the clean service (one static graph per warmed shape), then a user's program:
# diffusers' WanPipeline with a reduce-overhead transformer, dynamic as torch decides and static.
record cudagraph-rerecord -- "${fixture[@]}" --plant cudagraph-rerecord
record cudagraph-clean -- "${fixture[@]}" --mode reduce-overhead
record cudagraph-diffusers-dynamic --warmup-requests 2 -- python3 "$program"
record cudagraph-diffusers-static --warmup-requests 2 -- python3 "$program" --dynamic false
# Ground truth: torch's own cudagraphs log (every recording, its size key), recorded and not.
(export TORCH_LOGS=cudagraphs
 record cudagraph-rerecord-logged -- "${fixture[@]}" --plant cudagraph-rerecord
 started=$SECONDS
 timeout 120 "${fixture[@]}" --plant cudagraph-rerecord > "$traces/cudagraph-rerecord-plain.log" 2>&1
 echo "cudagraph-rerecord-plain rc=$? $((SECONDS - started))s" >> "$summary")
(cd "$traces" && tar czf - .) | split -b 15m - "$out/traces.tgz.part-"
du -sh "$traces"/* >> "$summary"
cat "$summary"
