-- +goose Up
-- spans: OpenTelemetry spans, Loupe's own and those ingested from other programs. Times are Unix
-- nanoseconds so OTLP round-trips losslessly; end_time_unix_nano is 0 while a span is running.
CREATE TABLE spans (
    trace_id             text    NOT NULL CHECK (trace_id ~ '^[0-9a-f]{32}$'),
    span_id              text    NOT NULL CHECK (span_id ~ '^[0-9a-f]{16}$'),
    parent_span_id       text CHECK (parent_span_id ~ '^[0-9a-f]{16}$'),
    name                 text    NOT NULL,
    kind                 smallint NOT NULL DEFAULT 0,
    start_time_unix_nano bigint  NOT NULL,
    end_time_unix_nano   bigint  NOT NULL DEFAULT 0,
    status_code          smallint NOT NULL DEFAULT 0,
    status_message       text    NOT NULL DEFAULT '',
    attributes           jsonb   NOT NULL DEFAULT '{}',
    events               jsonb   NOT NULL DEFAULT '[]',
    links                jsonb   NOT NULL DEFAULT '[]',
    resource             jsonb   NOT NULL DEFAULT '{}',
    scope                text    NOT NULL DEFAULT '',
    source               text    NOT NULL DEFAULT 'loupe' CHECK (source IN ('loupe', 'genkit', 'otlp')),
    run_id               uuid REFERENCES runs (id) ON DELETE SET NULL,
    PRIMARY KEY (trace_id, span_id)
);

CREATE INDEX spans_run_idx ON spans (run_id) WHERE run_id IS NOT NULL;

-- traces: one summary row per trace, kept up to date on ingest, so that listing traces never
-- scans the spans table.
CREATE TABLE traces (
    trace_id             text        PRIMARY KEY CHECK (trace_id ~ '^[0-9a-f]{32}$'),
    display_name         text        NOT NULL DEFAULT '',
    root_span_id         text,
    start_time_unix_nano bigint      NOT NULL DEFAULT 0,
    end_time_unix_nano   bigint      NOT NULL DEFAULT 0,
    status_code          smallint    NOT NULL DEFAULT 0,
    span_count           integer     NOT NULL DEFAULT 0,
    source               text        NOT NULL DEFAULT 'loupe' CHECK (source IN ('loupe', 'genkit', 'otlp')),
    run_id               uuid REFERENCES runs (id) ON DELETE SET NULL,
    updated_at           timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX traces_start_idx ON traces (start_time_unix_nano DESC, trace_id DESC);
CREATE INDEX traces_run_idx ON traces (run_id) WHERE run_id IS NOT NULL;

-- +goose Down
DROP TABLE traces;
DROP TABLE spans;
