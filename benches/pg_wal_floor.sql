-- WAL and execution time per event, by data model, measured in PostgreSQL
-- alone (issue 30).
--
--   createdb walfloor && psql -q -d walfloor -f benches/pg_wal_floor.sql
--
-- Each model writes 20,000 task creations over 32 organizations, in batches
-- of 20 per organization, in statements of the shape the service sends: one
-- statement per table and batch, its rows unnested from arrays. The ids
-- (time-ordered, like UUIDv7) and the JSON (a task of 281 bytes, its envelope
-- of 453, as pg_column_size counts them) are made before any model runs, so
-- the time measured is the statements' execution and nothing else. Each model
-- starts after a CHECKPOINT (skipped without the pg_checkpoint role) and runs
-- twice, in the order A B C C B A.
--
-- - today: the resource row and an outbox row at the commit; then, when the
--   attempt is recorded, the outbox row deleted, a log record with the
--   envelope inserted and the organization's log count updated.
-- - payloads_only: the resource row and one row with the envelope, each with
--   its primary key, and nothing else: what any model that keeps both the
--   resource and its event's envelope writes before its 2xx.
-- - entry: the same, the attempt then recorded by an update of the envelope's
--   row in place (the log record as the queue entry), the table at 45 % fill
--   so that every update stays on its page.
--
-- The time is wall time of one backend (on a quiet machine, its CPU time),
-- inside one transaction: no commit, flush, round trip or parse is in it.
-- The tables are created here and dropped at the end.

CREATE FUNCTION pg_temp.uv7(n bigint) RETURNS uuid LANGUAGE sql AS $$
  SELECT (lpad(to_hex(1700000000000 + n), 12, '0') || '7' || substr(md5(n::text), 1, 3) || '8'
          || substr(md5(n::text), 4, 15))::uuid $$;

CREATE TEMP TABLE orgs AS SELECT array_agg(gen_random_uuid()) AS ids FROM generate_series(1, 32);
CREATE TEMP TABLE batches AS
  SELECT b, (SELECT ids FROM orgs)[1 + b % 32] AS org,
         array_agg(pg_temp.uv7(b * 20 + e) ORDER BY e) AS resource_ids,
         array_agg(pg_temp.uv7(1000000 + b * 20 + e) ORDER BY e) AS delivery_ids,
         array_agg(pg_temp.uv7(2000000 + b * 20 + e) ORDER BY e) AS log_ids
    FROM generate_series(1, 1000) AS b, generate_series(1, 20) AS e GROUP BY b;
ALTER TABLE batches ADD COLUMN tasks text[], ADD COLUMN envelopes text[];
UPDATE batches SET tasks = (SELECT array_agg('{"id":"' || r || '","title":"load task 12345",'
    '"status":"open","assignee_id":null,"description":"","parent_id":null,'
    '"created_at":"2026-11-27T10:52:14.887Z","updated_at":"2026-11-27T10:52:14.887Z",'
    '"organization_id":"' || org || '"}') FROM unnest(resource_ids) AS r);
UPDATE batches SET envelopes = (SELECT array_agg('{"id":"' || d || '","type":"task.created",'
    '"created_at":"2026-11-27T10:52:14.887Z","organization_id":"' || org || '","data":' || t || '}')
    FROM unnest(delivery_ids, tasks) AS u(d, t));
CREATE TEMP TABLE measured (model text, run_at timestamptz DEFAULT clock_timestamp(),
  us_per_event numeric, wal_bytes_per_event numeric);

-- Today's tables, as the migrations leave them.
CREATE TABLE floor_resources (organization_id uuid NOT NULL, kind text NOT NULL, id uuid NOT NULL,
  parent_id uuid, data json NOT NULL, PRIMARY KEY (organization_id, kind, id));
CREATE INDEX ON floor_resources (organization_id, kind, parent_id, id) WHERE parent_id IS NOT NULL;
CREATE TABLE floor_outbox (organization_id uuid NOT NULL, delivery_id uuid NOT NULL, event text NOT NULL,
  body json NOT NULL, attempts_made smallint NOT NULL, due_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL, claim bigint, claim_read bigint,
  PRIMARY KEY (organization_id, delivery_id)) WITH (fillfactor = 70);
CREATE TABLE floor_log (organization_id uuid NOT NULL, id uuid NOT NULL, delivery_id uuid NOT NULL,
  event text NOT NULL, attempt smallint, outcome text NOT NULL, response_code integer,
  response_body text, latency_ms bigint, error text, attempted_at timestamptz NOT NULL,
  envelope json NOT NULL, PRIMARY KEY (organization_id, id));
CREATE INDEX ON floor_log (organization_id, delivery_id, id);
CREATE TABLE floor_log_counts (organization_id uuid PRIMARY KEY, records bigint NOT NULL)
  WITH (fillfactor = 50);
INSERT INTO floor_log_counts SELECT o, 0 FROM unnest((SELECT ids FROM orgs)) AS o;
-- The log record as the queue entry.
CREATE TABLE floor_entries (organization_id uuid NOT NULL, id uuid NOT NULL, event text NOT NULL,
  attempt smallint NOT NULL, due_at timestamptz NOT NULL, outcome text, response_code integer,
  response_body text, latency_ms bigint, error text, attempted_at timestamptz,
  envelope json NOT NULL, PRIMARY KEY (organization_id, id)) WITH (fillfactor = 45);

CREATE FUNCTION pg_temp.run(model text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  b record;
  started timestamptz;
  wal_from pg_lsn;
BEGIN
  TRUNCATE floor_resources, floor_outbox, floor_log, floor_entries;
  BEGIN
    CHECKPOINT;
  EXCEPTION WHEN insufficient_privilege THEN NULL;
  END;
  started := clock_timestamp();
  wal_from := pg_current_wal_lsn();
  FOR b IN SELECT * FROM batches ORDER BY batches.b LOOP
    INSERT INTO floor_resources SELECT b.org, 'task', i, NULL, t::json
      FROM unnest(b.resource_ids, b.tasks) AS u(i, t);
    IF model = 'today' THEN
      INSERT INTO floor_outbox SELECT b.org, d, 'task.created', e::json, 0, now(), now(), 1, -1
        FROM unnest(b.delivery_ids, b.envelopes) AS u(d, e);
      DELETE FROM floor_outbox WHERE (organization_id, delivery_id) IN
        (SELECT b.org, d FROM unnest(b.delivery_ids) AS d);
      INSERT INTO floor_log SELECT b.org, l, d, 'task.created', 1, 'succeeded', 200, '', 3, NULL,
          now(), e::json
        FROM unnest(b.log_ids, b.delivery_ids, b.envelopes) AS u(l, d, e);
      UPDATE floor_log_counts SET records = records + 20 WHERE organization_id = b.org;
    ELSE
      INSERT INTO floor_entries (organization_id, id, event, attempt, due_at, envelope)
        SELECT b.org, d, 'task.created', 1, now(), e::json FROM unnest(b.delivery_ids, b.envelopes) AS u(d, e);
      IF model = 'entry' THEN
        UPDATE floor_entries SET outcome = 'succeeded', response_code = 200, response_body = '',
            latency_ms = 3, attempted_at = now()
          WHERE (organization_id, id) IN (SELECT b.org, d FROM unnest(b.delivery_ids) AS d);
      END IF;
    END IF;
  END LOOP;
  INSERT INTO measured (model, us_per_event, wal_bytes_per_event) VALUES (model,
    round(extract(epoch FROM clock_timestamp() - started) * 1e6 / 20000, 1),
    round(pg_wal_lsn_diff(pg_current_wal_lsn(), wal_from) / 20000));
END $$;

SELECT pg_temp.run('today'), pg_temp.run('payloads_only'), pg_temp.run('entry'),
       pg_temp.run('entry'), pg_temp.run('payloads_only'), pg_temp.run('today') \gset
SELECT model, array_agg(us_per_event ORDER BY run_at) AS us_per_event,
       array_agg(wal_bytes_per_event ORDER BY run_at) AS wal_bytes_per_event
  FROM measured GROUP BY model ORDER BY min(run_at);
SELECT pg_column_size(tasks[1]::json) AS task_bytes, pg_column_size(envelopes[1]::json) AS envelope_bytes
  FROM batches LIMIT 1;

DROP TABLE floor_resources, floor_outbox, floor_log, floor_log_counts, floor_entries;
