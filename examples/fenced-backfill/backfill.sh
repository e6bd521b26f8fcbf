#!/bin/sh
# A PostgreSQL backfill in batches, each one fenced by lockrun's token:
#   lockrun init --backend "$LOCKS"          # once: installs lockrun_fence
#   psql "$DATABASE_URL" -f examples/fenced-backfill/schema.sql
#   lockrun run --backend "$LOCKS" --ttl 1m backfill-invoices -- \
#       examples/fenced-backfill/backfill.sh
# psql finds the database in DATABASE_URL, or in the usual PG* variables.
# A run that lost its lock while frozen (a VM pause, SIGSTOP) and wakes up
# after another run took over is refused by the database at its next batch
# and stops here with status 3; nothing of that batch is written.
#
# The progress that matters is in the data (batch.sql takes the lowest
# pending batch inside its fenced transaction); the lock's checkpoint
# tells people, and the next run, where the last run got to.
set -eu
here=$(dirname "$0")
last=$(lockrun checkpoint get)
echo "backfill: run $LOCKRUN_RUN_ID, token $LOCKRUN_FENCING_TOKEN, last checkpoint: ${last:-none}"
while :; do
	if ! batch=$(psql ${DATABASE_URL:+"$DATABASE_URL"} -X -q -At \
		-v token="$LOCKRUN_FENCING_TOKEN" -v run="$LOCKRUN_RUN_ID" -f "$here/batch.sql"); then
		echo "backfill: batch refused or failed with token $LOCKRUN_FENCING_TOKEN; stopping" >&2
		exit 3
	fi
	[ -n "$batch" ] || break
	lockrun checkpoint set "batch $batch"
	echo "backfill: batch $batch applied with token $LOCKRUN_FENCING_TOKEN"
	sleep "${BACKFILL_PAUSE:-0}" # a real backfill would pace itself
done
echo "backfill: nothing left"
