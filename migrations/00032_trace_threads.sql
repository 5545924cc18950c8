-- +goose Up
-- thread is the chat thread of the trace's session (Genkit's genkit:threadName: a session holds
-- several threads, "main" by default): a conversation is a session and a thread, and the runs list
-- groups by both. It is set with the session, from the first span that names them.
ALTER TABLE traces ADD COLUMN thread text;

-- +goose Down
ALTER TABLE traces DROP COLUMN thread;
