#!/usr/bin/env bash
# The H200 recordings behind issue 23 ("Causes from evidence"), as run through the device tool.
# Needs, beside this checkout: MagiCompiler's source in .magi/ (github SandAI-org/MagiCompiler at
# 8e2e47c, `git archive HEAD magi_compiler | tar -x -C .magi`) and wheels in .whl/ (depyf,
# pydantic, pydantic-core, pydantic-settings, annotated-types, typing-inspection, python-dotenv,
# graphviz, astor, dill, msgspec, importlib-metadata, typing-extensions, diffusers, and diag's own
# wheel built from the commit under test).
#   bash bench/causes_session.sh OUT [magi|offload|loop|cudnn|profwarm]...
# Each recording goes to /tmp/traces/NAME with its log NAME.log; they come back as
# OUT/traces.tgz.part-* (15 MB parts), with OUT/summary.txt (versions, exit codes, times).
set -u
out=${1:?usage: causes_session.sh OUT [magi|offload|loop]...}; shift
parts=${*:-magi offload loop}
repo=$(pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$repo"/.whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$repo/.magi PYTHONUNBUFFERED=1
traces=/tmp/traces
mkdir -p "$out" "$traces"
summary=$out/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$summary"
python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)" >> "$summary"
cd /tmp  # the checkout's diag/ folder would shadow the installed package
fixture=(python3 -m diag.fixtures --device cuda --size large --blocks 4 -q)
budget=${SESSION_BUDGET_S:-480}  # stop starting recordings after this many seconds
record() {  # NAME [diag record options] -- COMMAND...
  local name=$1; shift
  local started=$SECONDS
  if [ "$SECONDS" -ge "$budget" ]; then echo "$name skipped (time budget)" >> "$summary"; return; fi
  timeout 240 python3 -m diag record -o "$traces/$name" --force "$@" > "$traces/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - started))s" >> "$summary"
}
for part in $parts; do
  case $part in
    magi)
      # A live width warmup never served: magi's fast path runs it with no compile; cuDNN's
      # attention builds an execution plan for the new sequence length in step 0.
      export MAGI_COMPILE_CACHE_ROOT_DIR=$traces/magi-cache
      record magi-newshape-profiled -- "${fixture[@]}" --compiler magi --plant unwarmed-shape
      record magi-newshape-unprofiled --profile none -- "${fixture[@]}" --compiler magi \
        --plant unwarmed-shape
      ;;
    offload)
      # enable_model_cpu_offload(): every request reloads the transformer at step 0.
      record offload-model-profiled --warmup-requests 1 --profile new-shapes,steady:2,request:r2 \
        -- python3 "$repo/bench/gpu_programs/model_offload.py"
      record offload-model-unprofiled --warmup-requests 1 --profile none \
        -- python3 "$repo/bench/gpu_programs/model_offload.py"
      ;;
    loop)
      export MAGI_COMPILE_CACHE_ROOT_DIR=$traces/magi-cache
      record magi-loop -- python3 "$repo/bench/gpu_programs/magi_loop.py"
      # A boundary op declared that never appears in the traced graph: magi splits nowhere.
      record magi-loop-nosplit --profile none -- python3 "$repo/bench/gpu_programs/magi_loop.py" \
        --split-op aten::_scaled_dot_product_cudnn_attention
      ;;
    profwarm)
      # Does the first profiled step pay the profiler's warm-up? A steady window of 6 steps
      # (steps 2-7 of the first live request, then 8-11 unprofiled), the same request twice.
      record profwarm-fixture --profile steady:6 -- "${fixture[@]}" --compile --backend inductor \
        --requests 4x48x96:12,4x48x96:12
      record profwarm-offload --warmup-requests 1 --profile steady:6 \
        -- python3 "$repo/bench/gpu_programs/model_offload.py" --requests 3 --steps 12
      ;;
    cudnn)
      # A live request at a sequence length no warmup served (12800 tokens): cuDNN's attention
      # builds an execution plan for it in step 0, with no compile (magi's fast path).
      export MAGI_COMPILE_CACHE_ROOT_DIR=$traces/magi-cache
      record magi-cudnn-profiled -- "${fixture[@]}" --compiler magi --requests 4x48x96,4x80x160
      record magi-cudnn-unprofiled --profile none -- "${fixture[@]}" --compiler magi \
        --requests 4x48x96,4x80x160
      ;;
  esac
done
(cd "$traces" && tar czf - --exclude=magi-cache --exclude='*.diag-cache*' .) | split -b 15m - "$out/traces.tgz.part-"
du -sh "$traces"/* >> "$summary"
ls -la "$out"
cat "$summary"
