package server

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/web/templates"
)

// sessionListParams reads ?limit= and ?cursor= of the sessions page and API.
func sessionListParams(c echo.Context) (store.SessionListParams, error) {
	var p store.SessionListParams
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return p, Errorf(http.StatusBadRequest, "bad_request", "limit %q: want a number from 1 to 500", v)
		}
		p.Limit = n
	}
	if v := c.QueryParam("cursor"); v != "" {
		cur, err := decodeSessionCursor(v)
		if err != nil {
			return p, Errorf(http.StatusBadRequest, "bad_cursor", "cursor %q is not one of this list's", v)
		}
		p.After = cur
	}
	return p, nil
}

// encodeSessionCursor is a sessions-list cursor as a URL carries it: the last row's activity
// and session.
func encodeSessionCursor(c *store.SessionCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.Last.UTC().Format(time.RFC3339Nano) + "|" + c.Session))
}

func decodeSessionCursor(v string) (*store.SessionCursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return nil, err
	}
	at, session, ok := strings.Cut(string(raw), "|")
	if !ok {
		return nil, errors.New("no separator")
	}
	last, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return nil, err
	}
	if err := store.CheckText("cursor", session); err != nil {
		return nil, err
	}
	return &store.SessionCursor{Last: last, Session: session}, nil
}

// sessionsPage is GET /sessions: a row per session (runs, turns, tokens, cost, first and last
// activity), the one active last first, keyset paged; each links to the runs list of its runs.
func (s *Server) sessionsPage(c echo.Context) error {
	p, err := sessionListParams(c)
	if err != nil {
		return err
	}
	list, next, err := s.reads.SessionList(c.Request().Context(), p)
	if err != nil {
		return err
	}
	page := templates.SessionsPage{Page: s.page(c, "Sessions", "sessions")}
	now := time.Now()
	for _, ss := range list {
		page.Rows = append(page.Rows, templates.SessionRow{Session: ss.Session, Runs: ss.Runs, Turns: ss.Turns,
			Tokens: ss.InputTokens + ss.OutputTokens, Cost: costText(s.prices.Cost(ss.Usage)), CostTitle: pricesOf(s.prices, ss.Usage),
			First: ss.First, Last: ss.Last, FirstAgo: humanAge(max(now.Sub(ss.First), 0)) + " ago",
			LastAgo: humanAge(max(now.Sub(ss.Last), 0)) + " ago", URL: conversationURL(ss.Session, "")})
	}
	if next != nil {
		v := url.Values{"cursor": {encodeSessionCursor(next)}}
		if l := c.QueryParam("limit"); l != "" {
			v.Set("limit", l)
		}
		page.NextURL = "/sessions?" + v.Encode()
	}
	return s.render(c, http.StatusOK, templates.SessionsView(page))
}

// apiSession is a session of GET /api/v1/sessions.
type apiSession struct {
	Session      string    `json:"session"`
	Runs         int       `json:"runs"`
	Turns        int64     `json:"turns"`
	InputTokens  int64     `json:"input_tokens"`
	OutputTokens int64     `json:"output_tokens"`
	CostUSD      *float64  `json:"cost_usd"`
	FirstAt      time.Time `json:"first_at"`
	LastAt       time.Time `json:"last_at"`
	RunsURL      string    `json:"runs_url"`
}

// apiSessionList is GET /api/v1/sessions?limit=&cursor=: the sessions page as JSON.
func (s *Server) apiSessionList(c echo.Context) error {
	p, err := sessionListParams(c)
	if err != nil {
		return err
	}
	list, next, err := s.reads.SessionList(c.Request().Context(), p)
	if err != nil {
		return err
	}
	out := make([]apiSession, 0, len(list))
	for _, ss := range list {
		out = append(out, apiSession{Session: ss.Session, Runs: ss.Runs, Turns: ss.Turns, InputTokens: ss.InputTokens,
			OutputTokens: ss.OutputTokens, CostUSD: costUSD(s.prices.Cost(ss.Usage)), FirstAt: ss.First, LastAt: ss.Last,
			RunsURL: conversationURL(ss.Session, "")})
	}
	resp := map[string]any{"sessions": out, "next_cursor": nil}
	if next != nil {
		resp["next_cursor"] = encodeSessionCursor(next)
	}
	return c.JSON(http.StatusOK, resp)
}
