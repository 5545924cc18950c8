package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/web/templates"
)

// The run page's long lists (the conversation, the ledger and the stream) are read a page at a
// time, in SQL, so that neither the page nor the query grows with the run. The conversation and
// the ledger page by number (?page=), the stream by sequence number (?before=, ?after=), since it
// grows while it is read and its live end is what a reader opens it at.

// The lists' page sizes.
const (
	conversationPageSize = 50
	ledgerPageSize       = 100
	streamPageSize       = 200
	// forkCallsListed is how many tool calls the fork menu lists to pick from; a run with more
	// has the call typed as turn/ref.
	forkCallsListed = 200
)

// runLists fills in what every tab says about the lists (the ledger's count on its tab, the turns
// and calls the fork menu offers) and the page of the list the tab shows; the stream's only with
// withStream (the sections' fragment has no stream).
func (s *Server) runLists(c echo.Context, p *templates.RunPage, withStream bool) error {
	ctx := c.Request().Context()
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	counts, err := s.store.MessageCount(ctx, id)
	if err != nil {
		return err
	}
	// A fork from turn N copies the history before the run's N-th model message, so there is one
	// such turn per model message (runs.planFork checks the same rule); a turn whose model call
	// failed, or that the turn limit cut short, recorded none.
	p.ForkTurns = counts.Model
	if p.ToolCalls, err = s.store.ToolCallCount(ctx, id); err != nil {
		return err
	}
	if p.Run.CanReplay && p.ForkTurns > 0 && p.ToolCalls > 0 {
		keys, err := s.store.ToolCallKeys(ctx, id, forkCallsListed+1)
		if err != nil {
			return err
		}
		p.ForkCallsMore = len(keys) > forkCallsListed
		for _, k := range keys[:min(len(keys), forkCallsListed)] {
			p.ForkCalls = append(p.ForkCalls, templates.ForkCall{Turn: k.Turn, Ref: k.Ref, Tool: k.Tool})
		}
	}
	switch p.Tab {
	case "conversation":
		return s.conversationPage(c, p, counts.Total)
	case "ledger":
		return s.ledgerPage(c, p)
	case "stream":
		if withStream {
			return s.streamPage(c, p)
		}
	}
	return nil
}

// pageParam reads ?page=, counted from 1; the first page when it is not given.
func pageParam(c echo.Context) (int, error) {
	v := c.QueryParam("page")
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, Errorf(http.StatusBadRequest, "bad_request", "page %q: want a page number (1 or more)", v)
	}
	return n, nil
}

// pagerFor places page n (clamped to the pages there are) of a list of total items, size a page.
func pagerFor(noun, runID, tab string, n, size, total int) templates.Pager {
	pages := max((total+size-1)/size, 1)
	n = min(n, pages)
	return templates.Pager{Noun: noun, Page: n, Pages: pages, From: (n-1)*size + 1, To: min(n*size, total), Total: total,
		PageURL: "/runs/" + runID + "?tab=" + tab + "&page=", FragmentURL: "/runs/" + runID + "/" + tab + "?page="}
}

// conversationPage reads the page of the history that ?page= names.
func (s *Server) conversationPage(c echo.Context, p *templates.RunPage, total int) error {
	n, err := pageParam(c)
	if err != nil {
		return err
	}
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	p.ConversationPager = pagerFor("messages", p.Run.ID, "conversation", n, conversationPageSize, total)
	msgs, err := s.store.MessageListPage(c.Request().Context(), id, p.ConversationPager.From-1, conversationPageSize)
	if err != nil {
		return err
	}
	p.Conversation = conversation(msgs, p.Interrupts, -1)
	return nil
}

// ledgerPage reads the page of the ledger that ?page= names. A call that raised an interrupt
// reads as its last interrupt's decision.
func (s *Server) ledgerPage(c echo.Context, p *templates.RunPage) error {
	n, err := pageParam(c)
	if err != nil {
		return err
	}
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	p.LedgerPager = pagerFor("tool calls", p.Run.ID, "ledger", n, ledgerPageSize, p.ToolCalls)
	calls, err := s.store.ToolCallListPage(c.Request().Context(), id, p.LedgerPager.From-1, ledgerPageSize)
	if err != nil {
		return err
	}
	decided := map[string]*templates.InterruptView{} // by turn/ref: the call's last interrupt
	for i := range p.Interrupts {
		decided[fmt.Sprintf("%d/%s", p.Interrupts[i].Turn, p.Interrupts[i].Ref)] = &p.Interrupts[i]
	}
	for _, tc := range calls {
		p.Ledger = append(p.Ledger, ledgerRow(tc, decided[fmt.Sprintf("%d/%s", tc.Turn, tc.Ref)]))
	}
	p.LedgerPager.To = p.LedgerPager.From + len(p.Ledger) - 1 // the count may have grown since
	return nil
}

// streamPage reads the page of the stream that ?before= or ?after= names, the live end by
// default. The live stream resumes after the page's last chunk when the page is the live end,
// and after the run's last chunk otherwise (the page's script keeps what comes meanwhile for
// when the reader gets back to the end).
func (s *Server) streamPage(c echo.Context, p *templates.RunPage) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	params := store.ChunkPageParams{RunID: id, Limit: streamPageSize}
	for name, dst := range map[string]**int64{"before": &params.Before, "after": &params.After} {
		v := c.QueryParam(name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return Errorf(http.StatusBadRequest, "bad_request", "%s %q: want a chunk's sequence number (0 or more)", name, v)
		}
		*dst = &n
	}
	if params.Before != nil && params.After != nil {
		return Errorf(http.StatusBadRequest, "bad_request", "before and after: give one of them")
	}
	pg, err := s.store.ChunkListPage(c.Request().Context(), params)
	if err != nil {
		return err
	}
	base := "/runs/" + p.Run.ID
	v := templates.StreamView{Groups: chunkGroups(pg.Chunks), Offset: pg.Offset, Shown: len(pg.Chunks), Total: pg.Total,
		MaxSeq: pg.MaxSeq, Latest: pg.Latest, PageURL: base + "?tab=stream", FragmentURL: base + "/stream?tab=stream"}
	if len(pg.Chunks) > 0 {
		v.FirstSeq, v.LastSeq = pg.Chunks[0].Seq, pg.Chunks[len(pg.Chunks)-1].Seq
	} else if params.After != nil {
		v.FirstSeq, v.LastSeq = *params.After+1, *params.After
	}
	p.Stream = v
	p.LiveSeq = pg.MaxSeq
	if pg.Latest {
		p.LiveSeq = v.LastSeq
	}
	return nil
}

// runListFragment builds the run page's data a list's fragment needs: the run, its interrupts
// (which the conversation and the ledger show their decisions from), and the page.
func (s *Server) runListFragment(c echo.Context, tab string) (templates.RunPage, error) {
	id, err := pathID(c, "id")
	if err != nil {
		return templates.RunPage{}, err
	}
	ctx := c.Request().Context()
	r, err := s.store.RunGet(ctx, id)
	if err != nil {
		return templates.RunPage{}, err
	}
	p := templates.RunPage{Page: s.page(c, "", "runs"), Tab: tab, Run: templates.RunHeader{ID: r.ID.String(), Action: r.Action, Status: r.Status,
		Finished: store.RunFinished(r.Status)}}
	if tab != "stream" {
		if p.Interrupts, err = s.runInterruptViews(ctx, r); err != nil {
			return p, err
		}
	}
	switch tab {
	case "conversation":
		counts, err := s.store.MessageCount(ctx, id)
		if err != nil {
			return p, err
		}
		return p, s.conversationPage(c, &p, counts.Total)
	case "ledger":
		if p.ToolCalls, err = s.store.ToolCallCount(ctx, id); err != nil {
			return p, err
		}
		return p, s.ledgerPage(c, &p)
	default:
		return p, s.streamPage(c, &p)
	}
}

// runConversationFragment is GET /runs/{id}/conversation?page=N: a page of the conversation.
func (s *Server) runConversationFragment(c echo.Context) error {
	p, err := s.runListFragment(c, "conversation")
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.ConversationPage(p))
}

// runLedgerFragment is GET /runs/{id}/ledger?page=N: a page of the ledger.
func (s *Server) runLedgerFragment(c echo.Context) error {
	p, err := s.runListFragment(c, "ledger")
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.LedgerPage(p))
}

// runStreamFragment is GET /runs/{id}/stream[?before=S|?after=S]: a page of the stream.
func (s *Server) runStreamFragment(c echo.Context) error {
	p, err := s.runListFragment(c, "stream")
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.RunStreamSection(p))
}

// chunkGroups groups chunks by the message they stream (turn, index and role), in the order the
// messages first stream, as the live script does.
func chunkGroups(chunks []*store.RunChunk) []templates.ChunkGroup {
	var out []templates.ChunkGroup
	at := map[string]int{}
	for _, ch := range chunks {
		key := strconv.Itoa(ch.Turn) + ":" + strconv.Itoa(ch.Index) + ":" + ch.Role
		i, ok := at[key]
		if !ok {
			i = len(out)
			at[key] = i
			out = append(out, templates.ChunkGroup{Key: key, Role: ch.Role, Turn: ch.Turn, Index: ch.Index})
		}
		t := ch.CreatedAt.UTC()
		out[i].Chunks = append(out[i].Chunks, templates.ChunkView{Seq: ch.Seq, Clock: t.Format("15:04:05.000"),
			At: t.Format(time.RFC3339Nano), Flow: ch.Role == "flow", Parts: chunkParts(ch.Content)})
	}
	return out
}

// chunkParts reads a chunk as the live script's chunkNodes does (ui.js): a model's chunk is an
// array of message parts (or an object holding them as content), whose text parts read as
// running text and whose other parts show as one compact line each; anything else a flow
// streamed shows as a line of JSON.
func chunkParts(raw json.RawMessage) []templates.ChunkPart {
	var parts []json.RawMessage
	isArray := func(v json.RawMessage) bool {
		t := bytes.TrimSpace(v)
		return len(t) > 0 && t[0] == '[' && json.Unmarshal(t, &parts) == nil
	}
	if !isArray(raw) {
		var obj map[string]json.RawMessage
		t := bytes.TrimSpace(raw)
		if len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &obj) != nil || !isArray(obj["content"]) {
			if text, ok := jsonString(obj["text"]); ok {
				return []templates.ChunkPart{{Text: text}}
			}
			return []templates.ChunkPart{{Text: compactValue(raw, 4000) + "\n"}}
		}
	}
	out := make([]templates.ChunkPart, 0, len(parts))
	for _, p := range parts {
		out = append(out, chunkPart(p))
	}
	return out
}

// jsonString reads a JSON string; false when v is not one.
func jsonString(v json.RawMessage) (string, bool) {
	var s string
	t := bytes.TrimSpace(v)
	return s, len(t) > 0 && t[0] == '"' && json.Unmarshal(t, &s) == nil
}

func chunkPart(raw json.RawMessage) templates.ChunkPart {
	var p map[string]json.RawMessage
	if json.Unmarshal(raw, &p) != nil || p == nil {
		return templates.ChunkPart{Kind: "other", Text: compactValue(raw, 160)}
	}
	str := func(k string) (string, bool) { return jsonString(p[k]) }
	present := func(k string) bool { v, ok := p[k]; return ok && isTruthy(v) }
	if t, ok := str("text"); ok {
		return templates.ChunkPart{Text: t}
	}
	if t, ok := str("reasoning"); ok {
		return templates.ChunkPart{Kind: "reasoning", Text: t}
	}
	var call struct {
		Name        *string         `json:"name"`
		Input       json.RawMessage `json:"input"`
		Output      json.RawMessage `json:"output"`
		URL         *string         `json:"url"`
		ContentType string          `json:"contentType"`
	}
	name := func() string {
		if call.Name == nil {
			return "tool"
		}
		return *call.Name
	}
	switch {
	case present("toolRequest"):
		_ = json.Unmarshal(p["toolRequest"], &call)
		return templates.ChunkPart{Kind: "tool-request", Text: "→ " + name() + "(" + compactValue(call.Input, 160) + ")"}
	case present("toolResponse"):
		_ = json.Unmarshal(p["toolResponse"], &call)
		return templates.ChunkPart{Kind: "tool-response", Text: "← " + name() + ": " + compactValue(call.Output, 160)}
	case present("media"):
		_ = json.Unmarshal(p["media"], &call)
		head := "[media"
		if call.ContentType != "" {
			head += " " + call.ContentType
		}
		u := ""
		if call.URL != nil {
			u = *call.URL
		}
		var q bytes.Buffer
		enc := json.NewEncoder(&q)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(u)
		text := store.Shorten(string(bytes.TrimSpace(q.Bytes())), 80)
		if len(text) > 0 && text[0] == '"' {
			text = text[1:]
		}
		if len(text) > 0 && text[len(text)-1] == '"' {
			text = text[:len(text)-1]
		}
		return templates.ChunkPart{Kind: "media", Text: head + "] " + text}
	}
	if d, ok := p["data"]; ok {
		return templates.ChunkPart{Kind: "data", Text: "data " + compactValue(d, 160)}
	}
	return templates.ChunkPart{Kind: "other", Text: compactValue(raw, 160)}
}

// isTruthy says whether a JSON value is one JavaScript counts as true.
func isTruthy(v json.RawMessage) bool {
	switch string(bytes.TrimSpace(v)) {
	case "", "null", "false", "0", `""`:
		return false
	}
	return true
}

// compactValue is a JSON value on one line, cut to n characters: ui.js's compact.
func compactValue(raw json.RawMessage, n int) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return ""
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return store.Shorten(string(raw), n)
	}
	return store.Shorten(b.String(), n)
}
