-- The lease table: one row per key, never deleted, so that the fencing
-- token only grows. A free row has expires_at = '-infinity'; holder and
-- run_id then name the last holder. granted_at and renewed_at are the
-- server's times of the grant and the last renewal, info the holder's
-- record (JSON), released_at when a lease released into its minimum hold
-- (it stays live until granted_at plus the minimum, but is over).
CREATE TABLE IF NOT EXISTS {{table}} (
    key         text        PRIMARY KEY,
    token       bigint      NOT NULL CHECK (token > 0),
    holder      text        NOT NULL,
    run_id      text        NOT NULL,
    expires_at  timestamptz NOT NULL,
    granted_at  timestamptz,
    renewed_at  timestamptz,
    info        text,
    released_at timestamptz
)
