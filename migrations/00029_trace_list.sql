-- +goose Up
-- last_end_time_unix_nano is the latest end of any span of a trace: its duration in the list is
-- from its start to there, as the span tree's header measures it, even where the root span ended
-- before the spans a resumed run added. The partial index finds a trace's failed spans (any span,
-- not only the root, makes a trace failed in the list) without reading the trace's other spans.
ALTER TABLE traces ADD COLUMN last_end_time_unix_nano bigint NOT NULL DEFAULT 0;
UPDATE traces t SET last_end_time_unix_nano = s.last_end
FROM (SELECT trace_id, max(end_time_unix_nano) AS last_end FROM spans GROUP BY trace_id) s
WHERE s.trace_id = t.trace_id;
CREATE INDEX spans_error_idx ON spans (trace_id) WHERE status_code = 2;

-- +goose Down
DROP INDEX spans_error_idx;
ALTER TABLE traces DROP COLUMN last_end_time_unix_nano;
