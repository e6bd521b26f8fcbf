-- Takes key $1 for holder $2, run $3, for $4 microseconds when the row is
-- new, free or expired by the server's clock, and issues the next fencing
-- token in the same statement: one more than the last, and never less than
-- the server's clock in microseconds, so that a restored backup or a
-- re-created table cannot hand out a token again.
--
-- A held row is rewritten unchanged: the update locks the row and returns
-- its latest version, so a loser learns the current holder and its time
-- left in the same round trip, even when the winner committed a moment
-- ago. now() is the statement's start on the server, later than the moment
-- the client sent it: leases last at least their TTL from the client's
-- send time.
INSERT INTO {{table}} AS l (key, token, holder, run_id, expires_at)
VALUES ($1, greatest(1, (extract(epoch FROM now()) * 1000000)::bigint), $2, $3,
        now() + $4::bigint * interval '1 microsecond')
ON CONFLICT (key) DO UPDATE SET
    token      = CASE WHEN l.expires_at <= now() THEN greatest(l.token + 1, excluded.token) ELSE l.token END,
    holder     = CASE WHEN l.expires_at <= now() THEN excluded.holder ELSE l.holder END,
    run_id     = CASE WHEN l.expires_at <= now() THEN excluded.run_id ELSE l.run_id END,
    expires_at = CASE WHEN l.expires_at <= now() THEN excluded.expires_at ELSE l.expires_at END
RETURNING token, holder, run_id,
    (extract(epoch FROM greatest(expires_at, now()) - now()) * 1000000)::bigint
