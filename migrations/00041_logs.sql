-- +goose Up
-- logs holds log records that other programs sent over OTLP (POST /v1/logs), Genkit JS and Go
-- among them. A record names the trace and span it was written in when it was written in one; the
-- trace retention deletes a trace's logs with its spans.
CREATE TABLE logs (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    time            timestamptz NOT NULL,
    observed_time   timestamptz,
    severity_number smallint    NOT NULL DEFAULT 0,
    severity_text   text        NOT NULL DEFAULT '',
    body            jsonb       NOT NULL DEFAULT 'null',
    attributes      jsonb       NOT NULL DEFAULT '{}',
    resource        jsonb       NOT NULL DEFAULT '{}',
    scope           text        NOT NULL DEFAULT '',
    trace_id        text        NOT NULL DEFAULT '',
    span_id         text        NOT NULL DEFAULT '',
    received_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX logs_trace_idx ON logs (trace_id, span_id, time) WHERE trace_id <> '';
CREATE INDEX logs_time_idx ON logs (time DESC, id DESC);

-- +goose Down
DROP TABLE logs;
