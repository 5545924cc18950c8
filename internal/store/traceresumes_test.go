package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestTraceResumeFoldLinksAResumeToTheLatestEarlierInterruption: a resume links to the latest
// earlier trace that interrupted with the same tool and ref (preferring the same session), not to
// one in another session; a trace that interrupted with the call itself links to no other.
func TestTraceResumeFoldLinksAResumeToTheLatestEarlierInterruption(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	require.NoError(t, s.TraceResumeFold(ctx, []store.InterruptRef{
		{TraceID: "a", Tool: "pay", Ref: "r1", StartTime: 10},
		{TraceID: "b", Tool: "pay", Ref: "r1", StartTime: 20},
		{TraceID: "c", Tool: "pay", Ref: "r1", StartTime: 30, Session: "other"},
		{TraceID: "self", Tool: "pay", Ref: "r1", StartTime: 40},
	}, nil))
	require.NoError(t, s.TraceResumeFold(ctx, nil, []store.ResumeRef{
		{TraceID: "x", Tool: "pay", Ref: "r1", StartTime: 25},
		{TraceID: "y", Tool: "pay", Ref: "r1", StartTime: 35, Session: "mine"},
		{TraceID: "self", Tool: "pay", Ref: "r1", StartTime: 45},
	}))
	resumes, _, err := s.TraceResumeLinks(ctx, "x")
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, resumes, "the latest earlier interruption")
	resumes, _, err = s.TraceResumeLinks(ctx, "y")
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, resumes, "not the one of another session")
	resumes, _, err = s.TraceResumeLinks(ctx, "self")
	require.NoError(t, err)
	require.Empty(t, resumes, "a trace that resumed its own interrupt")
	_, by, err := s.TraceResumeLinks(ctx, "b")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"x", "y"}, by)
}
