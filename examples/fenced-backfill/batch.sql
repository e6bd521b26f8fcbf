-- One batch of the backfill in one fenced transaction. backfill.sh runs it
--   psql -X -q -At -v token=$LOCKRUN_FENCING_TOKEN -v run=$LOCKRUN_RUN_ID -f batch.sql
-- and it prints the batch it applied, or nothing when none is left.
\set ON_ERROR_STOP on
\set VERBOSITY verbose
BEGIN;
-- First the fence: refused with SQLSTATE LRF01 once a newer lock holder
-- has called it, which aborts this transaction before it writes. It also
-- holds the resource's row lock until COMMIT, so two holders' batches
-- never run at once, whatever their timing.
SELECT lockrun_fence('backfill-invoices', :token) \gset
-- The progress is in the data: the next batch is the lowest one still
-- pending, read inside the fenced transaction, so a new holder resumes
-- where the last committed batch left off and no batch is applied twice.
WITH next AS (
    SELECT min(batch) AS batch FROM invoices WHERE amount_eur IS NULL
), done AS (
    UPDATE invoices SET amount_eur = amount_cents / 100.0, applied = applied + 1
    WHERE batch = (SELECT batch FROM next) AND amount_eur IS NULL
    RETURNING batch
)
INSERT INTO backfill_log (batch, token, run_id)
SELECT DISTINCT batch, :token, :'run' FROM done
RETURNING batch;
COMMIT;
