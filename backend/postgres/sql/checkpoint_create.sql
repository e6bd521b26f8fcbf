-- Checkpoints: one row per lock, beside the lease table in its schema. A
-- schema with several lease tables keeps them apart by lease_table.
CREATE TABLE IF NOT EXISTS {{schema}}.lockrun_checkpoints (
    lease_table text        NOT NULL,
    key         text        NOT NULL,
    token       bigint      NOT NULL,
    value       bytea       NOT NULL,
    written_at  timestamptz NOT NULL,
    PRIMARY KEY (lease_table, key)
)
