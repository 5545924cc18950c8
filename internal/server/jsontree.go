package server

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/loupe-dev/loupe/web/templates"
)

// maxTreeNodes bounds a JSON tree the span panel renders: past it, the payload is shown as text.
const maxTreeNodes = 2000

// jsonTree turns a JSON text into the span panel's collapsible tree, each node with its path
// ($.messages[0].content) and its value as compact JSON for the copy buttons; nil when the text
// is not JSON, is a bare scalar, or has more than maxTreeNodes nodes.
func jsonTree(text string) *templates.JSONNode {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return nil
	}
	switch v.(type) {
	case map[string]any, []any:
	default:
		return nil
	}
	n := 0
	root := buildNode("", "$", v, 0, &n)
	if n > maxTreeNodes {
		return nil
	}
	return root
}

func buildNode(key, path string, v any, depth int, count *int) *templates.JSONNode {
	*count++
	node := &templates.JSONNode{Key: key, Path: path, Depth: depth}
	if *count > maxTreeNodes {
		return node
	}
	raw, _ := json.Marshal(v)
	node.Copy = string(raw)
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		node.Kind, node.Summary = "object", "{…} "+strconv.Itoa(len(keys))+" keys"
		for _, k := range keys {
			node.Children = append(node.Children, buildNode(k, childPath(path, k), t[k], depth+1, count))
		}
	case []any:
		node.Kind, node.Summary = "array", "[…] "+strconv.Itoa(len(t))+" items"
		for i, e := range t {
			node.Children = append(node.Children, buildNode(strconv.Itoa(i), path+"["+strconv.Itoa(i)+"]", e, depth+1, count))
		}
	case string:
		node.Kind, node.Value = "string", t
		// A string that holds JSON (Genkit's JSON-encoded strings) reads as the tree it is.
		if sub := jsonTree(t); sub != nil {
			sub.Key, sub.Path, sub.Depth = key, path, depth
			sub.Summary += " (in a string)"
			return sub
		}
	default:
		var b bytes.Buffer
		_ = json.Compact(&b, raw)
		node.Kind, node.Value = "scalar", b.String()
	}
	return node
}

// childPath is the path of an object's member: .key when key is an identifier, ["key"] otherwise.
func childPath(path, key string) string {
	ident := key != ""
	for i, r := range key {
		identRune := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9'
		if !identRune {
			ident = false
			break
		}
	}
	if ident {
		return path + "." + key
	}
	q, _ := json.Marshal(key)
	return path + "[" + string(q) + "]"
}

// attributeRows are a span's attributes as the panel's key/value table: Genkit's keys first, then
// the GenAI conventions', then the others, each group by name.
func attributeRows(attrs map[string]json.RawMessage) []templates.AttrRow {
	rows := make([]templates.AttrRow, 0, len(attrs))
	for k, raw := range attrs {
		var s string
		value := string(raw)
		if json.Unmarshal(raw, &s) == nil {
			value = s
		}
		rows = append(rows, templates.AttrRow{Key: k, Value: value, Group: attrGroup(k)})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Group != rows[j].Group {
			return rows[i].Group < rows[j].Group
		}
		return rows[i].Key < rows[j].Key
	})
	return rows
}

func attrGroup(k string) int {
	switch {
	case strings.HasPrefix(k, "genkit:"):
		return 0
	case strings.HasPrefix(k, "gen_ai."):
		return 1
	case strings.HasPrefix(k, "loupe."):
		return 2
	}
	return 3
}
