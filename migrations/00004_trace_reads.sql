-- +goose Up
-- scope_version keeps the instrumentation scope's version (Genkit's instrumentationLibrary.version,
-- OTLP's scope.version) so that ingest round-trips it.
ALTER TABLE spans ADD COLUMN scope_version text NOT NULL DEFAULT '';

-- The trace list filters on a name or a status and pages newest first.
CREATE INDEX traces_name_start_idx ON traces (display_name, start_time_unix_nano DESC, trace_id DESC);
CREATE INDEX traces_status_start_idx ON traces (status_code, start_time_unix_nano DESC, trace_id DESC);

-- +goose Down
DROP INDEX traces_status_start_idx;
DROP INDEX traces_name_start_idx;
ALTER TABLE spans DROP COLUMN scope_version;
