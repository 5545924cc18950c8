package engine

import (
	"context"
	"encoding/json"
)

// ModelStreamFunc receives the chunks a model streams during one call.
type ModelStreamFunc func(ctx context.Context, chunk *ModelResponseChunk) error

// ModelFunc is a model implementation. cb is nil when the caller does not stream.
type ModelFunc func(ctx context.Context, req *ModelRequest, cb ModelStreamFunc) (*ModelResponse, error)

// ModelSupports lists what a model can do, as in Genkit's ModelInfo.supports.
type ModelSupports struct {
	Multiturn   bool `json:"multiturn,omitempty"`
	Tools       bool `json:"tools,omitempty"`
	SystemRole  bool `json:"systemRole,omitempty"`
	Media       bool `json:"media,omitempty"`
	Constrained bool `json:"constrained,omitempty"`
	ToolChoice  bool `json:"toolChoice,omitempty"`
}

// ModelInfo describes a model.
type ModelInfo struct {
	Label    string        `json:"label,omitempty"`
	Supports ModelSupports `json:"supports"`
}

// Model is a registered model action.
type Model interface {
	Action
	// Name is the model's registered name ("provider/model").
	Name() string
	// Generate performs one model call.
	Generate(ctx context.Context, req *ModelRequest, cb ModelStreamFunc) (*ModelResponse, error)
}

type model struct {
	desc ActionDesc
	fn   ModelFunc
}

// NewModel makes a model without registering it.
func NewModel(name string, info ModelInfo, fn ModelFunc) Model {
	return &model{
		desc: ActionDesc{
			Key: ActionKey(ActionTypeModel, name), Name: name, Type: ActionTypeModel,
			Metadata: map[string]any{"model": info},
		},
		fn: fn,
	}
}

// DefineModel makes a model and registers it under /model/<name>. It panics on a duplicate name.
func DefineModel(r *Registry, name string, info ModelInfo, fn ModelFunc) Model {
	m := NewModel(name, info, fn)
	r.mustRegister(m)
	return m
}

func (m *model) Name() string      { return m.desc.Name }
func (m *model) Desc() *ActionDesc { return &m.desc }

func (m *model) Generate(ctx context.Context, req *ModelRequest, cb ModelStreamFunc) (*ModelResponse, error) {
	return m.fn(ctx, req, cb)
}

func (m *model) RunJSON(ctx context.Context, input json.RawMessage, cb StreamFunc) (json.RawMessage, error) {
	var req ModelRequest
	if err := json.Unmarshal(input, &req); err != nil {
		return nil, Errorf(StatusInvalidArgument, "model %s: decode request: %w", m.desc.Name, err)
	}
	var mcb ModelStreamFunc
	if cb != nil {
		mcb = func(ctx context.Context, c *ModelResponseChunk) error {
			b, err := json.Marshal(c)
			if err != nil {
				return err
			}
			return cb(ctx, b)
		}
	}
	resp, err := m.fn(ctx, &req, mcb)
	if err != nil {
		return nil, err
	}
	return json.Marshal(resp)
}
