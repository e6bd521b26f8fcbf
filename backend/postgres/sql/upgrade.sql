-- Brings a lease table made by an older lockrun up to create.sql's
-- columns; safe to repeat and to run concurrently (ALTER TABLE locks the
-- table, and the second run finds the columns there).
ALTER TABLE {{table}}
    ADD COLUMN IF NOT EXISTS granted_at  timestamptz,
    ADD COLUMN IF NOT EXISTS renewed_at  timestamptz,
    ADD COLUMN IF NOT EXISTS info        text,
    ADD COLUMN IF NOT EXISTS released_at timestamptz
