-- Takes a slot of key $1, a semaphore of limit $6, for holder $2, run $3,
-- for $4 microseconds, recording the holder's info $5 (JSON).
--
-- A semaphore is the key's one row, marked by an empty run_id (no run has
-- one): token is the key's counter, shared with the plain lock; info holds
-- the limit and every holder's lease, {"limit": N, "holders": [{"run",
-- "token", "holder", "exp", "granted", "renewed", "info"[, "released"]}]}
-- with times in microseconds on the server's clock; expires_at is the
-- latest holder's expiry, so that the plain lock's statements, and an older
-- lockrun's, see the key held exactly while a holder can be live. A holder
-- is live while its exp and the row's expires_at are both ahead of now().
--
-- The row is locked FOR UPDATE only when it looks grantable (free, or
-- with a free or own slot of this limit), which the lock re-checks on the
-- row's latest version: the decision below is then taken on the row as
-- it is, and the UPDATE writes that same version, since every statement
-- that changes a semaphore's holders locks the row too. A row that does
-- not look grantable is read, not locked, so a crowd asking for a full
-- semaphore costs reads, not a convoy of row locks; it is reported as the
-- statement's snapshot shows it. A key held as a plain lock (run_id set,
-- live) or by holders of another limit grants nothing. Run $3's own live
-- slot is a retry whose first reply was lost: it keeps its token and
-- grant time, and its lease restarts at this statement. Otherwise a free
-- slot gets the next token: one more than the counter, never less than
-- the server's clock in microseconds. A missing row is inserted.
--
-- Holders are kept in no particular order (readers sort them by token),
-- and jsonpath filters them, which keeps the statement cheap to plan: it
-- is planned anew each time, as every statement of the backend.
--
-- Returns one row: whether this statement wrote the grant, the token, the
-- key's limit as found (0 free, 1 plain, N), the live holders (after the
-- grant when ours) as a JSON array, the server's clock in microseconds,
-- and whether the caller should ask again: the row it saw would have
-- granted, but a concurrent statement changed it first (or inserted it).
WITH clock AS MATERIALIZED (
    SELECT c.us, jsonb_build_object('run', $3::text, 'now', c.us) AS v
    FROM (SELECT (extract(epoch FROM now()) * 1000000)::bigint AS us) AS c
), snapshot AS MATERIALIZED (
    SELECT token, run_id, expires_at, info FROM {{table}} WHERE key = $1
), cur AS MATERIALIZED (
    SELECT l.token, l.run_id, l.expires_at, l.info FROM {{table}} AS l, clock
    WHERE l.key = $1 AND (l.expires_at <= now() OR l.run_id = '' AND (
        NOT jsonb_path_exists(l.info::jsonb, '$.holders[*] ? (@.exp > $now)', clock.v)
        OR coalesce((l.info::jsonb ->> 'limit')::int, 2) = $6 AND (
            jsonb_array_length(jsonb_path_query_array(l.info::jsonb, '$.holders[*] ? (@.exp > $now)', clock.v)) < $6
            OR jsonb_path_exists(l.info::jsonb, '$.holders[*] ? (@.run == $run && @.exp > $now)', clock.v))))
    FOR UPDATE OF l
), seen AS MATERIALIZED (
    SELECT * FROM cur
    UNION ALL
    SELECT * FROM snapshot WHERE NOT EXISTS (SELECT FROM cur)
), found AS MATERIALIZED (
    SELECT coalesce(r.token, 0) AS counter, r.expires_at, h.live, clock.us,
        CASE WHEN r.expires_at IS NULL OR r.expires_at <= now() THEN 0
             WHEN r.run_id <> '' THEN 1
             WHEN jsonb_array_length(h.live) = 0 THEN 0
             ELSE coalesce((r.info::jsonb ->> 'limit')::int, 2) END AS lim,
        jsonb_path_query_first(h.live, '$[*] ? (@.run == $run)', clock.v) AS own
    FROM clock
    LEFT JOIN seen AS r ON true
    CROSS JOIN LATERAL (
        SELECT CASE WHEN r.run_id = '' AND r.expires_at > now()
                    THEN jsonb_path_query_array(r.info::jsonb, '$.holders[*] ? (@.exp > $now)', clock.v)
                    ELSE '[]' END AS live
    ) AS h
), decision AS MATERIALIZED (
    SELECT f.*, (f.lim = 0 OR f.lim = $6 AND CASE WHEN f.own IS NULL THEN jsonb_array_length(f.live) < $6
                                                 ELSE f.own -> 'released' IS NULL END) AS grantable
    FROM found f
), won AS MATERIALIZED (
    -- a grant only on the locked row, or for a row that is missing
    SELECT d.*, CASE WHEN d.own IS NOT NULL THEN (d.own ->> 'token')::bigint
                     ELSE greatest(d.counter + 1, d.us) END AS tok
    FROM decision d
    WHERE d.grantable AND (EXISTS (SELECT FROM cur) OR NOT EXISTS (SELECT FROM snapshot))
), next AS MATERIALIZED (
    SELECT w.tok,
        greatest(w.expires_at, now() + $4::bigint * interval '1 microsecond') AS expires_at,
        jsonb_build_object('limit', $6::int, 'holders',
            jsonb_path_query_array(w.live, '$[*] ? (@.run != $run)', clock.v)
            || jsonb_build_object('run', $3::text, 'token', w.tok, 'holder', $2::text, 'exp', w.us + $4::bigint,
                'granted', coalesce(w.own -> 'granted', to_jsonb(w.us)), 'renewed', w.us, 'info', $5::jsonb)) AS info
    FROM won w, clock
), updated AS (
    UPDATE {{table}} AS l
    SET token = greatest(l.token, n.tok), holder = $2, run_id = '', expires_at = n.expires_at,
        granted_at = now(), renewed_at = now(), released_at = NULL, info = n.info::text
    FROM next n
    WHERE l.key = $1 AND EXISTS (SELECT FROM cur)
    RETURNING l.key
), inserted AS (
    INSERT INTO {{table}} (key, token, holder, run_id, expires_at, granted_at, renewed_at, info, released_at)
    SELECT $1, n.tok, $2, '', n.expires_at, now(), now(), n.info::text, NULL
    FROM next n
    WHERE NOT EXISTS (SELECT FROM snapshot)
    ON CONFLICT (key) DO NOTHING
    RETURNING key
), wrote AS (
    SELECT EXISTS (SELECT FROM updated) OR EXISTS (SELECT FROM inserted) AS ours
)
SELECT wrote.ours, coalesce(n.tok, 0) AS token, d.lim,
    (CASE WHEN wrote.ours THEN n.info -> 'holders' ELSE d.live END)::text AS holders, d.us AS server,
    d.grantable AND NOT wrote.ours AS retry
FROM decision d CROSS JOIN wrote LEFT JOIN next n ON true
