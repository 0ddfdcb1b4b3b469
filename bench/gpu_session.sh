#!/usr/bin/env bash
# The GPU measurements of docs/BENCHMARKS.md, in one go on a 2-GPU host (torch with CUDA
# installed, this checkout installed with `pip install -e .`). Writes everything under $1.
#   bash bench/gpu_session.sh OUT [plants|ranks|overhead]...
set -u
out=${1:?usage: gpu_session.sh OUT [parts...]}; shift
parts=${*:-plants ranks overhead}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpus.txt"
python -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$out/gpus.txt"
for part in $parts; do
  case $part in
    plants)
      # Every plant with its eager baseline, large model, inductor; two plants at a time.
      python bench/plant_findings.py --device cuda --size large --backend inductor \
        --gpus 0,1 --out "$out/plants" > "$out/plants.txt" 2>&1 ;;
    ranks)
      for plant in none rank-recompile; do
        extra=(); [ "$plant" = none ] || extra=(--plant "$plant")
        python -m diag record -o "$out/ranks-$plant" --force -- torchrun --standalone \
          --nproc_per_node 2 -m diag.fixtures --device cuda --size large --compile \
          --backend inductor "${extra[@]}" --json "$out/ranks-$plant.json" -q \
          > "$out/ranks-$plant.log" 2>&1
        python -m diag analyze "$out/ranks-$plant" > "$out/ranks-$plant.findings.txt" 2>&1
      done ;;
    overhead)
      python bench/record_overhead.py --device cuda --size large --backend inductor \
        --pairs 4 > "$out/overhead.txt" 2>&1 ;;
  esac
done
