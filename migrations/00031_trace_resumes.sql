-- +goose Up
-- A Genkit app resumes an interrupted generate in a new trace of its own. interrupt_refs keeps the
-- tool requests that interrupted (from a generate span's output that ended interrupted), and
-- trace_resumes links a trace whose generate resumes one of them (its input's resume.respond or
-- resume.restart names the same tool and ref) to the interrupted trace: the latest earlier one, in
-- the same session when both name one.
CREATE TABLE interrupt_refs (
    trace_id   text   NOT NULL,
    tool       text   NOT NULL,
    ref        text   NOT NULL,
    start_time bigint NOT NULL,
    session    text,
    PRIMARY KEY (tool, ref, trace_id)
);
CREATE TABLE trace_resumes (
    resumed_trace     text NOT NULL,
    interrupted_trace text NOT NULL,
    tool              text NOT NULL,
    ref               text NOT NULL,
    PRIMARY KEY (resumed_trace, interrupted_trace, tool, ref)
);
CREATE INDEX trace_resumes_interrupted ON trace_resumes (interrupted_trace);

-- +goose Down
DROP TABLE trace_resumes;
DROP TABLE interrupt_refs;
