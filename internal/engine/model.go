package engine

import (
	"context"
	"encoding/json"

	"github.com/loupe-dev/loupe/ai"
)

// Model is a registered model: a model of package ai that the registry lists and runs by key.
type Model interface {
	Action
	ai.Model
}

type model struct {
	desc ActionDesc
	fn   ModelFunc
}

// NewModel makes a model without registering it. opts may be nil.
func NewModel(name string, opts *ModelOptions, fn ModelFunc) Model {
	if opts == nil {
		opts = &ModelOptions{}
	}
	return &model{
		desc: ActionDesc{
			Key: ActionKey(ActionTypeModel, name), Name: name, Type: ActionTypeModel,
			Metadata: map[string]any{"model": opts},
		},
		fn: fn,
	}
}

// DefineModel makes a model and registers it under /model/<name>. It panics on a duplicate name.
func DefineModel(r *Registry, name string, opts *ModelOptions, fn ModelFunc) Model {
	m := NewModel(name, opts, fn)
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
