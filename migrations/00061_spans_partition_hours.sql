-- +goose Up
-- Span partitions may be a UTC hour wide (store.SpanPartitionsHourly, chosen by the retention pass
-- when a day's partition would hold too many spans): spans_partition_create names a partition
-- narrower than a day (an hour, or a day clipped around hours that exist) spans_YYYYMMDD_HH after
-- its first hour, so that a day's hours do not all take the day's name. Wider ones keep theirs.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION spans_partition_create(lo bigint, hi bigint) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    part text := 'spans_' || to_char(to_timestamp(lo / 1000000000) AT TIME ZONE 'UTC',
        CASE WHEN hi - lo < 86400000000000 THEN 'YYYYMMDD_HH24' ELSE 'YYYYMMDD' END);
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION spans_partition_create(lo bigint, hi bigint) RETURNS boolean LANGUAGE plpgsql AS $$
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
        RETURN false;
    END;
    RETURN true;
END
$$;
-- +goose StatementEnd
