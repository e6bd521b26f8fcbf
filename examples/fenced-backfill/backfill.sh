#!/bin/sh
# A backfill whose every write carries its fencing token, so that a run
# which lost its lock (say, paused past its lease) cannot overwrite the
# work of the run that took over.
#   lockrun run --ttl 1m backfill-2026 -- examples/fenced-backfill/backfill.sh STORE
set -eu
store=$1
here=$(dirname "$0")
for batch in 1 2 3; do
	"$here/fenced-write" "$store" "$LOCKRUN_FENCING_TOKEN" "batch $batch by run $LOCKRUN_RUN_ID"
done
