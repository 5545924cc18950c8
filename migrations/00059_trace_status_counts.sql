-- +goose Up
-- The trace list shows, for each listed trace, whether it failed and whether it waits on an
-- interrupt. It asked each trace's spans: a count of its failed spans (spans_error_idx), a probe
-- for an interrupted span (spans_interrupted_idx) and one for a span that resumes it
-- (spans_resume_link_idx), per listed trace, and the failed and interrupted filters asked them of
-- every trace they passed over. Those counts are now kept in the trace's summary row at ingest, as
-- its span count and token totals are, so the list reads no span at all. That is also what a
-- spans table partitioned by time needs: a query that reads a trace's spans costs planning time for
-- every partition.
--
-- spans.flags holds the two facts about a span that cannot be read from a column, worked out by
-- ingest when it writes the span (store.spanFlags): 1, its genkit:state is "interrupted"; 2, it
-- links to a span with loupe.link.type "resume". A merge that replaces a stored copy reads the old
-- copy's flags and status to fold the difference. The existing spans get their flags from the
-- same conditions, found through the partial indexes before they are dropped.
ALTER TABLE spans ADD COLUMN flags smallint NOT NULL DEFAULT 0;

UPDATE spans SET flags = flags | 1
WHERE strpos(attributes::text, 'interrupted') > 0 AND attributes->>'genkit:state' = 'interrupted';

UPDATE spans SET flags = flags | 2
WHERE strpos(links::text, '"loupe.link.type"') > 0 AND strpos(links::text, '"resume"') > 0
    AND json_typeof(links) = 'array'
    AND EXISTS (SELECT 1 FROM json_array_elements(links) l
        WHERE json_typeof(l) = 'object' AND l->'attributes'->>'loupe.link.type' = 'resume');

ALTER TABLE traces
    ADD COLUMN error_spans int NOT NULL DEFAULT 0,
    ADD COLUMN interrupted_spans int NOT NULL DEFAULT 0,
    ADD COLUMN resume_spans int NOT NULL DEFAULT 0;

UPDATE traces t SET error_spans = c.n
FROM (SELECT trace_id, count(*) AS n FROM spans WHERE status_code = 2 GROUP BY trace_id) c
WHERE t.trace_id = c.trace_id;

UPDATE traces t SET interrupted_spans = c.n
FROM (SELECT trace_id, count(*) AS n FROM spans
    WHERE strpos(attributes::text, 'interrupted') > 0 AND attributes->>'genkit:state' = 'interrupted'
    GROUP BY trace_id) c
WHERE t.trace_id = c.trace_id;

UPDATE traces t SET resume_spans = c.n
FROM (SELECT trace_id, count(*) AS n FROM spans
    WHERE strpos(links::text, '"loupe.link.type"') > 0 AND strpos(links::text, '"resume"') > 0
        AND flags & 2 <> 0
    GROUP BY trace_id) c
WHERE t.trace_id = c.trace_id;

DROP INDEX spans_resume_link_idx;
DROP INDEX spans_interrupted_idx;
DROP INDEX spans_error_idx;

-- +goose Down
CREATE INDEX spans_error_idx ON spans (trace_id) WHERE status_code = 2;
CREATE INDEX spans_interrupted_idx ON spans (trace_id)
    WHERE strpos(attributes::text, 'interrupted') > 0 AND attributes->>'genkit:state' = 'interrupted';
CREATE INDEX spans_resume_link_idx ON spans (trace_id)
    WHERE strpos(links::text, '"loupe.link.type"') > 0 AND strpos(links::text, '"resume"') > 0;
ALTER TABLE traces DROP COLUMN resume_spans, DROP COLUMN interrupted_spans, DROP COLUMN error_spans;
ALTER TABLE spans DROP COLUMN flags;
