-- +goose Up
-- The trace list's totals no longer keep each span's share: ingest reports which spans it stored
-- ended for the first time, and only those are folded, so a span counts once without a row of its
-- own (which cost ingest as much as the span's own row; see BENCHMARKS.md, "OTLP ingest").
DROP TABLE span_usage;

-- +goose Down
CREATE TABLE span_usage (
    trace_id             text    NOT NULL REFERENCES traces (trace_id) ON DELETE CASCADE,
    span_id              text    NOT NULL,
    kind                 text    NOT NULL CHECK (kind IN ('model', 'tool')),
    model                text    NOT NULL DEFAULT '',
    start_time_unix_nano bigint  NOT NULL DEFAULT 0,
    input_tokens         bigint  NOT NULL DEFAULT 0,
    output_tokens        bigint  NOT NULL DEFAULT 0,
    failed               boolean NOT NULL DEFAULT false,
    PRIMARY KEY (trace_id, span_id)
);
