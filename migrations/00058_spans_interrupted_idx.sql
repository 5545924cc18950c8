-- +goose Up
-- The trace list shows whether each listed trace waits on an interrupt. It asked each trace's
-- spans for genkit:state, which parsed every span's attributes: a 10,000-span trace among the 50
-- newest cost the list some 70 ms. This partial index holds only the interrupted spans, so the
-- check is a probe. Its predicate looks for the word first, which is cheap, and parses the
-- attributes only of the few spans that hold it, so ingest pays almost nothing for it. The list's
-- query (store.traceInterruptedSQL) says the same two conditions, which is how PostgreSQL knows
-- it may use the index.
CREATE INDEX spans_interrupted_idx ON spans (trace_id)
    WHERE strpos(attributes::text, 'interrupted') > 0 AND attributes->>'genkit:state' = 'interrupted';
-- The check's second half, whether the trace went on in itself after its interrupt (a span linked
-- to it with loupe.link.type=resume), likewise: without it, a store where one trace holds most
-- spans had PostgreSQL scan the whole table for each interrupted trace listed.
CREATE INDEX spans_resume_link_idx ON spans (trace_id)
    WHERE strpos(links::text, '"loupe.link.type"') > 0 AND strpos(links::text, '"resume"') > 0;

-- +goose Down
DROP INDEX spans_resume_link_idx;
DROP INDEX spans_interrupted_idx;
