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
-- FOR UPDATE locks the row and reads its latest version, and every
-- statement that changes a semaphore's holders locks it as well: the
-- decision below is taken on the row as it is, and the UPDATE writes that
-- same version. A key held as a plain lock (run_id set, live) or by
-- holders of another limit grants nothing. Run $3's own live slot is a
-- retry whose first reply was lost: it keeps its token and grant time, and
-- its lease restarts at this statement. Otherwise a free slot gets the
-- next token: one more than the counter, never less than the server's
-- clock in microseconds.
--
-- Returns one row: whether this statement wrote the grant, the token, the
-- key's limit as found (0 free, 1 plain, N), the live holders (after the
-- grant when ours) as a JSON array, and the server's clock in
-- microseconds. Not ours with limit 0 means a concurrent first acquirer
-- inserted the row: the caller asks again.
WITH clock AS MATERIALIZED (
    SELECT (extract(epoch FROM now()) * 1000000)::bigint AS us
), cur AS MATERIALIZED (
    SELECT token, run_id, expires_at, info FROM {{table}} WHERE key = $1 FOR UPDATE
), live AS MATERIALIZED (
    SELECT e FROM cur, clock,
        jsonb_array_elements(CASE WHEN cur.run_id = '' AND cur.expires_at > now() THEN cur.info::jsonb -> 'holders' END) AS e
    WHERE (e ->> 'exp')::bigint > clock.us
), state AS MATERIALIZED (
    SELECT coalesce(cur.token, 0) AS counter,
        CASE WHEN cur.expires_at IS NULL OR cur.expires_at <= now() THEN 0
             WHEN cur.run_id <> '' THEN 1
             WHEN NOT EXISTS (SELECT FROM live) THEN 0
             ELSE coalesce((cur.info::jsonb ->> 'limit')::int, 2) END AS lim,
        (SELECT e FROM live WHERE e ->> 'run' = $3 LIMIT 1) AS own,
        (SELECT count(*) FROM live) AS n
    FROM clock LEFT JOIN cur ON true
), decision AS MATERIALIZED (
    SELECT s.*, (s.lim = 0 OR s.lim = $6 AND CASE WHEN s.own IS NULL THEN s.n < $6
                                                  ELSE s.own -> 'released' IS NULL END) AS granted
    FROM state s
), issue AS MATERIALIZED (
    SELECT CASE WHEN d.own IS NOT NULL THEN (d.own ->> 'token')::bigint
                ELSE greatest(d.counter + 1, clock.us) END AS tok,
        coalesce(d.own -> 'granted', to_jsonb(clock.us)) AS since
    FROM decision d, clock
    WHERE d.granted
), next AS MATERIALIZED (
    SELECT jsonb_agg(x.e ORDER BY (x.e ->> 'token')::bigint) AS holders, max((x.e ->> 'exp')::bigint) AS exp
    FROM (
        SELECT e FROM live WHERE e ->> 'run' <> $3
        UNION ALL
        SELECT jsonb_build_object('run', $3::text, 'token', i.tok, 'holder', $2::text, 'exp', clock.us + $4::bigint,
            'granted', i.since, 'renewed', clock.us, 'info', $5::jsonb)
        FROM issue i, clock
    ) x
    WHERE EXISTS (SELECT FROM issue)
), updated AS (
    UPDATE {{table}} AS l
    SET token = greatest(l.token, i.tok), holder = $2, run_id = '',
        expires_at = timestamptz 'epoch' + n.exp * interval '1 microsecond',
        granted_at = now(), renewed_at = now(), released_at = NULL,
        info = jsonb_build_object('limit', $6::int, 'holders', n.holders)::text
    FROM issue i, next n
    WHERE l.key = $1 AND EXISTS (SELECT FROM cur)
    RETURNING l.token
), inserted AS (
    INSERT INTO {{table}} (key, token, holder, run_id, expires_at, granted_at, renewed_at, info, released_at)
    SELECT $1, i.tok, $2, '', timestamptz 'epoch' + n.exp * interval '1 microsecond', now(), now(),
        jsonb_build_object('limit', $6::int, 'holders', n.holders)::text, NULL
    FROM issue i, next n
    WHERE NOT EXISTS (SELECT FROM cur)
    ON CONFLICT (key) DO NOTHING
    RETURNING token
)
SELECT EXISTS (SELECT FROM updated) OR EXISTS (SELECT FROM inserted), coalesce(i.tok, 0), d.lim,
    coalesce(CASE WHEN EXISTS (SELECT FROM updated) OR EXISTS (SELECT FROM inserted) THEN (SELECT holders FROM next) END,
             (SELECT jsonb_agg(e ORDER BY (e ->> 'token')::bigint) FROM live), '[]')::text,
    clock.us
FROM decision d CROSS JOIN clock LEFT JOIN issue i ON true
