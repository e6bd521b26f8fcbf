-- The tables of the fenced backfill example, with 20 batches of invoices
-- to convert from cents to euros. Run once (safe to repeat), after
-- `lockrun init --backend postgres://...` has installed lockrun_fence:
--   psql "$DATABASE_URL" -f examples/fenced-backfill/schema.sql
CREATE TABLE IF NOT EXISTS invoices (
    id           int     PRIMARY KEY,
    batch        int     NOT NULL,
    amount_cents bigint  NOT NULL,
    amount_eur   numeric,            -- what the backfill fills in
    applied      int     NOT NULL DEFAULT 0  -- how often: must end at 1
);
CREATE INDEX IF NOT EXISTS invoices_pending ON invoices (batch) WHERE amount_eur IS NULL;

-- One line per batch applied, with the token and run that applied it.
CREATE TABLE IF NOT EXISTS backfill_log (
    batch  int         NOT NULL,
    token  bigint      NOT NULL,
    run_id text        NOT NULL,
    at     timestamptz NOT NULL DEFAULT now()
);

INSERT INTO invoices (id, batch, amount_cents)
SELECT g, (g - 1) / 10 + 1, g * 137 FROM generate_series(1, 200) AS g
ON CONFLICT (id) DO NOTHING;
