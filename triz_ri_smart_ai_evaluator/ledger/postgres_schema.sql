-- The PostgreSQL ledger schema (issue 3; spec 1.17, 9.2, 9.3, 10.4).
--
-- Run by PostgresStore.init_schema as the NOLOGIN owner role, after it has created the roles and
-- the schema.  @schema@, @writer@ and @reader@ are replaced by quoted identifiers, @lock_key@ by
-- an integer literal.  Every statement is idempotent, so running it twice changes nothing.
--
-- Why it is shaped like this: the evaluated policy must not be able to delete, rewrite or hide a
-- record (1.17, 9.2, 10.4), and the log's only writer must be a trusted component whose checks
-- hold whatever the caller sends (9.3).  So the application's writer role has no privilege on any
-- table; it may only call the SECURITY DEFINER functions below, and ledger_append re-checks
-- positions, leaf hashes and chain links itself.  Row triggers and a statement-level TRUNCATE
-- trigger refuse every UPDATE, DELETE and TRUNCATE, even by the owner or a superuser, until
-- someone deliberately disables them.  A rewrite by such a person is still caught by the chain,
-- the Merkle tree and the witnessed checkpoints (verify), never by these guards alone.

CREATE TABLE IF NOT EXISTS @schema@.events (
    seq bigint PRIMARY KEY CHECK (seq >= 1),
    leaf bytea NOT NULL CHECK (length(leaf) = 32),
    kind text NOT NULL,
    attempt text,
    body bytea NOT NULL
);
CREATE INDEX IF NOT EXISTS events_attempt ON @schema@.events (attempt, seq)
    WHERE attempt IS NOT NULL;
CREATE TABLE IF NOT EXISTS @schema@.evidence (
    digest text PRIMARY KEY CHECK (digest ~ '^[0-9a-f]{64}$'),
    data bytea NOT NULL
);
CREATE TABLE IF NOT EXISTS @schema@.checkpoints (
    size bigint PRIMARY KEY CHECK (size >= 1),
    note text NOT NULL
);
-- The end of the log, as SQLite keeps it: one row, changed only by ledger_append.
CREATE TABLE IF NOT EXISTS @schema@.head (
    id smallint PRIMARY KEY CHECK (id = 1),
    size bigint NOT NULL,
    last_leaf text NOT NULL,
    peaks bytea NOT NULL,
    cp_size bigint NOT NULL,
    cp_time double precision NOT NULL
);
INSERT INTO @schema@.head VALUES (1, 0, repeat('0', 64), ''::bytea, 0, 0)
    ON CONFLICT (id) DO NOTHING;
-- The log key's signed statement of the head (issue 11 item 3), in the head row itself (so the
-- append that moves the head writes it with no extra row): it protects the events after the
-- last checkpoint, which no checkpoint signs yet.  Someone with write access but without the key
-- can change it, never forge it; a store opening the ledger checks the tail against it.
ALTER TABLE @schema@.head ADD COLUMN IF NOT EXISTS note text;
-- Refusals of a tail that does not match the signed head, kept until the next good start
-- records them in the log as a ledger.tamper_detected event (then they are deleted).
CREATE TABLE IF NOT EXISTS @schema@.alarms (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT now(),
    reason text NOT NULL
);

-- Guards (1.17): the record tables are append-only; the head only moves forward (its trigger
-- fires only when a change would move it back, so the hot path pays nothing for it).
CREATE OR REPLACE FUNCTION @schema@.refuse_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RAISE EXCEPTION 'ledger table %.% is append-only: % refused', TG_TABLE_SCHEMA, TG_TABLE_NAME,
        TG_OP;
END
$fn$;
CREATE OR REPLACE FUNCTION @schema@.head_forward_only() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RAISE EXCEPTION 'ledger head %.% only moves forward', TG_TABLE_SCHEMA, TG_TABLE_NAME;
END
$fn$;
CREATE OR REPLACE TRIGGER append_only BEFORE UPDATE OR DELETE ON @schema@.events
    FOR EACH ROW EXECUTE FUNCTION @schema@.refuse_change();
CREATE OR REPLACE TRIGGER no_truncate BEFORE TRUNCATE ON @schema@.events
    FOR EACH STATEMENT EXECUTE FUNCTION @schema@.refuse_change();
CREATE OR REPLACE TRIGGER append_only BEFORE UPDATE OR DELETE ON @schema@.evidence
    FOR EACH ROW EXECUTE FUNCTION @schema@.refuse_change();
CREATE OR REPLACE TRIGGER no_truncate BEFORE TRUNCATE ON @schema@.evidence
    FOR EACH STATEMENT EXECUTE FUNCTION @schema@.refuse_change();
CREATE OR REPLACE TRIGGER append_only BEFORE UPDATE OR DELETE ON @schema@.checkpoints
    FOR EACH ROW EXECUTE FUNCTION @schema@.refuse_change();
CREATE OR REPLACE TRIGGER no_truncate BEFORE TRUNCATE ON @schema@.checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION @schema@.refuse_change();
CREATE OR REPLACE TRIGGER forward_only BEFORE UPDATE ON @schema@.head
    FOR EACH ROW WHEN (NEW.size < OLD.size OR NEW.cp_size < OLD.cp_size)
    EXECUTE FUNCTION @schema@.head_forward_only();
CREATE OR REPLACE TRIGGER no_delete BEFORE DELETE ON @schema@.head
    FOR EACH ROW EXECUTE FUNCTION @schema@.refuse_change();
CREATE OR REPLACE TRIGGER no_truncate BEFORE TRUNCATE ON @schema@.head
    FOR EACH STATEMENT EXECUTE FUNCTION @schema@.refuse_change();
-- ENABLE ALWAYS: the guards fire even under session_replication_role = replica, which would
-- otherwise switch ordinary triggers off without an ALTER TABLE.
ALTER TABLE @schema@.events ENABLE ALWAYS TRIGGER append_only;
ALTER TABLE @schema@.events ENABLE ALWAYS TRIGGER no_truncate;
ALTER TABLE @schema@.evidence ENABLE ALWAYS TRIGGER append_only;
ALTER TABLE @schema@.evidence ENABLE ALWAYS TRIGGER no_truncate;
ALTER TABLE @schema@.checkpoints ENABLE ALWAYS TRIGGER append_only;
ALTER TABLE @schema@.checkpoints ENABLE ALWAYS TRIGGER no_truncate;
ALTER TABLE @schema@.head ENABLE ALWAYS TRIGGER forward_only;
ALTER TABLE @schema@.head ENABLE ALWAYS TRIGGER no_delete;
ALTER TABLE @schema@.head ENABLE ALWAYS TRIGGER no_truncate;

-- The writer's entry points.  SECURITY DEFINER functions run as the owner, so each pins
-- search_path (pg_catalog first, pg_temp last, as the PostgreSQL manual advises for security
-- definer functions) and names every object with its schema.

-- The head, after taking the append lock: held until the caller's transaction ends, so the head
-- cannot move between this read and ledger_append, and two writers never fork the chain (9.3).
CREATE OR REPLACE FUNCTION @schema@.ledger_head()
RETURNS TABLE (size bigint, last_leaf text, peaks bytea, cp_size bigint, cp_time double precision)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(@lock_key@);
    RETURN QUERY SELECT h.size, h.last_leaf, h.peaks, h.cp_size, h.cp_time
        FROM @schema@.head AS h WHERE h.id = 1;
END
$fn$;

-- Append sealed events (and a signed checkpoint when one is due) and move the head.  Whatever
-- the caller sends, only a contiguous continuation of the stored chain is accepted (1.17, 9.3):
-- positions follow the stored head, each leaf is SHA-256(0x00 || body), each body's prev is the
-- previous leaf and its seq, kind and attempt are those of the indexed columns.
-- head_note, when given, is the log key's signature of the new head, stored in the same
-- transaction (issue 11 item 3).  The signature before it took no note: dropped on upgrade.
DROP FUNCTION IF EXISTS @schema@.ledger_append(bigint[], bytea[], text[], text[], bytea[],
    bigint, text, bytea, bigint, double precision, bigint, text);
CREATE OR REPLACE FUNCTION @schema@.ledger_append(
    seqs bigint[], leafs bytea[], kinds text[], attempts text[], bodies bytea[],
    head_size bigint, head_last_leaf text, head_peaks bytea,
    cp_size bigint, cp_time double precision,
    checkpoint_size bigint, checkpoint_note text, head_note text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    n integer := coalesce(cardinality(seqs), 0);
    cur record;
    prev text;
    doc jsonb;
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(@lock_key@);
    SELECT h.size, h.last_leaf, h.cp_size,
           (SELECT coalesce(max(e.seq), 0) FROM @schema@.events AS e) AS stored
        INTO STRICT cur FROM @schema@.head AS h WHERE h.id = 1 FOR UPDATE;
    IF cur.stored <> cur.size THEN
        RAISE EXCEPTION 'ledger head says % events but % are stored', cur.size, cur.stored
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF head_size IS NULL OR head_size - n <> cur.size THEN
        -- Sealed after another head: a writer that cached its head lost a race (or a call is
        -- being replayed).  Refused with a retryable code; the store re-reads the head.
        RAISE EXCEPTION 'the ledger head moved: % events stored, the batch follows %',
            cur.size, head_size - n USING ERRCODE = 'serialization_failure';
    END IF;
    IF coalesce(cardinality(leafs), 0) <> n OR coalesce(cardinality(kinds), 0) <> n
       OR coalesce(cardinality(attempts), 0) <> n OR coalesce(cardinality(bodies), 0) <> n THEN
        RAISE EXCEPTION 'append arrays differ in length'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    prev := cur.last_leaf;
    FOR i IN 1 .. n LOOP
        IF seqs[i] IS DISTINCT FROM cur.size + i THEN
            RAISE EXCEPTION 'event seq % does not continue the log (expected %)',
                seqs[i], cur.size + i USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        IF bodies[i] IS NULL
           OR leafs[i] IS DISTINCT FROM sha256(decode('00', 'hex') || bodies[i]) THEN
            RAISE EXCEPTION 'event %: leaf is not SHA-256(0x00 || body)', seqs[i]
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        doc := convert_from(bodies[i], 'UTF8')::jsonb;
        IF doc->>'prev' IS DISTINCT FROM prev THEN
            RAISE EXCEPTION 'event %: prev % is not the previous leaf %', seqs[i],
                doc->>'prev', prev USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        IF doc->>'seq' IS DISTINCT FROM seqs[i]::text OR doc->>'kind' IS DISTINCT FROM kinds[i]
           OR doc->>'attempt' IS DISTINCT FROM attempts[i] THEN
            RAISE EXCEPTION 'event %: seq, kind or attempt differ from the body', seqs[i]
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        prev := encode(leafs[i], 'hex');
    END LOOP;
    IF head_size IS DISTINCT FROM cur.size + n OR head_last_leaf IS DISTINCT FROM prev
       OR head_peaks IS NULL
       OR length(head_peaks) <> 32 * bit_count(head_size::bit(64))
       OR ledger_append.cp_size IS NULL OR ledger_append.cp_size < cur.cp_size
       OR ledger_append.cp_size > head_size OR ledger_append.cp_time IS NULL THEN
        RAISE EXCEPTION 'the new head does not follow the appended events'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF checkpoint_size IS NOT NULL OR checkpoint_note IS NOT NULL THEN
        IF checkpoint_size IS DISTINCT FROM head_size
           OR ledger_append.cp_size IS DISTINCT FROM checkpoint_size OR checkpoint_note IS NULL THEN
            RAISE EXCEPTION 'a checkpoint must be of the new head'
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        INSERT INTO @schema@.checkpoints (size, note) VALUES (checkpoint_size, checkpoint_note);
    ELSIF ledger_append.cp_size <> cur.cp_size THEN
        RAISE EXCEPTION 'the checkpoint size moved without a checkpoint'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    INSERT INTO @schema@.events (seq, leaf, kind, attempt, body)
        SELECT * FROM unnest(seqs, leafs, kinds, attempts, bodies);
    UPDATE @schema@.head AS h SET size = head_size, last_leaf = head_last_leaf,
        peaks = head_peaks, cp_size = ledger_append.cp_size, cp_time = ledger_append.cp_time,
        note = coalesce(head_note, h.note)
        WHERE h.id = 1;
    RETURN head_size;
END
$fn$;

-- Evidence blobs and the events that name them, in one call and one transaction (issue 16
-- item 4: a policy submission is one round trip; spec 10.4: the attempt is logged with what it
-- submitted, or neither is kept).  Each digest is recomputed here and must be the caller's;
-- the events go through ledger_append and all of its checks.  The work runs in a
-- subtransaction (the EXCEPTION block): a refusal undoes the blobs and the events alike and is
-- returned as data (SQLSTATE and message) instead of raised, so that it does not abort a
-- group commit the call is part of, and the client needs no savepoint round trips around it.
CREATE OR REPLACE FUNCTION @schema@.ledger_append_evidence(
    blobs bytea[], digests text[],
    seqs bigint[], leafs bytea[], kinds text[], attempts text[], bodies bytea[],
    head_size bigint, head_last_leaf text, head_peaks bytea,
    cp_size bigint, cp_time double precision,
    checkpoint_size bigint, checkpoint_note text, head_note text,
    OUT size bigint, OUT refused_state text, OUT refused_message text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    m integer := coalesce(cardinality(blobs), 0);
BEGIN
    BEGIN
        IF coalesce(cardinality(digests), 0) <> m THEN
            RAISE EXCEPTION 'evidence arrays differ in length'
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        FOR i IN 1 .. m LOOP
            IF blobs[i] IS NULL
               OR digests[i] IS DISTINCT FROM encode(sha256(blobs[i]), 'hex') THEN
                RAISE EXCEPTION 'evidence %: the digest is not SHA-256 of the blob', i
                    USING ERRCODE = 'integrity_constraint_violation';
            END IF;
        END LOOP;
        INSERT INTO @schema@.evidence (digest, data)
            SELECT DISTINCT ON (u.d) u.d, u.b FROM unnest(digests, blobs) AS u (d, b)
            ON CONFLICT (digest) DO NOTHING;
        size := @schema@.ledger_append(seqs, leafs, kinds, attempts, bodies, head_size,
            head_last_leaf, head_peaks, cp_size, cp_time, checkpoint_size, checkpoint_note,
            head_note);
    EXCEPTION WHEN OTHERS THEN
        size := NULL;
        refused_state := SQLSTATE;
        refused_message := SQLERRM;
    END;
END
$fn$;

-- The signed head: ledger_append writes it with the head; ledger_sign_head only when a key
-- holder re-signs what the database holds (unsafe_resign_head); read when a store opens.
CREATE OR REPLACE FUNCTION @schema@.ledger_sign_head(note text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(@lock_key@);
    UPDATE @schema@.head AS h SET note = ledger_sign_head.note WHERE h.id = 1;
END
$fn$;
CREATE OR REPLACE FUNCTION @schema@.ledger_signed_head() RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RETURN (SELECT h.note FROM @schema@.head AS h WHERE h.id = 1);
END
$fn$;
-- Alarms: raised by a store that refused the tail, taken (and deleted) by the next good start
-- in the transaction that records them as an event.
CREATE OR REPLACE FUNCTION @schema@.ledger_raise_alarm(reason text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    INSERT INTO @schema@.alarms (reason) VALUES (left(ledger_raise_alarm.reason, 2000));
END
$fn$;
CREATE OR REPLACE FUNCTION @schema@.ledger_take_alarms() RETURNS SETOF text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RETURN QUERY WITH taken AS (DELETE FROM @schema@.alarms AS a RETURNING a.id, a.reason)
        SELECT t.reason FROM taken AS t ORDER BY t.id;
END
$fn$;

-- Content-addressed evidence: the digest is computed here, never taken from the caller.
CREATE OR REPLACE FUNCTION @schema@.ledger_put_evidence(data bytea) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    d text := encode(sha256(ledger_put_evidence.data), 'hex');
BEGIN
    INSERT INTO @schema@.evidence (digest, data) VALUES (d, ledger_put_evidence.data)
        ON CONFLICT (digest) DO NOTHING;
    RETURN d;
END
$fn$;

-- Reads, for the writer (which has no table privileges) and the reader.  PL/pgSQL, because it
-- caches its plans across calls (SQL-language functions with a SET clause re-plan every call);
-- paged, so a scan of a large log never materialises it whole.
CREATE OR REPLACE FUNCTION @schema@.ledger_size() RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RETURN (SELECT coalesce(max(e.seq), 0) FROM @schema@.events AS e);
END
$fn$;
CREATE OR REPLACE FUNCTION @schema@.ledger_scan(from_seq bigint, to_seq bigint, page integer)
RETURNS TABLE (seq bigint, body bytea)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RETURN QUERY SELECT e.seq, e.body FROM @schema@.events AS e
        WHERE e.seq >= from_seq AND e.seq <= to_seq ORDER BY e.seq LIMIT page;
END
$fn$;
-- The indexed columns beside the body, so that verify can check they agree with it.
CREATE OR REPLACE FUNCTION @schema@.ledger_scan_indexed(from_seq bigint, to_seq bigint, page integer)
RETURNS TABLE (seq bigint, body bytea, kind text, attempt text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RETURN QUERY SELECT e.seq, e.body, e.kind, e.attempt FROM @schema@.events AS e
        WHERE e.seq >= from_seq AND e.seq <= to_seq ORDER BY e.seq LIMIT page;
END
$fn$;
CREATE OR REPLACE FUNCTION @schema@.ledger_attempt_events(attempt text)
RETURNS TABLE (seq bigint, body bytea)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RETURN QUERY SELECT e.seq, e.body FROM @schema@.events AS e
        WHERE e.attempt = ledger_attempt_events.attempt ORDER BY e.seq;
END
$fn$;
CREATE OR REPLACE FUNCTION @schema@.ledger_evidence(digest text) RETURNS bytea
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RETURN (SELECT v.data FROM @schema@.evidence AS v WHERE v.digest = ledger_evidence.digest);
END
$fn$;
CREATE OR REPLACE FUNCTION @schema@.ledger_evidence_digests(after_digest text, page integer)
RETURNS SETOF text
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RETURN QUERY SELECT v.digest FROM @schema@.evidence AS v WHERE v.digest > after_digest
        ORDER BY v.digest LIMIT page;
END
$fn$;
CREATE OR REPLACE FUNCTION @schema@.ledger_checkpoints()
RETURNS TABLE (size bigint, note text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RETURN QUERY SELECT c.size, c.note FROM @schema@.checkpoints AS c ORDER BY c.size;
END
$fn$;

-- Seen nonces and idempotent answers of signed trusted requests (issue 11 item 2; see
-- access/nonces.py).  Not part of the log: rows expire and are deleted, so the table has no
-- append-only trigger; the writer reaches it only through the two functions below.
CREATE TABLE IF NOT EXISTS @schema@.nonces (
    principal text NOT NULL,
    nonce text NOT NULL,
    expires bigint NOT NULL,
    request text,
    answer bytea,
    CONSTRAINT nonces_key PRIMARY KEY (principal, nonce)
);
CREATE INDEX IF NOT EXISTS nonces_expires ON @schema@.nonces (expires);
-- Record a key once: true if recorded, false if it is there and not expired.  With purge,
-- expired rows are deleted first.
CREATE OR REPLACE FUNCTION @schema@.ledger_use_nonce(p_principal text, p_nonce text,
    p_expires bigint, p_now bigint, p_request text, p_answer bytea, p_purge boolean)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    IF p_purge THEN
        DELETE FROM @schema@.nonces AS n WHERE n.expires < p_now;
    END IF;
    INSERT INTO @schema@.nonces AS n (principal, nonce, expires, request, answer)
        VALUES (p_principal, p_nonce, p_expires, p_request, p_answer)
        ON CONFLICT ON CONSTRAINT nonces_key DO UPDATE
        SET expires = EXCLUDED.expires, request = EXCLUDED.request, answer = EXCLUDED.answer
        WHERE n.expires < p_now;
    RETURN FOUND;
END
$fn$;
CREATE OR REPLACE FUNCTION @schema@.ledger_nonce_answer(p_principal text, p_nonce text,
    p_now bigint)
RETURNS TABLE (request text, answer bytea)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RETURN QUERY SELECT n.request, n.answer FROM @schema@.nonces AS n
        WHERE n.principal = p_principal AND n.nonce = p_nonce AND n.expires >= p_now
        AND n.answer IS NOT NULL;
END
$fn$;

-- Privileges (9.2: minimum permissions).  Functions are executable by PUBLIC by default, so
-- everything is revoked first and granted back by name.  The writer gets no table privilege at
-- all; the reader (verify, auditors) may SELECT and call the read functions.
REVOKE ALL ON SCHEMA @schema@ FROM PUBLIC;
GRANT USAGE ON SCHEMA @schema@ TO @writer@, @reader@;
REVOKE ALL ON ALL TABLES IN SCHEMA @schema@ FROM PUBLIC, @writer@, @reader@;
GRANT SELECT ON @schema@.events, @schema@.evidence, @schema@.checkpoints, @schema@.head
    TO @reader@;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA @schema@ FROM PUBLIC, @writer@, @reader@;
GRANT EXECUTE ON FUNCTION @schema@.ledger_head(),
    @schema@.ledger_append(bigint[], bytea[], text[], text[], bytea[], bigint, text, bytea,
                           bigint, double precision, bigint, text, text),
    @schema@.ledger_append_evidence(bytea[], text[], bigint[], bytea[], text[], text[], bytea[],
                                    bigint, text, bytea, bigint, double precision, bigint, text,
                                    text),
    @schema@.ledger_put_evidence(bytea), @schema@.ledger_sign_head(text),
    @schema@.ledger_raise_alarm(text), @schema@.ledger_take_alarms(),
    @schema@.ledger_use_nonce(text, text, bigint, bigint, text, bytea, boolean),
    @schema@.ledger_nonce_answer(text, text, bigint)
    TO @writer@;
GRANT EXECUTE ON FUNCTION @schema@.ledger_size(), @schema@.ledger_scan(bigint, bigint, integer),
    @schema@.ledger_scan_indexed(bigint, bigint, integer),
    @schema@.ledger_attempt_events(text), @schema@.ledger_evidence(text),
    @schema@.ledger_evidence_digests(text, integer), @schema@.ledger_checkpoints(),
    @schema@.ledger_signed_head()
    TO @writer@, @reader@;
