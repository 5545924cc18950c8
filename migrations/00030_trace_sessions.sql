-- +goose Up
-- session is the conversation a trace belongs to, as the program that sent it names it (Genkit's
-- genkit:sessionId, the GenAI conventions' gen_ai.conversation.id): the runs list groups a run's
-- runs by it, as Langfuse groups sessions. It is set once, from the first span that names one.
ALTER TABLE traces ADD COLUMN session text;
CREATE INDEX traces_session ON traces (session) WHERE session IS NOT NULL;

-- +goose Down
DROP INDEX traces_session;
ALTER TABLE traces DROP COLUMN session;
