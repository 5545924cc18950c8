package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/auth"
	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/store"
)

// The prompt playground (issue #30): a .prompt file's prompt is rendered and run with an edited
// source and model settings before the edit is saved, and, in dev mode, saved back to its own
// file. The prompt is always found by its name among the loaded directories' prompts; the file
// written is the one the directory loaded it from, never a path a request names.

// promptPlaygroundLabel is the root span attribute of a playground run: "edited" when it ran a
// source other than the file's, "file" otherwise. The last runs list shows it.
const promptPlaygroundLabel = "loupe.playground"

// promptEditRequest is the body of the playground's calls. Source is the file's whole text
// (front matter and template); left out, the file as it is on disk. Model, Temperature,
// MaxOutputTokens and Tools, when present, are written into the source's front matter first
// (model, config.temperature, config.maxOutputTokens, tools); null removes the value.
type promptEditRequest struct {
	Source          *string         `json:"source"`
	Input           json.RawMessage `json:"input"`
	Model           json.RawMessage `json:"model"`
	Temperature     json.RawMessage `json:"temperature"`
	MaxOutputTokens json.RawMessage `json:"max_output_tokens"`
	Tools           json.RawMessage `json:"tools"`
}

// promptTarget is a loaded prompt file found by its name.
type promptTarget struct {
	name, key string
	dir       *engine.PromptDir
	// file is the path the directory loaded the prompt from; rel, the same relative to the
	// directory, which is what responses show.
	file, rel string
}

// promptByName finds the .prompt file of the prompt named name (a subdirectory's prompt is
// "sub/name"). A prompt defined in Go is 409: it has no file to edit.
func (s *Server) promptByName(name string) (*promptTarget, error) {
	key := engine.ActionKey(engine.ActionTypePrompt, name)
	reg := s.deps.Runs.Registry()
	for _, d := range reg.PromptDirs() {
		if file, ok := d.File(key); ok {
			rel, err := filepath.Rel(d.Dir(), file)
			if err != nil {
				return nil, fmt.Errorf("prompt %s: %w", name, err)
			}
			return &promptTarget{name: name, key: key, dir: d, file: file, rel: filepath.ToSlash(rel)}, nil
		}
	}
	if a := reg.Lookup(key); a != nil && a.Desc().Type == engine.ActionTypePrompt {
		return nil, Errorf(http.StatusConflict, "not_a_file", "prompt %s is defined in Go code: only a prompt loaded from a .prompt file is edited here", name)
	}
	return nil, Errorf(http.StatusNotFound, "not_found", "no prompt %q is loaded from a .prompt file", name)
}

// promptName is the :name of a playground route, unescaped ("sub%2Fname" is "sub/name").
func promptName(c echo.Context) (string, error) {
	name, err := url.PathUnescape(c.Param("name"))
	if err != nil || name == "" {
		return "", Errorf(http.StatusBadRequest, "bad_request", "the prompt's name is not a valid path segment")
	}
	return name, nil
}

// promptFileError is a source that does not compile, as a 422 naming the file (relative to its
// directory) and line.
func promptFileError(t *promptTarget, err error) error {
	var fe *engine.PromptFileError
	if !errors.As(err, &fe) {
		return err
	}
	loc := t.rel
	if fe.Line > 0 {
		loc = fmt.Sprintf("%s:%d", t.rel, fe.Line)
	}
	return &Error{Status: http.StatusUnprocessableEntity, Code: "invalid_prompt", Message: loc + ": " + fe.Err.Error(),
		Details: map[string]any{"file": t.rel, "line": fe.Line}}
}

// frontMatterEdits are the request's model fields as edits of the front matter.
func (r *promptEditRequest) frontMatterEdits() ([]engine.FrontMatterEdit, error) {
	var edits []engine.FrontMatterEdit
	add := func(field string, raw json.RawMessage, path []string, v any) error {
		if len(raw) == 0 {
			return nil
		}
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			edits = append(edits, engine.FrontMatterEdit{Path: path, Delete: true})
			return nil
		}
		if err := json.Unmarshal(raw, v); err != nil {
			return &Error{Status: http.StatusUnprocessableEntity, Code: "invalid", Message: fmt.Sprintf("%s: %v", field, err),
				Details: map[string]string{"field": field}}
		}
		edits = append(edits, engine.FrontMatterEdit{Path: path, Value: editValue(v)})
		return nil
	}
	var model string
	var temp float64
	var maxTokens int64
	var tools []string
	if err := add("model", r.Model, []string{"model"}, &model); err != nil {
		return nil, err
	}
	if err := add("temperature", r.Temperature, []string{"config", "temperature"}, &temp); err != nil {
		return nil, err
	}
	if err := add("max_output_tokens", r.MaxOutputTokens, []string{"config", "maxOutputTokens"}, &maxTokens); err != nil {
		return nil, err
	}
	if err := add("tools", r.Tools, []string{"tools"}, &tools); err != nil {
		return nil, err
	}
	for i, e := range edits {
		switch v := e.Value.(type) {
		case string:
			if v == "" { // an emptied model field: the front matter's model goes
				edits[i] = engine.FrontMatterEdit{Path: e.Path, Delete: true}
			}
		case []string:
			if len(v) == 0 {
				edits[i] = engine.FrontMatterEdit{Path: e.Path, Delete: true}
			}
		}
	}
	return edits, nil
}

func editValue(v any) any {
	switch p := v.(type) {
	case *string:
		return *p
	case *float64:
		return *p
	case *int64:
		return *p
	case *[]string:
		return *p
	}
	return v
}

// promptEdit is the request's source, with its model fields written in, compiled.
func (s *Server) promptEdit(t *promptTarget, req *promptEditRequest) (string, *engine.FilePrompt, error) {
	var src string
	if req.Source != nil {
		src = *req.Source
	} else {
		b, err := os.ReadFile(t.file)
		if err != nil {
			return "", nil, fmt.Errorf("read prompt %s: %w", t.name, err)
		}
		src = string(b)
	}
	edits, err := req.frontMatterEdits()
	if err != nil {
		return "", nil, err
	}
	src, err = engine.EditFrontMatter(t.file, src, edits)
	if err != nil {
		return "", nil, promptFileError(t, err)
	}
	p, err := t.dir.Parse(t.key, src)
	if err != nil {
		return "", nil, promptFileError(t, err)
	}
	return src, p, nil
}

// apiPrompt is a prompt file as the playground API shows it.
type apiPrompt struct {
	Name string `json:"name"`
	Key  string `json:"key"`
	// File is the prompt's file relative to its directory.
	File   string `json:"file"`
	Source string `json:"source"`
	// Editable says whether PUT .../source would save: dev mode, and an admin.
	Editable bool     `json:"editable"`
	Model    string   `json:"model,omitempty"`
	Config   any      `json:"config,omitempty"`
	Tools    []string `json:"tools"`
	// LoadError is the file's error when it did not load ("file:line: why").
	LoadError string         `json:"load_error,omitempty"`
	Runs      []apiPromptRun `json:"runs"`
}

// apiPromptRun is one of a prompt's last runs, to compare an edit's with.
type apiPromptRun struct {
	TraceID      string  `json:"trace_id"`
	RunID        string  `json:"run_id,omitempty"`
	Status       string  `json:"status"`
	Edited       bool    `json:"edited"`
	Model        string  `json:"model,omitempty"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	LatencyMS    float64 `json:"latency_ms"`
	Output       string  `json:"output"`
	StartedAt    string  `json:"started_at"`
}

// promptEditable says whether the request may save a prompt's file: dev mode, and an admin.
func (s *Server) promptEditable(c echo.Context) bool {
	pr := principal(c)
	return s.cfg.Dev && pr != nil && auth.Allows(pr.Role, store.RoleAdmin)
}

// apiPromptGet is GET /api/v1/prompts/:name: the prompt's file, its settings and its last runs.
func (s *Server) apiPromptGet(c echo.Context) error {
	name, err := promptName(c)
	if err != nil {
		return err
	}
	t, err := s.promptByName(name)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(t.file)
	if err != nil {
		return fmt.Errorf("read prompt %s: %w", name, err)
	}
	out := apiPrompt{Name: name, Key: t.key, File: t.rel, Source: string(b), Editable: s.promptEditable(c), Tools: []string{}}
	if p, err := t.dir.Parse(t.key, string(b)); err != nil {
		out.LoadError = promptFileError(t, err).Error()
	} else {
		o := p.Options()
		out.Model, out.Config = o.Model, o.Config
		if len(o.Tools) > 0 {
			out.Tools = o.Tools
		}
	}
	runs, err := s.promptRuns(c.Request().Context(), name)
	if err != nil {
		return err
	}
	out.Runs = runs
	return c.JSON(http.StatusOK, out)
}

// editedPrompt reads a render or run request: the prompt the path names, the request, and the
// prompt as the request edits it (its source, compiled).
func (s *Server) editedPrompt(c echo.Context) (*promptTarget, *promptEditRequest, string, *engine.FilePrompt, error) {
	name, err := promptName(c)
	if err != nil {
		return nil, nil, "", nil, err
	}
	t, err := s.promptByName(name)
	if err != nil {
		return nil, nil, "", nil, err
	}
	var req promptEditRequest
	if err := bindJSON(c, &req); err != nil {
		return nil, nil, "", nil, err
	}
	src, p, err := s.promptEdit(t, &req)
	if err != nil {
		return nil, nil, "", nil, err
	}
	return t, &req, src, p, nil
}

// apiPromptRender is POST /api/v1/prompts/:name/render: the edited source's messages for the
// input, and the model, config and tools it would run with, without running it.
func (s *Server) apiPromptRender(c echo.Context) error {
	_, req, src, p, err := s.editedPrompt(c)
	if err != nil {
		return err
	}
	msgs, err := p.Render(req.Input, nil)
	if err != nil {
		return &Error{Status: http.StatusUnprocessableEntity, Code: "invalid", Message: err.Error(), Details: map[string]string{"field": "input"}}
	}
	o := p.Options()
	tools := o.Tools
	if tools == nil {
		tools = []string{}
	}
	return c.JSON(http.StatusOK, map[string]any{"source": src, "messages": msgs, "model": o.Model, "config": o.Config,
		"tools": tools, "output": o.Output})
}

// apiPromptRun is POST /api/v1/prompts/:name/run[?stream=true]: the edited prompt runs at once
// in this process, as Genkit's runAction runs a prompt, and answers in runAction's shapes (the
// model's chunks a line each when streamed, then {"result"} or {"error"}, the trace id in
// X-Genkit-Trace-Id). Its trace is a run of the prompt, listed among its last runs.
func (s *Server) apiPromptRun(c echo.Context) error {
	t, req, src, p, err := s.editedPrompt(c)
	if err != nil {
		return err
	}
	// A broken input is a 422 before anything runs, as render says it.
	if _, err := p.Render(req.Input, nil); err != nil {
		return &Error{Status: http.StatusUnprocessableEntity, Code: "invalid", Message: err.Error(), Details: map[string]string{"field": "input"}}
	}
	label := "edited"
	if b, err := os.ReadFile(t.file); err == nil && string(b) == src {
		label = "file"
	}
	stream := c.QueryParam("stream") == "true"
	ctx, out, done := s.startActionStream(c, stream, map[string]string{promptPlaygroundLabel: label})
	defer done()
	var cb engine.ModelStreamFunc
	if stream {
		var line bytes.Buffer
		cb = func(_ context.Context, chunk *engine.ModelResponseChunk) error {
			line.Reset()
			if err := json.NewEncoder(&line).Encode(chunk); err != nil {
				return err
			}
			return out.writeChunk(line.Bytes())
		}
	}
	result, err := p.RunStreaming(ctx, req.Input, cb)
	return out.finish(ctx, result, err)
}

// apiPromptSave is PUT /api/v1/prompts/:name/source: in dev mode, an admin's edit is written to
// the prompt's own file (a temporary file in its directory, then a rename, so that the reloader
// never reads half a file), and the directory is reloaded at once. A source that does not compile
// is refused (422), so that a save never breaks the prompt.
func (s *Server) apiPromptSave(c echo.Context) error {
	if !s.cfg.Dev {
		return Errorf(http.StatusForbidden, "dev_only", "prompt files are saved only by devui serve --dev; copy the edit into the file instead")
	}
	name, err := promptName(c)
	if err != nil {
		return err
	}
	t, err := s.promptByName(name)
	if err != nil {
		return err
	}
	var req promptEditRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	if req.Source == nil {
		return &Error{Status: http.StatusUnprocessableEntity, Code: "invalid", Message: "source: the file's new text is required",
			Details: map[string]string{"field": "source"}}
	}
	src, _, err := s.promptEdit(t, &req)
	if err != nil {
		return err
	}
	if err := writePromptFile(t, src); err != nil {
		return err
	}
	s.log.Info("prompt saved", "prompt", name, "file", t.file, "by", principal(c).Username)
	ctx := c.Request().Context()
	if _, err := t.dir.Reload(); err != nil {
		return fmt.Errorf("reload prompts after saving %s: %w", name, err)
	}
	if err := s.deps.Runs.Announce(ctx); err != nil {
		s.log.Warn("announce the catalogue after saving a prompt", "prompt", name, "err", err)
	}
	return c.JSON(http.StatusOK, map[string]any{"name": name, "file": t.rel, "source": src})
}

// writePromptFile replaces the prompt's file with src atomically. The file must be a regular
// file inside its directory once links are resolved: a prompt loaded through a symbolic link is
// not written (the link would be replaced, or the write land outside the directory).
func writePromptFile(t *promptTarget, src string) error {
	dir, err := filepath.EvalSymlinks(t.dir.Dir())
	if err != nil {
		return fmt.Errorf("save prompt %s: %w", t.name, err)
	}
	info, err := os.Lstat(t.file)
	if err != nil {
		return fmt.Errorf("save prompt %s: %w", t.name, err)
	}
	real, err := filepath.EvalSymlinks(t.file)
	if err != nil {
		return fmt.Errorf("save prompt %s: %w", t.name, err)
	}
	rel, err := filepath.Rel(dir, real)
	if !info.Mode().IsRegular() || err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) ||
		filepath.IsAbs(rel) || !strings.HasSuffix(real, ".prompt") {
		return Errorf(http.StatusConflict, "not_saved", "prompt %s: its file %s is not a regular .prompt file inside the prompt directory; it is not written", t.name, t.rel)
	}
	tmp, err := os.CreateTemp(filepath.Dir(real), ".loupe-save-*.tmp")
	if err != nil {
		return fmt.Errorf("save prompt %s: %w", t.name, err)
	}
	_, err = tmp.WriteString(src)
	if err == nil {
		err = tmp.Chmod(info.Mode().Perm())
	}
	if err == nil {
		err = tmp.Sync()
	}
	err = errors.Join(err, tmp.Close())
	if err != nil {
		return errors.Join(fmt.Errorf("save prompt %s: %w", t.name, err), os.Remove(tmp.Name()))
	}
	if err := os.Rename(tmp.Name(), real); err != nil {
		return errors.Join(fmt.Errorf("save prompt %s: %w", t.name, err), os.Remove(tmp.Name()))
	}
	return nil
}
