-- The write-side fence that `lockrun init` installs beside the lease table,
-- in the same schema: lockrun_fence(resource, token) records the highest
-- token seen per resource and raises SQLSTATE LRF01 when the token given
-- is lower. Equal passes: one holder writes many times with its token.
--
-- Called in the transaction that writes, it makes the write fenced:
--   BEGIN; SELECT lockrun_fence('invoices', 1234); UPDATE ...; COMMIT;
-- The upsert locks the resource's row until that transaction ends, so a
-- newer holder's call waits for an older holder's commit (or rollback), and
-- once a newer token is recorded every older writer is refused.
--
-- Safe to run again: the table is created only if missing and the function
-- is replaced in place, keeping its grants.
CREATE TABLE IF NOT EXISTS {{schema}}.lockrun_fences (
    resource   text        PRIMARY KEY,
    token      bigint      NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE OR REPLACE FUNCTION {{schema}}.lockrun_fence(resource text, token bigint)
RETURNS bigint
LANGUAGE plpgsql
AS $fence$
#variable_conflict use_column
DECLARE
    seen bigint;
BEGIN
    IF $1 IS NULL OR $2 IS NULL THEN
        RAISE EXCEPTION 'lockrun_fence: resource and token must not be null'
            USING ERRCODE = '22004';
    END IF;
    INSERT INTO {{schema}}.lockrun_fences AS f (resource, token)
    VALUES ($1, $2)
    ON CONFLICT (resource) DO UPDATE
        SET token = excluded.token, updated_at = now()
        WHERE f.token <= excluded.token
    RETURNING f.token INTO seen;
    IF NOT FOUND THEN
        -- ON CONFLICT locked the row even though its WHERE was false, so
        -- this reads the token that refused us.
        SELECT f.token INTO seen FROM {{schema}}.lockrun_fences AS f WHERE f.resource = $1;
        RAISE EXCEPTION 'lockrun_fence: token % for resource % is older than % (a newer lock holder has written)', $2, quote_literal($1), seen
            USING ERRCODE = 'LRF01',
                  HINT = 'this writer lost its lock: stop, do not retry with the same token';
    END IF;
    RETURN seen;
END
$fence$;
