package server

import (
	"errors"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/policy"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// apiPolicy is the approval policy in force, as GET /api/v1/policy answers it.
type apiPolicy struct {
	// Version is 0 while no policy was ever stored: every interrupt waits for a person.
	Version   int64          `json:"version"`
	Source    string         `json:"source"`
	Origin    string         `json:"origin,omitempty"`
	CreatedBy string         `json:"created_by,omitempty"`
	CreatedAt any            `json:"created_at,omitempty"`
	Rules     []*policy.Rule `json:"rules"`
	// File is the policy file this server loads (serve --policy-file): the policy is edited there,
	// and saving here is refused.
	File     string          `json:"file,omitempty"`
	Versions []*store.Policy `json:"versions"`
}

func (s *Server) currentPolicy(c echo.Context) (*apiPolicy, error) {
	ctx := c.Request().Context()
	out := &apiPolicy{Rules: []*policy.Rule{}, File: s.cfg.PolicyFile}
	p, err := s.store.PolicyLatest(ctx)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, err
	default:
		out.Version, out.Source, out.Origin, out.CreatedBy, out.CreatedAt = p.Version, p.Source, p.Origin, p.CreatedBy, p.CreatedAt
		if set, err := policy.Parse([]byte(p.Source)); err == nil {
			out.Rules = set.Rules
		}
	}
	if out.Versions, err = s.store.PolicyList(ctx, 20); err != nil {
		return nil, err
	}
	return out, nil
}

// apiPolicyGet is GET /api/v1/policy.
func (s *Server) apiPolicyGet(c echo.Context) error {
	p, err := s.currentPolicy(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

// policyRequest is the body of POST /api/v1/policy and POST /api/v1/policy/whatif.
type policyRequest struct {
	Source string `json:"source"`
	// Last is how many of the newest interrupts a what-if reads (default 1000).
	Last int `json:"last,omitempty"`
}

func decodePolicyRequest(c echo.Context) (policyRequest, error) {
	var req policyRequest
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return req, err
	}
	if err := decodeJSON(body, &req); err != nil {
		return req, err
	}
	return req, nil
}

// policyError makes a policy that does not compile a 422 naming the line and rule.
func policyError(err error) error {
	var pe *policy.Error
	if errors.As(err, &pe) {
		return &Error{Status: http.StatusUnprocessableEntity, Code: "invalid", Message: pe.Error(),
			Details: map[string]any{"field": "source", "line": pe.Line, "rule": pe.Rule}}
	}
	return runsError(err)
}

// apiPolicySave is POST /api/v1/policy (admins): the source becomes the version in force.
func (s *Server) apiPolicySave(c echo.Context) error {
	if s.cfg.PolicyFile != "" {
		return Errorf(http.StatusConflict, "conflict", "this server loads its policy from %s (serve --policy-file): edit the file", s.cfg.PolicyFile)
	}
	req, err := decodePolicyRequest(c)
	if err != nil {
		return err
	}
	p, created, err := runs.SavePolicy(c.Request().Context(), s.store, []byte(req.Source), "ui", principal(c).Username)
	if err != nil {
		return policyError(err)
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, p)
}

// apiPolicyWhatIf is POST /api/v1/policy/whatif: a draft policy applied to the newest interrupts.
func (s *Server) apiPolicyWhatIf(c echo.Context) error {
	req, err := decodePolicyRequest(c)
	if err != nil {
		return err
	}
	if req.Last == 0 {
		req.Last = 1000
	}
	rep, err := runs.PolicyWhatIf(c.Request().Context(), s.store, []byte(req.Source), req.Last)
	if err != nil {
		return policyError(err)
	}
	return c.JSON(http.StatusOK, rep)
}
