-- +goose Up
-- The trace list's totals, folded at ingest so that listing stays a read of traces alone: the
-- service that sent the trace (OTLP's resource service.name), the first model called, and the
-- model calls, tokens and tool calls of its spans, counted by the rule of the turn summary.
ALTER TABLE traces
    ADD COLUMN service       text    NOT NULL DEFAULT '',
    ADD COLUMN model         text    NOT NULL DEFAULT '',
    ADD COLUMN model_calls   integer NOT NULL DEFAULT 0,
    ADD COLUMN input_tokens  bigint  NOT NULL DEFAULT 0,
    ADD COLUMN output_tokens bigint  NOT NULL DEFAULT 0,
    ADD COLUMN tool_calls    integer NOT NULL DEFAULT 0,
    ADD COLUMN tool_errors   integer NOT NULL DEFAULT 0;

-- span_usage: what each ended model or tool span added to its trace's totals, so that a span sent
-- again (Genkit's realtime mode, a retry) replaces its share instead of adding it twice.
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

-- +goose Down
DROP TABLE span_usage;
ALTER TABLE traces
    DROP COLUMN service,
    DROP COLUMN model,
    DROP COLUMN model_calls,
    DROP COLUMN input_tokens,
    DROP COLUMN output_tokens,
    DROP COLUMN tool_calls,
    DROP COLUMN tool_errors;
