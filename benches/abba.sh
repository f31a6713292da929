#!/usr/bin/env bash
# Paired load runs of two builds, in alternating order (A B, B A, ...), so that
# neither build always runs second: a run right after another is slower on a
# machine still writing the first run's data back.
#
#   benches/abba.sh BIN_A BIN_B SCENARIO PAIRS [rolecall load options...]
#
# Writes OUT/SCENARIO-{a,b}-N.json (OUT: $ABBA_OUT, default ./abba-results)
# and prints, per pair, the figure named by $ABBA_KEY (default
# SCENARIO.delivered_per_s for the burst, SCENARIO.requests_per_s otherwise)
# and B/A, then the median ratio and its range.
set -euo pipefail
if [[ $# -lt 4 ]]; then
  sed -n '2,12p' "$0" >&2
  exit 2
fi
a=$1 b=$2 scenario=$3 pairs=$4
shift 4
out=${ABBA_OUT:-abba-results}
mkdir -p "$out"
for i in $(seq 1 "$pairs"); do
  if (( i % 2 )); then order="a b"; else order="b a"; fi
  for side in $order; do
    bin=$a
    [[ $side == b ]] && bin=$b
    sync
    sleep 2
    "$bin" load --scenario "$scenario" "$@" --json "$out/$scenario-$side-$i.json" >"$out/$scenario-$side-$i.log" 2>&1
  done
done
key=${ABBA_KEY:-}
if [[ -z $key ]]; then
  case $scenario in
    burst | isolation) key="$scenario.delivered_per_s" ;;
    *) key="${scenario//-/_}.requests_per_s" ;;
  esac
fi
python3 - "$out" "$scenario" "$pairs" "$key" <<'PY'
import json, statistics, sys
out, scenario, pairs, key = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def figure(side, i):
    value = json.load(open(f"{out}/{scenario}-{side}-{i}.json"))
    for part in key.split("."):
        value = value[part]
    return value
ratios = []
for i in range(1, pairs + 1):
    a, b = figure("a", i), figure("b", i)
    ratios.append(b / a)
    print(f"{i:3d} {a:12.1f} {b:12.1f} {b / a:7.3f}")
print(f"B/A median {statistics.median(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f} ({key})")
PY
