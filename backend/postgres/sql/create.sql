-- The lease table: one row per key, never deleted, so that the fencing
-- token only grows. A free row has expires_at = '-infinity'; holder and
-- run_id then name the last holder.
CREATE TABLE IF NOT EXISTS {{table}} (
    key        text        PRIMARY KEY,
    token      bigint      NOT NULL CHECK (token > 0),
    holder     text        NOT NULL,
    run_id     text        NOT NULL,
    expires_at timestamptz NOT NULL
)
