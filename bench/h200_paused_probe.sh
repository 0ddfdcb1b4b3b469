#!/usr/bin/env bash
# Is the recorded program slower, or computing other latents, with nothing profiled? (issue 34:
# on the H200 this tree's recorded processes ran 47 ms steps where ddd7987's ran 31 ms, both
# paused, and their latents differed.) Runs the reference service (large, inductor) plain and
# under `diag record --profile none`, with this tree's wheel and REF's (.whl/ and .whl/ref/, as
# bench/overhead_ab_session.sh builds them), each through bench/compat_probe.py (Dynamo's
# counters at exit); then, when this tree's recorded run is >10% slower than plain, again with
# one collector's installation turned off at a time (DIAG_FAULTS=install:NAME), to name it.
#   bash bench/h200_paused_probe.sh OUT
set -u
out=${1:?usage: h200_paused_probe.sh OUT}; repo=$(pwd); mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
  "$repo"/.whl/diag-*.whl "$repo"/.whl/msgspec-*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-ref \
  "$repo"/.whl/ref/diag-*.whl "$repo"/.whl/msgspec-*.whl || exit 1
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache
cd /tmp
req=${REQ:-4x48x96:16,4x48x96:16,4x48x96:16}
program=(python3 "$repo"/bench/compat_probe.py -m diag.fixtures --compile --device cuda --size large
  --backend inductor --requests "$req")
steady() {  # median of the live requests' steady step times in a run's output
  grep -o 'live .*steady=[0-9.]*ms' "$1" | sed 's/.*steady=//; s/ms//' | sort -n | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : "nan")}'
}
one() {  # NAME SITE [ENV=...] -- record|plain
  local name=$1 site=$2 how=$3; shift 3
  local started=$SECONDS
  if [ "$how" = record ]; then
    env PYTHONPATH="$site" "$@" timeout 240 python3 -m diag record --profile none --force \
      -o "$out/trace-$name" -- "${program[@]}" > "$out/$name.txt" 2>&1
  else
    env PYTHONPATH="$site" "$@" timeout 240 "${program[@]}" > "$out/$name.txt" 2>&1
  fi
  local rc=$?
  local latents; latents=$(grep -o 'live .*latents=[0-9a-f]*' "$out/$name.txt" | sed 's/.*latents=//' | sort -u | tr '\n' ' ')
  local counters; counters=$(grep -h '^COMPAT-COUNTERS' "$out/$name.txt" | md5sum | cut -c1-8)
  echo "$name rc=$rc $((SECONDS - started))s steady_ms=$(steady "$out/$name.txt") latents=$latents counters=$counters" | tee -a "$out/summary.txt"
}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch; print(torch.__version__)"; } > "$out/summary.txt"
one warm-cache /tmp/site plain  # fills the inductor cache for every later run
one plain /tmp/site plain
one record /tmp/site record
one ref-record /tmp/site-ref record
one plain2 /tmp/site plain
one record2 /tmp/site record
ratio=$(awk -v a="$(steady "$out/record.txt")" -v b="$(steady "$out/plain.txt")" 'BEGIN {print (b > 0 ? a / b : 0)}')
echo "record/plain steady $ratio" | tee -a "$out/summary.txt"
if awk -v r="$ratio" 'BEGIN {exit !(r > 1.10)}'; then
  for name in ${COLLECTORS:-cudagraphs compiles shapes cache trace_boundary compile_timing stances gc_pauses}; do
    one "off-$name" /tmp/site record DIAG_FAULTS="install:$name"
  done
fi
for f in "$out"/plain.txt "$out"/record.txt; do echo "== $f"; grep -h '^COMPAT-COUNTERS' "$f" | cut -c1-1500; done
cat "$out/summary.txt"
