package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// recordTrips runs travelAgent to each city and approves its booking: the recordings.
func (b *bundle) recordTrips(t *testing.T, cities ...string) {
	t.Helper()
	for _, city := range cities {
		run := b.startRun(t, "/flow/travelAgent", `{"destination":"`+city+`"}`, store.RunInterrupted)
		_, err := b.runs.Resolve(context.Background(), runs.ResolveParams{InterruptID: b.pending(t, run.ID).ID, Action: runs.ActionApprove, Actor: "rita"})
		require.NoError(t, err)
		b.waitStatus(t, run.ID, store.RunSucceeded)
	}
}

// TestDatasetsAndExperimentsThroughThePages makes a dataset of recorded runs on /datasets, adds,
// edits and deletes examples (each a new version, the old ones kept), starts an experiment from
// the dataset's page and one with another model against it: the experiment's page shows its
// progress, its totals beside the baseline's, and the regressions first, each linked to its run
// and to the diff with the baseline's run. Bad input is a 422 that names the problem and keeps
// what was typed.
func TestDatasetsAndExperimentsThroughThePages(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	b.recordTrips(t, "Lisbon", "Oslo")

	resp, body := postForm(t, noRedirect, b.url+"/datasets", url.Values{"name": {"trips"}, "from_runs": {"action=travelAgent&status=nonsense"}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "status &#34;nonsense&#34;")
	require.Contains(t, body, `value="trips"`, "what was typed is kept")
	resp, _ = postForm(t, noRedirect, b.url+"/datasets", url.Values{"name": {"trips"}, "from_runs": {"action=travelAgent&status=succeeded"}, "limit": {"50"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/datasets/trips", resp.Header.Get("Location"))
	resp, body = get(t, b.url+"/datasets", "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `data-dataset="trips"`)

	// Add, edit and delete: versions 2, 3 and 4; version 1 is as it was.
	resp, _ = postForm(t, noRedirect, b.url+"/datasets/trips/examples", url.Values{"input": {`{"destination":"Rome"}`}, "tags": {"hand, rome"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, body = postForm(t, noRedirect, b.url+"/datasets/trips/examples", url.Values{"input": {`{"destination":`}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "not valid JSON")
	var ds struct {
		Examples []struct {
			Key   string
			Input json.RawMessage
			Tags  []string
		}
	}
	getJSON(t, b.url+"/api/v1/datasets/trips", &ds)
	require.Len(t, ds.Examples, 3)
	var rome string
	for _, e := range ds.Examples {
		if strings.Contains(string(e.Input), "Rome") {
			rome = e.Key
			require.Equal(t, []string{"hand", "rome"}, e.Tags)
		}
	}
	resp, _ = postForm(t, noRedirect, b.url+"/datasets/trips/examples", url.Values{"edit": {rome}, "input": {`{"destination":"Roma"}`}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, _ = postForm(t, noRedirect, b.url+"/datasets/trips/examples", url.Values{"delete": {rome}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/datasets/trips?version=4", resp.Header.Get("Location"))
	getJSON(t, b.url+"/api/v1/datasets/trips?version=3", &ds)
	require.Len(t, ds.Examples, 3)
	require.Contains(t, string(ds.Examples[2].Input)+string(ds.Examples[0].Input)+string(ds.Examples[1].Input), "Roma")
	getJSON(t, b.url+"/api/v1/datasets/trips", &ds)
	require.Len(t, ds.Examples, 2)
	resp, body = get(t, b.url+"/datasets/trips?version=1", "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `aria-current="page">v1<`)

	// An experiment from the dataset's page; a refused one says why.
	resp, body = postForm(t, noRedirect, b.url+"/datasets/trips/experiments", url.Values{"action": {"/flow/travelAgent"}, "evaluator": {"regex"}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "regex needs a pattern")
	resp, _ = postForm(t, noRedirect, b.url+"/datasets/trips/experiments", url.Values{"action": {"/flow/travelAgent"}, "name": {"base"},
		"evaluator": {"exact", "trajectory", "regex"}, "arg_regex": {"^You're booked"}, "tools": {"recorded"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	base := strings.TrimPrefix(resp.Header.Get("Location"), "/experiments/")
	b.waitExperiment(t, base)
	before := b.count(t, "runs")

	var baseExp struct{ ID string }
	getJSON(t, b.url+"/api/v1/experiments/"+base, &struct{ Experiment *struct{ ID string } }{&baseExp})
	resp, _ = postForm(t, noRedirect, b.url+"/datasets/trips/experiments", url.Values{"action": {"/flow/travelAgent"}, "name": {"other"},
		"evaluator": {"exact", "trajectory"}, "model": {"demo/research"}, "baseline": {baseExp.ID}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	other := strings.TrimPrefix(resp.Header.Get("Location"), "/experiments/")
	b.waitExperiment(t, other)
	require.Equal(t, before+2, b.count(t, "runs"), "one run an example")

	resp, body = get(t, b.url+"/experiments/"+other, "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `data-status="finished"`)
	require.NotContains(t, body, `http-equiv="refresh"`, "a finished experiment's page stays")
	require.Contains(t, body, "2 regressions")
	require.Contains(t, body, "baseline base")
	require.Equal(t, 2, strings.Count(body, `data-verdict="regression"`))
	require.Contains(t, body, "/diff/", "each row links the diff with the baseline's run")
	require.Contains(t, body, "demo research script: unexpected prompt", "the failed run's error is shown")

	// Each score keeps the trace of its evaluation, stored like any span.
	var scored struct {
		Rows []struct {
			Scores []struct {
				Evaluator string
				TraceID   *string `json:"trace_id"`
			}
		}
	}
	getJSON(t, b.url+"/api/v1/experiments/"+base, &scored)
	require.NoError(t, b.prov.ForceFlush(context.Background()))
	for _, sc := range scored.Rows[0].Scores {
		require.NotNil(t, sc.TraceID, sc.Evaluator)
		require.Eventually(t, func() bool {
			var n int
			require.NoError(t, b.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM spans WHERE trace_id = $1`, *sc.TraceID).Scan(&n))
			return n > 0
		}, 10*time.Second, 20*time.Millisecond, "the evaluation's span of %s is stored", sc.Evaluator)
	}

	resp, body = get(t, b.url+"/experiments/"+base, "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 2, strings.Count(body, `data-verdict="pass"`), body)
	resp, _ = get(t, b.url+"/experiments/nosuch", "Accept", "text/html")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// TestExperimentsAPIRefusesBadInputByField: every mistake is a 4xx naming its field, and nothing
// is stored.
func TestExperimentsAPIRefusesBadInputByField(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	post := func(path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, b.url+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var e struct {
			Error struct{ Details struct{ Field string } }
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Error.Details.Field
	}
	for _, c := range []struct{ path, body, field string }{
		{"/api/v1/datasets", `{"name":"a b"}`, "name"},
		{"/api/v1/datasets", `{"name":"ok","examples":[{"input":{"x":1},"tags":[""]}]}`, "examples/0/tags"},
		{"/api/v1/datasets", `{"name":"ok","examples":[{"input":"\u0000"}]}`, "examples/0/input"},
		{"/api/v1/datasets", `{"name":"ok","from_runs":"colour=blue"}`, "from_runs"},
		{"/api/v1/datasets", `{"name":"ok","from_runs":"action=travelAgent"}`, "from_runs"},
		{"/api/v1/experiments", `{"dataset":"nosuch","action":"/flow/travelAgent","evaluators":["exact"]}`, "dataset"},
	} {
		code, field := post(c.path, c.body)
		require.Equal(t, http.StatusUnprocessableEntity, code, c.body)
		require.Equal(t, c.field, field, c.body)
	}
	require.Equal(t, 0, b.count(t, "datasets"), "a refused dataset leaves nothing")

	code, _ := post("/api/v1/datasets", `{"name":"ok","examples":[{"input":{"destination":"Rome"}}]}`)
	require.Equal(t, http.StatusCreated, code)
	code, _ = post("/api/v1/datasets", `{"name":"ok"}`)
	require.Equal(t, http.StatusConflict, code)
	for _, c := range []struct{ body, field string }{
		{`{"dataset":"ok","action":"/flow/nosuch","evaluators":["exact"]}`, "action"},
		{`{"dataset":"ok","action":"/flow/travelAgent","evaluators":[]}`, "evaluators"},
		{`{"dataset":"ok","action":"/flow/travelAgent","evaluators":["latency:soon"]}`, "evaluators"},
		{`{"dataset":"ok","action":"/flow/travelAgent","evaluators":["exact"],"tools":"cassette"}`, "tools"},
		{`{"dataset":"ok","action":"/flow/travelAgent","evaluators":["exact"],"concurrency":1000}`, "concurrency"},
		{`{"dataset":"ok","version":7,"action":"/flow/travelAgent","evaluators":["exact"]}`, "version"},
		{`{"dataset":"ok","action":"/flow/travelAgent","evaluators":["exact"],"baseline":"nosuch"}`, "baseline"},
		{`{"dataset":"ok","action":"/flow/travelAgent","evaluators":["exact"],"model":"nosuch/model"}`, "overrides/model"},
	} {
		code, field := post("/api/v1/experiments", c.body)
		require.Equal(t, http.StatusUnprocessableEntity, code, c.body)
		require.Equal(t, c.field, field, c.body)
	}
	require.Equal(t, 0, b.count(t, "experiments"))
	code, _ = post("/api/v1/datasets/nosuch/import", `{"input":1}`)
	require.Equal(t, http.StatusNotFound, code)
	code, field := post("/api/v1/datasets/ok/import", "{\"input\":1}\n{\"reference\":2}\n")
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Equal(t, "line 2", field)
	code, field = post("/api/v1/datasets/ok/examples", `{"delete":["00000000-0000-4000-8000-000000000000"]}`)
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Equal(t, "edit", field)
}

// waitExperiment waits until an experiment has ended.
func (b *bundle) waitExperiment(t *testing.T, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var sum struct{ Experiment struct{ Status string } }
		getJSON(t, b.url+"/api/v1/experiments/"+id, &sum)
		return sum.Experiment.Status == store.ExperimentFinished
	}, 60*time.Second, 50*time.Millisecond, "experiment %s never finished", id)
}

// TestRunsTickedInTheRunsListMakeADataset ticks runs in the runs list and adds them to a new
// dataset, then to that dataset as its next version; a run still in flight is refused by its id.
func TestRunsTickedInTheRunsListMakeADataset(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	b.recordTrips(t, "Lisbon", "Oslo")
	list, _, err := b.store.RunList(context.Background(), store.RunListParams{Action: "/flow/travelAgent"})
	require.NoError(t, err)
	require.Len(t, list, 2)

	_, body := get(t, b.url+"/runs", "Accept", "text/html")
	require.Contains(t, body, `formaction="/datasets/from-runs"`)
	resp, body := get(t, b.url+"/datasets/from-runs?run="+list[0].ID.String()+"&run="+list[1].ID.String(), "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "Add 2 runs to a dataset")
	resp, _ = get(t, b.url+"/datasets/from-runs", "Accept", "text/html")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	resp, _ = postForm(t, noRedirect, b.url+"/datasets/from-runs", url.Values{"run": {list[0].ID.String()}, "new_name": {"picked"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/datasets/picked", resp.Header.Get("Location"))
	resp, _ = postForm(t, noRedirect, b.url+"/datasets/from-runs", url.Values{"run": {list[1].ID.String()}, "dataset": {"picked"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/datasets/picked?version=2", resp.Header.Get("Location"))
	var ds struct {
		Examples []struct {
			SourceRunID string `json:"source_run_id"`
		}
	}
	getJSON(t, b.url+"/api/v1/datasets/picked", &ds)
	require.Len(t, ds.Examples, 2)

	running := b.startRun(t, "/flow/countdown", `{"from":50}`, store.RunRunning)
	resp, body = postForm(t, noRedirect, b.url+"/datasets/from-runs", url.Values{"run": {running.ID.String()}, "dataset": {"picked"}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "is running")
}
