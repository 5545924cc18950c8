package experiments

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/loupe-dev/loupe/internal/store"
)

// fileExample is one example as a file gives it: Loupe's JSONL lines ({"input", "reference",
// "tags", "source_run_id"}) or the items of Genkit's `genkit eval:extractData` output ({"testCaseId",
// "input", "output", "context", "reference", "traceIds"}), whose output becomes the reference
// unless a reference is given.
type fileExample struct {
	Input       json.RawMessage `json:"input"`
	Reference   json.RawMessage `json:"reference"`
	Output      json.RawMessage `json:"output"`
	Tags        []string        `json:"tags"`
	SourceRunID string          `json:"source_run_id"`
	TestCaseID  string          `json:"testCaseId"`
}

// ParseExamples reads examples from JSONL (one object a line) or a JSON array (Genkit's
// eval:extractData output, or Loupe's objects). A line or item that is not an example with an
// input is an error naming it.
func ParseExamples(r io.Reader) ([]store.ExampleParams, error) {
	br := bufio.NewReader(r)
	for {
		b, err := br.Peek(1)
		if err != nil {
			if err == io.EOF {
				return nil, &InvalidError{Field: "file", Message: "no examples in it"}
			}
			return nil, err
		}
		if !bytes.ContainsAny(b, " \t\r\n") {
			break
		}
		_, _ = br.ReadByte()
	}
	if b, _ := br.Peek(1); b[0] == '[' {
		var items []json.RawMessage
		if err := json.NewDecoder(br).Decode(&items); err != nil {
			return nil, &InvalidError{Field: "file", Message: "not a JSON array of examples: " + err.Error()}
		}
		out := make([]store.ExampleParams, 0, len(items))
		for i, raw := range items {
			e, err := toExample(raw, fmt.Sprintf("item %d", i+1))
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	}
	var out []store.ExampleParams
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for line := 1; sc.Scan(); line++ {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		e, err := toExample(append(json.RawMessage(nil), raw...), fmt.Sprintf("line %d", line))
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, &InvalidError{Field: "file", Message: err.Error()}
	}
	if len(out) == 0 {
		return nil, &InvalidError{Field: "file", Message: "no examples in it"}
	}
	return out, nil
}

func toExample(raw json.RawMessage, where string) (store.ExampleParams, error) {
	var f fileExample
	if err := json.Unmarshal(raw, &f); err != nil {
		return store.ExampleParams{}, &InvalidError{Field: where, Message: "not an example object: " + err.Error()}
	}
	if len(f.Input) == 0 {
		return store.ExampleParams{}, &InvalidError{Field: where, Message: `no "input"`}
	}
	e := store.ExampleParams{Input: f.Input, Reference: f.Reference, Tags: f.Tags}
	if len(e.Reference) == 0 {
		e.Reference = f.Output
	}
	if f.TestCaseID != "" {
		e.Tags = append(e.Tags, "genkit:"+f.TestCaseID)
	}
	if f.SourceRunID != "" {
		id, err := uuid.Parse(f.SourceRunID)
		if err != nil {
			return store.ExampleParams{}, &InvalidError{Field: where + "/source_run_id", Message: "not a run id"}
		}
		e.SourceRunID = &id
	}
	return e, nil
}

// ParseRunFilter reads the runs a dataset is made of, in the runs list's query form:
// action=/flow/travelAgent&status=succeeded&model=…&q=…&session=…&since=24h&until=…. A bare flow
// name is the flow's key; since and until take an RFC 3339 time or a duration before now. An
// unknown key is an error, so that a typo does not quietly take every run.
func ParseRunFilter(query string) (store.RunListParams, error) {
	var p store.RunListParams
	q, err := url.ParseQuery(strings.TrimPrefix(query, "?"))
	if err != nil {
		return p, &InvalidError{Field: "from_runs", Message: fmt.Sprintf("%q is not a query such as action=/flow/x&status=succeeded: %v", query, err)}
	}
	for key := range q {
		if !slices.Contains([]string{"action", "status", "model", "q", "session", "since", "until"}, key) {
			return p, &InvalidError{Field: "from_runs", Message: fmt.Sprintf("%q is no filter; use action, status, model, q, session, since or until", key)}
		}
	}
	p.Action, p.Status, p.Model, p.Query, p.Session = q.Get("action"), q.Get("status"), q.Get("model"), q.Get("q"), q.Get("session")
	if p.Action != "" && !strings.HasPrefix(p.Action, "/") && !strings.Contains(p.Action, ":/") {
		p.Action = "/flow/" + p.Action
	}
	if p.Status != "" && !slices.Contains(store.RunStatuses, p.Status) {
		return p, &InvalidError{Field: "from_runs", Message: fmt.Sprintf("status %q: want one of %s", p.Status, strings.Join(store.RunStatuses, ", "))}
	}
	for _, name := range []string{"since", "until"} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if d, derr := time.ParseDuration(v); derr == nil {
			t, err = time.Now().Add(-d), nil
		}
		if err != nil {
			return p, &InvalidError{Field: "from_runs", Message: fmt.Sprintf("%s %q: want an RFC 3339 time or a duration ago such as 24h", name, v)}
		}
		if name == "since" {
			p.Since = t
		} else {
			p.Until = t
		}
	}
	return p, nil
}
