package server

import (
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/policy"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// apiPolicy is the approval policy in force, as GET /api/v1/policy answers it.
type apiPolicy struct {
	// Version is the version in force, 0 while none is: every interrupt waits for a person.
	Version   int64          `json:"version"`
	Source    string         `json:"source"`
	Origin    string         `json:"origin,omitempty"`
	CreatedBy string         `json:"created_by,omitempty"`
	CreatedAt any            `json:"created_at,omitempty"`
	Rules     []*policy.Rule `json:"rules"`
	// File is the policy file this server loads (serve --policy-file): the policy is edited there,
	// and saving here is refused.
	File string `json:"file,omitempty"`
	// Versions are the stored versions, newest first: the one in force and the others (drafts,
	// and versions once in force).
	Versions []*store.Policy `json:"versions"`
}

func (s *Server) currentPolicy(c echo.Context) (*apiPolicy, error) {
	ctx := c.Request().Context()
	out := &apiPolicy{Rules: []*policy.Rule{}, File: s.cfg.PolicyFile}
	p, err := s.store.PolicyInForce(ctx)
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
	// Draft saves the source as a version that is not in force (POST /api/v1/policy).
	Draft bool `json:"draft,omitempty"`
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

// apiPolicySave is POST /api/v1/policy (admins): the source becomes the version in force, or with
// "draft": true a version beside it.
func (s *Server) apiPolicySave(c echo.Context) error {
	if err := s.policyFileConflict(); err != nil {
		return err
	}
	req, err := decodePolicyRequest(c)
	if err != nil {
		return err
	}
	save := runs.SavePolicy
	if req.Draft {
		save = runs.SavePolicyDraft
	}
	p, created, err := save(c.Request().Context(), s.store, []byte(req.Source), "ui", principal(c).Username)
	if err != nil {
		return policyError(err)
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, p)
}

// policyFileConflict refuses a change of the policy on a server that loads it from a file.
func (s *Server) policyFileConflict() error {
	if s.cfg.PolicyFile != "" {
		return Errorf(http.StatusConflict, "conflict", "this server loads its policy from %s (serve --policy-file): edit the file", s.cfg.PolicyFile)
	}
	return nil
}

// apiPolicyVersion is a stored version as GET /api/v1/policy/versions/{version} answers it.
type apiPolicyVersion struct {
	*store.Policy
	InForce bool `json:"in_force"`
}

func policyVersionParam(c echo.Context) (int64, error) {
	v, err := strconv.ParseInt(c.Param("version"), 10, 64)
	if err != nil || v <= 0 {
		return 0, Errorf(http.StatusNotFound, "not_found", "no policy version %q", c.Param("version"))
	}
	return v, nil
}

// apiPolicyVersionGet is GET /api/v1/policy/versions/{version}: a stored version with its source.
func (s *Server) apiPolicyVersionGet(c echo.Context) error {
	v, err := policyVersionParam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	p, err := s.store.PolicyGet(ctx, v)
	if err != nil {
		return runsError(err)
	}
	cur, err := s.store.PolicyInForceVersion(ctx)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apiPolicyVersion{Policy: p, InForce: cur == v})
}

// apiPolicyActivate is POST /api/v1/policy/versions/{version}/activate (admins): the version is
// put in force (200 also when it was already).
func (s *Server) apiPolicyActivate(c echo.Context) error {
	if err := s.policyFileConflict(); err != nil {
		return err
	}
	v, err := policyVersionParam(c)
	if err != nil {
		return err
	}
	p, _, err := s.store.PolicyActivate(c.Request().Context(), v, principal(c).Username)
	if err != nil {
		return runsError(err)
	}
	return c.JSON(http.StatusOK, apiPolicyVersion{Policy: p, InForce: true})
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
