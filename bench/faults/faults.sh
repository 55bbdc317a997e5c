#!/usr/bin/env bash
# The measured fault table of docs/launching.md ("Faults, measured"): every fault injected into
# a 2-rank ucx job, detection time, what each rank and launcher printed, exit codes, and that the
# checkpoint at --save survived. Needs root for the disk-full case (it mounts a small tmpfs).
# The elastic cases (elastic_cases.py): a rank killed or stalled, a launcher added, timed to the
# new round's first step and compared bit for bit with the by-hand sequence on ucx and local.
#   bench/faults/faults.sh <tessera binary> [--json] [--reps 3] [--timeout 5] [--only kill-forward,...]
#   bench/faults/faults.sh <tessera binary> --reps 3 --only elastic-kill,elastic-stall,elastic-add
set -euo pipefail
exec python3 "$(dirname "$0")/faults.py" "$@"
