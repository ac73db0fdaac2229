-- +goose Up
-- Workers cache the scopes revoked from each (tenant, sub) (package
-- revcache) without delaying a revocation's effect past the next attempt.
--
-- revocation_epoch.seq counts the committed changes of revocations. The
-- trigger below bumps it in the changing transaction and notifies
-- weft_revocations with the new seq and the (tenant, sub) changed; the
-- bump's row lock is held until commit, so seqs commit in order and
-- notifications (delivered in commit order) arrive in seq order.
CREATE TABLE revocation_epoch (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    seq       bigint  NOT NULL
);
INSERT INTO revocation_epoch (seq) VALUES (0);

-- One row per live cache (a worker process). A holder heartbeats every
-- second or so (heartbeat_at from the database clock) and acknowledges in
-- acked_seq every change it has dropped from its cache; it uses its cache
-- only for lease_ms after sending a heartbeat that succeeded. A revocation
-- returns once every holder whose lease (plus a margin) has not lapsed by
-- the database clock has acked it (store.AddRevocation).
CREATE TABLE revocation_cache_holders (
    holder_id    text        PRIMARY KEY,
    acked_seq    bigint      NOT NULL,
    lease_ms     integer     NOT NULL CHECK (lease_ms > 0),
    heartbeat_at timestamptz NOT NULL
);

-- +goose StatementBegin
CREATE FUNCTION weft_revocations_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    n       bigint;
    payload text;
BEGIN
    UPDATE revocation_epoch SET seq = seq + 1 RETURNING seq INTO n;
    IF TG_OP = 'INSERT' THEN
        payload := json_build_object('seq', n, 'tenant', NEW.tenant_id, 'sub', NEW.sub)::text;
    ELSIF TG_OP = 'DELETE' THEN
        payload := json_build_object('seq', n, 'tenant', OLD.tenant_id, 'sub', OLD.sub)::text;
    END IF;
    -- An update or a truncate (never done by weft), or a key too long for
    -- a notification's 8000 bytes, names no key: holders drop everything.
    IF payload IS NULL OR octet_length(payload) > 7900 THEN
        payload := json_build_object('seq', n)::text;
    END IF;
    PERFORM pg_notify('weft_revocations', payload);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER revocations_changed AFTER INSERT OR UPDATE OR DELETE ON revocations
    FOR EACH ROW EXECUTE FUNCTION weft_revocations_changed();
CREATE TRIGGER revocations_truncated AFTER TRUNCATE ON revocations
    FOR EACH STATEMENT EXECUTE FUNCTION weft_revocations_changed();

-- +goose Down
DROP TRIGGER revocations_truncated ON revocations;
DROP TRIGGER revocations_changed ON revocations;
DROP FUNCTION weft_revocations_changed();
DROP TABLE revocation_cache_holders;
DROP TABLE revocation_epoch;
