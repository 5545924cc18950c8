-- +goose Up
-- runs: one row per execution of a registered action. Lineage columns link replays and forks to
-- their original; version is bumped on every status change for optimistic locking.
CREATE TABLE runs (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    action        text        NOT NULL,
    input         jsonb       NOT NULL DEFAULT 'null',
    status        text        NOT NULL DEFAULT 'queued'
        CHECK (status IN ('queued', 'running', 'interrupted', 'succeeded', 'failed', 'aborted', 'cancelled')),
    output        jsonb,
    error         jsonb,
    trace_id      text,
    model         text,
    turns         integer     NOT NULL DEFAULT 0,
    input_tokens  bigint      NOT NULL DEFAULT 0,
    output_tokens bigint      NOT NULL DEFAULT 0,
    replay_of     uuid REFERENCES runs (id) ON DELETE SET NULL,
    replay_mode   text CHECK (replay_mode IN ('exact', 'rerun', 'fork')),
    fork_of       uuid REFERENCES runs (id) ON DELETE SET NULL,
    fork_turn     integer,
    created_by    text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    finished_at   timestamptz,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    version       bigint      NOT NULL DEFAULT 1,
    CHECK ((fork_of IS NULL) = (fork_turn IS NULL))
) WITH (fillfactor = 70); -- room for HOT updates: a run's row changes several times while it runs

-- Keyset paging, newest first, overall and within a status or an action.
CREATE INDEX runs_created_idx ON runs (created_at DESC, id DESC);
CREATE INDEX runs_status_created_idx ON runs (status, created_at DESC, id DESC);
CREATE INDEX runs_action_created_idx ON runs (action, created_at DESC, id DESC);
CREATE INDEX runs_trace_idx ON runs (trace_id) WHERE trace_id IS NOT NULL;
CREATE INDEX runs_replay_of_idx ON runs (replay_of) WHERE replay_of IS NOT NULL;
CREATE INDEX runs_fork_of_idx ON runs (fork_of) WHERE fork_of IS NOT NULL;

-- run_messages: the history, append-only. content is one Genkit-shaped message, kept as json
-- rather than jsonb: it is written on every turn and only ever read back whole, so parsing it into
-- jsonb would be wasted work (and json keeps the bytes exactly as written).
CREATE TABLE run_messages (
    run_id     uuid        NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq        integer     NOT NULL,
    turn       integer     NOT NULL,
    role       text        NOT NULL CHECK (role IN ('system', 'user', 'model', 'tool')),
    content    json        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, seq)
);

-- run_chunks: the stream, append-only, with a monotonic per-run sequence number.
CREATE TABLE run_chunks (
    run_id     uuid        NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq        bigint      NOT NULL,
    turn       integer     NOT NULL,
    idx        integer     NOT NULL,
    role       text        NOT NULL,
    content    json        NOT NULL, -- json, not jsonb: written often, read back whole
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, seq)
);

-- interrupts: one row per interrupted tool request. Resolution is exactly-once: the row is locked,
-- its version compared, and only a pending row can change.
CREATE TABLE interrupts (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    run_id        uuid        NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    turn          integer     NOT NULL,
    tool          text        NOT NULL,
    ref           text        NOT NULL,
    input         jsonb       NOT NULL DEFAULT 'null',
    metadata      jsonb       NOT NULL DEFAULT 'true',
    input_schema  jsonb,
    output_schema jsonb,
    status        text        NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'approved', 'edited', 'responded', 'denied', 'cancelled')),
    resolution    jsonb,
    resolved_by   text,
    resolved_at   timestamptz,
    comment       text,
    -- round counts the run's resumes when the interrupt was raised: a restarted tool that interrupts
    -- again raises a new interrupt for the same (turn, ref) in a later round.
    round         integer     NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now(),
    version       bigint      NOT NULL DEFAULT 1,
    UNIQUE (run_id, turn, ref, round),
    CHECK ((status = 'pending') = (resolved_at IS NULL))
);

-- The inbox reads pending interrupts oldest first.
CREATE INDEX interrupts_pending_idx ON interrupts (created_at, id) WHERE status = 'pending';
CREATE INDEX interrupts_run_idx ON interrupts (run_id);

-- tool_calls: the ledger. Intent is written before a tool runs, the result after, so a completed
-- call is never executed again after a crash.
CREATE TABLE tool_calls (
    run_id          uuid        NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    turn            integer     NOT NULL,
    ref             text        NOT NULL,
    tool            text        NOT NULL,
    input           jsonb       NOT NULL DEFAULT 'null',
    status          text        NOT NULL DEFAULT 'started'
        CHECK (status IN ('started', 'completed', 'failed', 'interrupted')),
    source          text        NOT NULL DEFAULT 'executed'
        CHECK (source IN ('executed', 'reexecuted', 'reused', 'reviewer')),
    output          jsonb,
    error           jsonb,
    attempt         integer     NOT NULL DEFAULT 1,
    idempotency_key text        NOT NULL,
    started_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    PRIMARY KEY (run_id, turn, ref)
) WITH (fillfactor = 80); -- each call's row is updated once, when it finishes

-- +goose Down
DROP TABLE tool_calls;
DROP TABLE interrupts;
DROP TABLE run_chunks;
DROP TABLE run_messages;
DROP TABLE runs;
