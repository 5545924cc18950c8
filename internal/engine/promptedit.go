package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/google/dotprompt/go/dotprompt"
)

// FrontMatterEdit sets (or, with Delete, removes) the front matter's value at Path, such as
// ["model"] or ["config", "temperature"]: a prompt playground's model fields written back into
// the file.
type FrontMatterEdit struct {
	Path   []string
	Value  any
	Delete bool
}

// EditFrontMatter returns a .prompt file's source with the edits applied to its front matter.
// Edits that change nothing are left out, and a source none of them changes is returned as it
// is, byte for byte; otherwise the front matter is written again in its order, with its comments
// (a flow sequence such as [a, b] comes back in block style). A front matter that does not parse
// is a *PromptFileError naming the line.
func EditFrontMatter(file, source string, edits []FrontMatterEdit) (string, error) {
	head, front, body := "", "", source
	if m := dotprompt.FrontmatterAndBodyRegex.FindStringSubmatchIndex(source); m != nil {
		head, front, body = source[:m[2]], source[m[2]:m[3]], source[m[4]:]
	} else if m := dotprompt.EmptyFrontmatterRegex.FindStringSubmatchIndex(source); m != nil {
		body = source[m[2]:]
	}
	comments := yaml.CommentMap{}
	var doc yaml.MapSlice
	if strings.TrimSpace(front) != "" {
		if err := yaml.UnmarshalWithOptions([]byte(front), &doc, yaml.CommentToMap(comments), yaml.UseOrderedMap()); err != nil {
			line := 1
			if p := yamlPosition.FindStringSubmatch(err.Error()); p != nil {
				n, _ := strconv.Atoi(p[1])
				line = n + strings.Count(head, "\n")
			}
			msg, _, _ := strings.Cut(err.Error(), "\n")
			return "", &PromptFileError{File: file, Line: line, Err: fmt.Errorf("front matter: %s", msg)}
		}
	}
	changed := false
	for _, e := range edits {
		if len(e.Path) == 0 {
			continue
		}
		var ok bool
		doc, ok = editMapSlice(doc, e.Path, e.Value, e.Delete)
		changed = changed || ok
	}
	if !changed {
		return source, nil
	}
	out := []byte{}
	if len(doc) > 0 {
		var err error
		out, err = yaml.MarshalWithOptions(doc, yaml.WithComment(comments), yaml.IndentSequence(false))
		if err != nil {
			return "", fmt.Errorf("write the front matter of %s: %w", file, err)
		}
	}
	if head == "" {
		head = "---\n"
	}
	var b strings.Builder
	b.WriteString(head)
	b.Write(bytes.TrimRight(out, "\n"))
	b.WriteString("\n---\n")
	b.WriteString(body)
	return b.String(), nil
}

// editMapSlice sets or removes the value at path in m, making the maps on the way; it reports
// whether m changed.
func editMapSlice(m yaml.MapSlice, path []string, value any, del bool) (yaml.MapSlice, bool) {
	i := -1
	for j, it := range m {
		if fmt.Sprint(it.Key) == path[0] {
			i = j
			break
		}
	}
	if len(path) > 1 {
		var sub yaml.MapSlice
		if i >= 0 {
			s, ok := m[i].Value.(yaml.MapSlice)
			if !ok && m[i].Value != nil {
				if del {
					return m, false
				}
				s = nil // a scalar where a map should be: replaced
			}
			sub = s
		} else if del {
			return m, false
		}
		sub, changed := editMapSlice(sub, path[1:], value, del)
		if !changed {
			return m, false
		}
		switch {
		case i >= 0 && len(sub) == 0:
			return append(m[:i:i], m[i+1:]...), true
		case i >= 0:
			m[i].Value = sub
		case len(sub) > 0:
			m = append(m, yaml.MapItem{Key: path[0], Value: sub})
		}
		return m, true
	}
	switch {
	case del && i < 0:
		return m, false
	case del:
		return append(m[:i:i], m[i+1:]...), true
	case i >= 0 && sameJSON(m[i].Value, value):
		return m, false
	case i >= 0:
		m[i].Value = value
		return m, true
	}
	return append(m, yaml.MapItem{Key: path[0], Value: value}), true
}

// sameJSON reports whether a and b are the same once written as JSON (a YAML 0.5 and a float
// 0.5, a []any and a []string of the same names).
func sameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
