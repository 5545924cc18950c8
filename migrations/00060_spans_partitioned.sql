-- +goose Up
-- spans becomes a table partitioned by RANGE on start_time_unix_nano, a partition per UTC day
-- (spans_YYYYMMDD), so that trace retention drops a day's partition instead of deleting its rows
-- one by one (internal/trace/retention.go). The key is the span's start time, not its arrival:
-- both sends of a span (Genkit's realtime start and end, a resend) carry the same start, so they
-- land in the same partition and merge into one row whatever hour or day each arrived in.
--
-- A unique key of a partitioned table must hold the partition key, so the primary key becomes
-- (trace_id, span_id, start_time_unix_nano). Reads by trace still use its (trace_id, span_id)
-- prefix, one probe per partition. Ingest keeps a span unique: a copy of a span whose start time
-- differs from the stored one replaces it (store.SpanIngest).
--
-- spans_default takes whatever no day's partition covers (a span from before the first partition,
-- a clock far off, a day whose partition the maintenance did not create in time), so that an
-- insert never fails. spans_partition_create creates a day's partition, moving that day's rows out
-- of spans_default first; the retention pass calls it for today and the next days.
ALTER TABLE spans RENAME TO spans_unpartitioned;
ALTER INDEX spans_pkey RENAME TO spans_unpartitioned_pkey;
ALTER INDEX spans_run_idx RENAME TO spans_unpartitioned_run_idx;
-- The old table's foreign key goes now, so that the new table's takes its name.
-- +goose StatementBegin
DO $$
DECLARE c text;
BEGIN
    FOR c IN SELECT conname FROM pg_constraint WHERE conrelid = 'spans_unpartitioned'::regclass AND contype = 'f' LOOP
        EXECUTE format('ALTER TABLE spans_unpartitioned DROP CONSTRAINT %I', c);
    END LOOP;
END
$$;
-- +goose StatementEnd

CREATE TABLE spans (
    trace_id             text     NOT NULL CHECK (octet_length(trace_id) = 32),
    span_id              text     NOT NULL CHECK (octet_length(span_id) = 16),
    parent_span_id       text CHECK (octet_length(parent_span_id) = 16),
    name                 text     NOT NULL,
    kind                 smallint NOT NULL DEFAULT 0,
    start_time_unix_nano bigint   NOT NULL,
    end_time_unix_nano   bigint   NOT NULL DEFAULT 0,
    status_code          smallint NOT NULL DEFAULT 0,
    status_message       text     NOT NULL DEFAULT '',
    attributes           json     NOT NULL DEFAULT '{}',
    events               json     NOT NULL DEFAULT '[]',
    links                json     NOT NULL DEFAULT '[]',
    resource             json     NOT NULL DEFAULT '{}',
    scope                text     NOT NULL DEFAULT '',
    source               text     NOT NULL DEFAULT 'loupe' CHECK (source IN ('loupe', 'genkit', 'otlp')),
    run_id               uuid REFERENCES runs (id) ON DELETE SET NULL,
    scope_version        text     NOT NULL DEFAULT '',
    flags                smallint NOT NULL DEFAULT 0,
    PRIMARY KEY (trace_id, span_id, start_time_unix_nano)
) PARTITION BY RANGE (start_time_unix_nano);

CREATE INDEX spans_run_idx ON spans (run_id) WHERE run_id IS NOT NULL;
CREATE TABLE spans_default PARTITION OF spans DEFAULT;

-- spans_partition_create creates the partition of spans that started in [lo, hi) (Unix
-- nanoseconds), named spans_YYYYMMDD after the UTC day of lo, unless one of that name exists or
-- the range overlaps another partition's, and reports whether it did. The caller picks the range
-- (a UTC day, or a month clipped against its neighbours: store.SpanPartitionsEnsure). It moves
-- the range's rows out of spans_default into the new table before attaching it, which PostgreSQL
-- would otherwise refuse. An advisory lock serializes two processes creating partitions at once.
-- +goose StatementBegin
CREATE FUNCTION spans_partition_create(lo bigint, hi bigint) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    part text := 'spans_' || to_char(to_timestamp(lo / 1000000000) AT TIME ZONE 'UTC', 'YYYYMMDD');
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('loupe.spans_partition_create'));
    IF to_regclass(part) IS NOT NULL OR lo >= hi THEN
        RETURN false;
    END IF;
    BEGIN
        EXECUTE format('CREATE TABLE %I (LIKE spans INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part);
        EXECUTE format('WITH moved AS (DELETE FROM spans_default WHERE start_time_unix_nano >= %s AND start_time_unix_nano < %s RETURNING *) INSERT INTO %I SELECT * FROM moved', lo, hi, part);
        EXECUTE format('ALTER TABLE spans ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)', part, lo, hi);
    EXCEPTION WHEN invalid_object_definition THEN
        -- Another process made a partition that overlaps the range since the caller looked.
        RETURN false;
    END;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- A partition for today and the next two days, and one a month for the older spans of the last
-- 400 days (the month of today's ending where today's begins); spans older still (and any far in
-- the future) go to spans_default, which retention empties by rows. Months, not days, so that an
-- install that kept a year of traces starts with tens of partitions, not hundreds: every partition
-- kept costs each ingest statement a lock (README, "What many partitions cost").
SELECT spans_partition_create(d * 86400000000000, (d + 1) * 86400000000000)
FROM (SELECT (current_date - date '1970-01-01') + g AS d FROM generate_series(0, 2) g) days ORDER BY d;
SELECT spans_partition_create(
    (m - date '1970-01-01')::bigint * 86400000000000,
    (LEAST((m + interval '1 month')::date, current_date) - date '1970-01-01')::bigint * 86400000000000)
FROM (
    SELECT DISTINCT date_trunc('month', to_timestamp(start_time_unix_nano / 1000000000) AT TIME ZONE 'UTC')::date AS m
    FROM spans_unpartitioned
    WHERE start_time_unix_nano >= extract(epoch FROM now() - interval '400 days')::bigint * 1000000000
        AND start_time_unix_nano < (current_date - date '1970-01-01')::bigint * 86400000000000
) months ORDER BY m;

INSERT INTO spans (trace_id, span_id, parent_span_id, name, kind, start_time_unix_nano,
    end_time_unix_nano, status_code, status_message, attributes, events, links, resource, scope,
    source, run_id, scope_version, flags)
SELECT trace_id, span_id, parent_span_id, name, kind, start_time_unix_nano, end_time_unix_nano,
    status_code, status_message, attributes, events, links, resource, scope, source, run_id,
    scope_version, flags
FROM spans_unpartitioned;
DROP TABLE spans_unpartitioned;

-- The earliest and latest start of a trace's spans, folded at ingest: which partitions hold its
-- spans, so that retention can tell, without reading a partition, which traces it still keeps a
-- span of (a trace straddling two days, a kept run's trace).
ALTER TABLE traces
    ADD COLUMN span_start_min_unix_nano bigint NOT NULL DEFAULT 0,
    ADD COLUMN span_start_max_unix_nano bigint NOT NULL DEFAULT 0;
UPDATE traces t SET span_start_min_unix_nano = s.lo, span_start_max_unix_nano = s.hi
FROM (SELECT trace_id, min(start_time_unix_nano) AS lo, max(start_time_unix_nano) AS hi
      FROM spans GROUP BY trace_id) s
WHERE s.trace_id = t.trace_id;
CREATE INDEX traces_span_start_min_idx ON traces (span_start_min_unix_nano);
ANALYZE spans;

-- +goose Down
DROP INDEX traces_span_start_min_idx;
ALTER TABLE traces DROP COLUMN span_start_min_unix_nano, DROP COLUMN span_start_max_unix_nano;

ALTER TABLE spans RENAME TO spans_partitioned;
ALTER INDEX spans_pkey RENAME TO spans_partitioned_pkey;
ALTER INDEX spans_run_idx RENAME TO spans_partitioned_run_idx;
-- +goose StatementBegin
DO $$
DECLARE c text;
BEGIN
    FOR c IN SELECT conname FROM pg_constraint WHERE conrelid = 'spans_partitioned'::regclass AND contype = 'f' LOOP
        EXECUTE format('ALTER TABLE spans_partitioned DROP CONSTRAINT %I', c);
    END LOOP;
END
$$;
-- +goose StatementEnd
CREATE TABLE spans (
    trace_id             text     NOT NULL CHECK (octet_length(trace_id) = 32),
    span_id              text     NOT NULL CHECK (octet_length(span_id) = 16),
    parent_span_id       text CHECK (octet_length(parent_span_id) = 16),
    name                 text     NOT NULL,
    kind                 smallint NOT NULL DEFAULT 0,
    start_time_unix_nano bigint   NOT NULL,
    end_time_unix_nano   bigint   NOT NULL DEFAULT 0,
    status_code          smallint NOT NULL DEFAULT 0,
    status_message       text     NOT NULL DEFAULT '',
    attributes           json     NOT NULL DEFAULT '{}',
    events               json     NOT NULL DEFAULT '[]',
    links                json     NOT NULL DEFAULT '[]',
    resource             json     NOT NULL DEFAULT '{}',
    scope                text     NOT NULL DEFAULT '',
    source               text     NOT NULL DEFAULT 'loupe' CHECK (source IN ('loupe', 'genkit', 'otlp')),
    run_id               uuid REFERENCES runs (id) ON DELETE SET NULL,
    scope_version        text     NOT NULL DEFAULT '',
    flags                smallint NOT NULL DEFAULT 0,
    PRIMARY KEY (trace_id, span_id)
);
INSERT INTO spans SELECT * FROM spans_partitioned ON CONFLICT (trace_id, span_id) DO NOTHING;
DROP TABLE spans_partitioned;
DROP FUNCTION spans_partition_create(bigint, bigint);
CREATE INDEX spans_run_idx ON spans (run_id) WHERE run_id IS NOT NULL;
