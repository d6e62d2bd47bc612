#!/usr/bin/env bash
# The pool benchmark as a CI step: replay a workload on the GPU, compare it with the baseline of
# the main branch, and fail on a regression. Both example workflows (github-actions.yml,
# gitlab-ci.yml) call this script; tests/it/ci_examples.rs runs it on the host device.
#
# Environment (all optional):
#   BENCH_GPUMEM    the gpumem binary                        (default: gpumem on PATH)
#   BENCH_DEVICE    the device spec, e.g. cuda:0, vulkan:0   (default: the best real device)
#   BENCH_ARGS      the workload, e.g. "-n 20000" or "--trace snapshot.pickle"
#   BENCH_RUNS      measured runs                            (default: 5)
#   BENCH_WARMUP    warm-up runs                             (default: 1)
#   BENCH_GATES     --max-regression gates, space-separated  (default: "ops-per-sec:10")
#   BENCH_BASELINE  the baseline file to compare with        (default: gpumem-baseline.json)
#   BENCH_OUT       folder for the report, JUnit, gauges and this run's baseline
#                   (default: gpumem-out)
#   BENCH_UPDATE    1: on success, replace the baseline with this run's (the main branch)
#
# Exit status: gpumem's own. 0 passed; 1 a gate or a regression failed; 2 a usage error (a
# baseline of another workload included); 4 the GPU is missing or unusable (a runner problem,
# not a regression).
set -uo pipefail

gpumem=${BENCH_GPUMEM:-gpumem}
baseline=${BENCH_BASELINE:-gpumem-baseline.json}
out=${BENCH_OUT:-gpumem-out}
mkdir -p "$out"

args=(bench-alloc --runs "${BENCH_RUNS:-5}" --warmup "${BENCH_WARMUP:-1}"
      --save-baseline "$out/baseline.json" --export-junit "$out/junit.xml"
      --export-prometheus "$out/gpumem.prom")
if [[ -n ${BENCH_DEVICE:-} ]]; then
  args+=(--device "$BENCH_DEVICE")
fi
# Word splitting is wanted: BENCH_ARGS holds flags.
# shellcheck disable=SC2206
args+=(${BENCH_ARGS:-})
if [[ -n ${GITHUB_STEP_SUMMARY:-} ]]; then
  args+=(--export-markdown)                       # added to the job page
else
  args+=(--export-markdown "$out/summary.md")
fi
if [[ -f $baseline ]]; then
  args+=(--baseline "$baseline")
  for gate in ${BENCH_GATES:-ops-per-sec:10}; do
    args+=(--max-regression "$gate")
  done
else
  echo "gpumem-bench: no baseline at $baseline yet; this run only measures" >&2
fi

"$gpumem" "${args[@]}" | tee "$out/report.txt"
status=${PIPESTATUS[0]}

case $status in
  0)
    if [[ ${BENCH_UPDATE:-0} == 1 ]]; then
      cp "$out/baseline.json" "$baseline.tmp" && mv "$baseline.tmp" "$baseline"
      echo "gpumem-bench: baseline updated: $baseline" >&2
    fi
    ;;
  1) echo "gpumem-bench: the pool regressed or missed a gate (see the table above)" >&2 ;;
  4) echo "gpumem-bench: the GPU is missing or unusable on this runner; nothing was measured" >&2 ;;
  *) echo "gpumem-bench: gpumem exited $status" >&2 ;;
esac
exit "$status"
