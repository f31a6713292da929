-- WAL per event, by data model, measured in PostgreSQL alone (issue 30).
--
--   createdb walfloor && psql -q -d walfloor -f benches/pg_wal_floor.sql
--
-- Each model writes 20,000 task creations over 32 organizations, in batches of
-- 20 per organization, with JSON of the sizes the load tool's burst writes
-- (a task of 281 bytes, its envelope of 453 bytes, as pg_column_size counts
-- them). WAL per event is pg_current_wal_lsn() before and after each model
-- (commit records not included), and the loop's wall time per event (noisy:
-- compare runs, not one figure).
--
-- - today: the resource row and an outbox row at the commit; the outbox row
--   deleted, a log record with the envelope inserted and the log count
--   updated when the attempt is recorded.
-- - payloads_only: the resource row and one row with the envelope, each with
--   its primary key, and nothing else: what a model that keeps both the
--   resource and its event's envelope writes at least before its 2xx.
-- - entry_ff70, entry_ff45: the same, the attempt then recorded by an update
--   of the envelope's row in place (the log record as the queue entry), with
--   70 % and 45 % of each page filled at insert.
--
-- The tables are created here and dropped at the end.

CREATE FUNCTION pg_temp.uv7(n bigint) RETURNS uuid LANGUAGE sql AS $$
  SELECT (lpad(to_hex(1700000000000 + n), 12, '0') || '7' || substr(md5(n::text), 1, 3) || '8'
          || substr(md5(n::text), 4, 15))::uuid $$;

CREATE TEMP TABLE orgs AS SELECT array_agg(gen_random_uuid()) AS ids FROM generate_series(1, 32);
CREATE TEMP TABLE wal_at (model text, at pg_lsn, taken timestamptz DEFAULT clock_timestamp());

CREATE TABLE floor_resources (organization_id uuid NOT NULL, kind text NOT NULL, id uuid NOT NULL,
  parent_id uuid, data json NOT NULL, PRIMARY KEY (organization_id, kind, id));
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
CREATE TABLE floor_entries (organization_id uuid NOT NULL, id uuid NOT NULL, event text NOT NULL,
  attempt smallint NOT NULL, due_at timestamptz NOT NULL, outcome text, response_code integer,
  response_body text, latency_ms bigint, error text, attempted_at timestamptz,
  envelope json NOT NULL, PRIMARY KEY (organization_id, id));

-- One model: `attempts` is 'today', 'none' or 'update'.
CREATE FUNCTION pg_temp.run(attempts text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  orgs uuid[] := (SELECT ids FROM orgs);
  data text := '{"id":"0193a4f2-7c1e-7b3a-9d2e-aaaaaaaaaaaa","title":"load task 12345","status":"open",'
    '"assignee_id":null,"description":"","parent_id":null,"created_at":"2026-11-27T10:52:14.887Z",'
    '"updated_at":"2026-11-27T10:52:14.887Z","organization_id":"0193a4f2-1111-7b3a-9d2e-5f6a7b8c9d0e"}';
  envelope text;
  o uuid;
  ids uuid[];
  n bigint := 0;
BEGIN
  FOR b IN 1 .. 1000 LOOP
    o := orgs[1 + b % 32];
    ids := '{}';
    FOR e IN 1 .. 20 LOOP
      n := n + 1;
      ids := ids || pg_temp.uv7(n);
      envelope := '{"id":"' || pg_temp.uv7(n) || '","type":"task.created",'
        '"created_at":"2026-11-27T10:52:14.887Z","organization_id":"' || o || '","data":' || data || '}';
      INSERT INTO floor_resources VALUES (o, 'task', pg_temp.uv7(n + 1000000), NULL, data::json);
      IF attempts = 'today' THEN
        INSERT INTO floor_outbox VALUES (o, pg_temp.uv7(n), 'task.created', envelope::json, 0, now(), now(), 1, -1);
      ELSE
        INSERT INTO floor_entries (organization_id, id, event, attempt, due_at, envelope)
          VALUES (o, pg_temp.uv7(n), 'task.created', 1, now(), envelope::json);
      END IF;
    END LOOP;
    IF attempts = 'today' THEN
      DELETE FROM floor_outbox WHERE organization_id = o AND delivery_id = ANY(ids);
      INSERT INTO floor_log SELECT o, pg_temp.uv7(n + 2000000 + i), d, 'task.created', 1, 'succeeded',
        200, '', 3, NULL, now(), envelope::json FROM unnest(ids) WITH ORDINALITY AS x(d, i);
      UPDATE floor_log_counts SET records = records + 20 WHERE organization_id = o;
    ELSIF attempts = 'update' THEN
      UPDATE floor_entries SET outcome = 'succeeded', response_code = 200, response_body = '',
          latency_ms = 3, attempted_at = now()
        WHERE organization_id = o AND id = ANY(ids);
    END IF;
  END LOOP;
END $$;

INSERT INTO wal_at (model, at) VALUES ('start', pg_current_wal_lsn());
SELECT pg_temp.run('today');
INSERT INTO wal_at (model, at) VALUES ('today', pg_current_wal_lsn());
TRUNCATE floor_resources;
INSERT INTO wal_at (model, at) VALUES ('start', pg_current_wal_lsn());
SELECT pg_temp.run('none');
INSERT INTO wal_at (model, at) VALUES ('payloads_only', pg_current_wal_lsn());
TRUNCATE floor_resources, floor_entries;
ALTER TABLE floor_entries SET (fillfactor = 70);
INSERT INTO wal_at (model, at) VALUES ('start', pg_current_wal_lsn());
SELECT pg_temp.run('update');
INSERT INTO wal_at (model, at) VALUES ('entry_ff70', pg_current_wal_lsn());
SELECT n_tup_upd AS ff70_updates, n_tup_hot_upd AS ff70_in_place
  FROM pg_stat_user_tables WHERE relname = 'floor_entries' \gset
TRUNCATE floor_resources, floor_entries;
ALTER TABLE floor_entries SET (fillfactor = 45);
INSERT INTO wal_at (model, at) VALUES ('start', pg_current_wal_lsn());
SELECT pg_temp.run('update');
INSERT INTO wal_at (model, at) VALUES ('entry_ff45', pg_current_wal_lsn());

SELECT model, wal_bytes_per_event, loop_us_per_event FROM (
  SELECT model, taken,
         round(pg_wal_lsn_diff(at, lag(at) OVER (ORDER BY taken)) / 20000) AS wal_bytes_per_event,
         round(extract(epoch FROM taken - lag(taken) OVER (ORDER BY taken)) * 1e6 / 20000) AS loop_us_per_event
    FROM wal_at) AS measured
  WHERE model <> 'start' ORDER BY taken;
SELECT (SELECT pg_column_size(data) FROM floor_resources LIMIT 1) AS task_bytes,
       (SELECT pg_column_size(envelope) FROM floor_entries LIMIT 1) AS envelope_bytes,
       :'ff70_updates' AS ff70_updates, :'ff70_in_place' AS ff70_in_place;

DROP TABLE floor_resources, floor_outbox, floor_log, floor_log_counts, floor_entries;
