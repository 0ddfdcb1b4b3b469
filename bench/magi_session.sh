#!/usr/bin/env bash
# The H200 recordings of issue 15 (MagiCompiler) and issue 12's CUDA-graph crash, as run through
# the device tool. Needs, beside this checkout: MagiCompiler's source in .magi/ (github
# SandAI-org/MagiCompiler at 8e2e47c, `git archive HEAD magi_compiler | tar -x -C .magi`) and the
# wheels in .whl/ (depyf, pydantic, pydantic-core, pydantic-settings, annotated-types,
# typing-inspection, python-dotenv, graphviz, astor, dill, msgspec, importlib-metadata,
# diffusers, and diag's own wheel built from the commit under test).
#   bash bench/magi_session.sh OUT [magi|sizes|torchmode|cudagraph]...
# Each recording is written to /tmp/traces/NAME with its log NAME.log; they come back as
# OUT/traces.tgz.part-* (15 MB parts), with OUT/summary.txt (versions, exit codes, times).
set -u
out=${1:?usage: magi_session.sh OUT [magi|sizes|torchmode|cudagraph]...}; shift
parts=${*:-magi}
repo=$(pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$repo"/.whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$repo/.magi PYTHONUNBUFFERED=1
traces=/tmp/traces
mkdir -p "$out" "$traces"
summary=$out/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$summary"
python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)" >> "$summary"
# Run from outside the checkout: its diag/ folder would shadow the installed package.
cd /tmp
fixture=(python3 -m diag.fixtures --device cuda --size large --blocks 4 -q)
budget=${MAGI_SESSION_BUDGET_S:-480}  # stop starting recordings after this many seconds
record() {  # NAME [diag record options] -- COMMAND...
  local name=$1; shift
  local started=$SECONDS
  if [ "$SECONDS" -ge "$budget" ]; then echo "$name skipped (time budget)" >> "$summary"; return; fi
  timeout 300 python3 -m diag record -o "$traces/$name" --force "$@" > "$traces/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - started))s" >> "$summary"
}
for part in $parts; do
  case $part in
    magi)
      # One magi cache for the session: the first run is cold, the second clean run warm.
      export MAGI_COMPILE_CACHE_ROOT_DIR=$traces/magi-cache
      record magi-clean-baseline --baseline eager -- "${fixture[@]}" --compiler magi
      record magi-guard-bypass -- "${fixture[@]}" --compiler magi --plant magi-guard-bypass
      record magi-specialized-dim -- "${fixture[@]}" --compiler magi --plant magi-specialized-dim
      record magi-unsplit-baseline --baseline eager -- "${fixture[@]}" --compiler magi \
        --plant magi-unsplit-attention
      record magi-newshape -- "${fixture[@]}" --compiler magi --plant unwarmed-shape
      record magi-clean -- "${fixture[@]}" --compiler magi  # warm: magi's cache is filled
      record magi-off -- "${fixture[@]}"
      record torch-inductor -- "${fixture[@]}" --compile --backend inductor
      ;;
    sizes)
      # A compile_sizes entry met first in a live request (r1's tokens, or its height or width
      # in patches, whichever magi keys the size on): magi compiles it on its fast path.
      export MAGI_COMPILE_CACHE_ROOT_DIR=$traces/magi-cache
      (export MAGI_COMPILE_COMPILE_SIZES='[12800, 40, 80]'
       record magi-compile-sizes -- "${fixture[@]}" --compiler magi --requests 4x48x96,4x80x160)
      ;;
    torchmode)
      # magi's compile_mode TORCH_COMPILE: plain torch.compile underneath, guards and recompiles.
      export MAGI_COMPILE_CACHE_ROOT_DIR=$traces/magi-cache
      (export MAGI_COMPILE_COMPILE_MODE=TORCH_COMPILE
       record magi-torch-mode -- "${fixture[@]}" --compiler magi --plant unwarmed-shape)
      ;;
    cudagraph)
      record record-cudagraph-overwrite -- python3 \
        "$repo/tests/data/h200/record-cudagraph-overwrite/program.py"
      ;;
  esac
done
# At most 8 files come back: the summary and the traces (with their logs) in 15 MB parts.
(cd "$traces" && tar czf - --exclude=magi-cache .) | split -b 15m - "$out/traces.tgz.part-"
du -sh "$traces"/* >> "$summary"
ls -la "$out"
cat "$summary"
