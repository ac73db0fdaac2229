package graph

import (
	"encoding/json"
	"slices"
	"strconv"
)

// This file encodes the package's own types in RFC 8785 form without
// reflection. It is what revision checksums and contract hashes run on, so
// it is the hot part of Compile. Each function writes exactly what the
// reflective encoder in canonical.go writes for the same value (members
// sorted by name, omitempty as encoding/json applies it, nil slices and maps
// as null); TestCanonicalTypesMatchReflective and FuzzCanonical check that
// byte for byte against both the reflective encoder and the reference
// definition, jcs.Transform(json.Marshal(v)).

// canonicalTyped appends the canonical form of v when v is one of the types
// encoded here, and reports whether it was.
func (e *canonEncoder) canonicalTyped(v any) (bool, error) {
	switch t := v.(type) {
	case Document:
		return true, e.document(&t)
	case *Document:
		if t == nil {
			e.buf = append(e.buf, "null"...)
			return true, nil
		}
		return true, e.document(t)
	case ActionContract:
		return true, e.actionContract(&t, false, "")
	case PinnedAction:
		return true, e.actionContract(&t.ActionContract, true, t.Hash)
	case AgentContract:
		return true, e.agentContract(&t)
	case checksumContent:
		return true, e.checksumContent(&t)
	}
	return false, nil
}

// checksumContent is what a revision checksum covers.
type checksumContent struct {
	Document Document        `json:"document"`
	Actions  []PinnedAction  `json:"actions"`
	Agents   []AgentContract `json:"agents"`
}

func (e *canonEncoder) checksumContent(c *checksumContent) error {
	e.buf = append(e.buf, `{"actions":`...)
	if c.Actions == nil {
		e.buf = append(e.buf, "null"...)
	} else {
		e.buf = append(e.buf, '[')
		for i := range c.Actions {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if err := e.actionContract(&c.Actions[i].ActionContract, true, c.Actions[i].Hash); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, ']')
	}
	e.buf = append(e.buf, `,"agents":`...)
	if c.Agents == nil {
		e.buf = append(e.buf, "null"...)
	} else {
		e.buf = append(e.buf, '[')
		for i := range c.Agents {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if err := e.agentContract(&c.Agents[i]); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, ']')
	}
	e.buf = append(e.buf, `,"document":`...)
	if err := e.document(&c.Document); err != nil {
		return err
	}
	e.buf = append(e.buf, '}')
	return nil
}

// member starts an object member: a comma unless it is the first, then the
// quoted name (a plain ASCII literal) and a colon.
func (e *canonEncoder) member(first *bool, quotedName string) {
	if !*first {
		e.buf = append(e.buf, ',')
	}
	*first = false
	e.buf = append(e.buf, quotedName...)
	e.buf = append(e.buf, ':')
}

// int appends an int the way the reflective encoder does: exactly when it
// fits a float64 exactly, else in its float64 form.
func (e *canonEncoder) int(n int) error {
	if n >= -1<<53 && n <= 1<<53 {
		e.buf = strconv.AppendInt(e.buf, int64(n), 10)
		return nil
	}
	return e.float(float64(n))
}

// rawValue appends a json.RawMessage: nil is null.
func (e *canonEncoder) rawValue(raw json.RawMessage) error {
	if raw == nil {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	return e.raw(raw)
}

func (e *canonEncoder) stringSlice(s []string) {
	if s == nil {
		e.buf = append(e.buf, "null"...)
		return
	}
	e.buf = append(e.buf, '[')
	for i, v := range s {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.str(v)
	}
	e.buf = append(e.buf, ']')
}

// pushSortedKeys returns m's keys in RFC 8785 order (UTF-16 code units),
// kept on e's key stack; pass mark to popKeys when done with them. A nested
// push may move the stack, but the returned slice stays valid.
func pushSortedKeys[V any](e *canonEncoder, m map[string]V) (keys []string, mark int) {
	mark = len(e.keys)
	for k := range m {
		e.keys = append(e.keys, k)
	}
	keys = e.keys[mark:]
	slices.SortFunc(keys, compareUTF16)
	return keys, mark
}

// popKeys drops the keys pushed since mark.
func (e *canonEncoder) popKeys(mark int) {
	clear(e.keys[mark:])
	e.keys = e.keys[:mark]
}

// stringMap appends a map[string]string; nil is null.
func (e *canonEncoder) stringMap(m map[string]string) {
	if m == nil {
		e.buf = append(e.buf, "null"...)
		return
	}
	e.buf = append(e.buf, '{')
	keys, mark := pushSortedKeys(e, m)
	for i, k := range keys {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.str(k)
		e.buf = append(e.buf, ':')
		e.str(m[k])
	}
	e.popKeys(mark)
	e.buf = append(e.buf, '}')
}

func (e *canonEncoder) document(d *Document) error {
	e.buf = append(e.buf, `{"edges":`...)
	if d.Edges == nil {
		e.buf = append(e.buf, "null"...)
	} else {
		e.buf = append(e.buf, '[')
		for i, ed := range d.Edges {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = append(e.buf, `{"from":`...)
			e.str(ed.From)
			e.buf = append(e.buf, `,"to":`...)
			e.str(ed.To)
			e.buf = append(e.buf, '}')
			e.flush()
		}
		e.buf = append(e.buf, ']')
	}
	e.buf = append(e.buf, `,"nodes":`...)
	if d.Nodes == nil {
		e.buf = append(e.buf, "null"...)
	} else {
		e.buf = append(e.buf, '[')
		for i := range d.Nodes {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if err := e.node(&d.Nodes[i]); err != nil {
				return err
			}
			e.flush()
		}
		e.buf = append(e.buf, ']')
	}
	e.buf = append(e.buf, `,"schemaVersion":`...)
	if err := e.int(d.SchemaVersion); err != nil {
		return err
	}
	if len(d.Schemas) > 0 {
		e.buf = append(e.buf, `,"schemas":{`...)
		keys, mark := pushSortedKeys(e, d.Schemas)
		for i, k := range keys {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.str(k)
			e.buf = append(e.buf, ':')
			if err := e.rawValue(d.Schemas[k]); err != nil {
				return err
			}
		}
		e.popKeys(mark)
		e.buf = append(e.buf, '}')
	}
	if d.Tools != "" {
		e.buf = append(e.buf, `,"tools":`...)
		e.str(d.Tools)
	}
	if len(d.Toolsets) > 0 {
		e.buf = append(e.buf, `,"toolsets":{`...)
		keys, mark := pushSortedKeys(e, d.Toolsets)
		for i, k := range keys {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.str(k)
			ts := d.Toolsets[k]
			e.buf = append(e.buf, `:{"skill":`...)
			e.str(ts.Skill)
			if ts.Summary != "" {
				e.buf = append(e.buf, `,"summary":`...)
				e.str(ts.Summary)
			}
			e.buf = append(e.buf, `,"tools":`...)
			e.stringSlice(ts.Tools)
			e.buf = append(e.buf, '}')
		}
		e.popKeys(mark)
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, '}')
	return nil
}

func (e *canonEncoder) node(n *Node) error {
	e.buf = append(e.buf, '{')
	first := true
	if n.Action != nil {
		e.member(&first, `"action"`)
		e.buf = append(e.buf, `{"id":`...)
		e.str(n.Action.ID)
		e.buf = append(e.buf, `,"version":`...)
		if err := e.int(n.Action.Version); err != nil {
			return err
		}
		e.buf = append(e.buf, '}')
	}
	if n.Agent != nil {
		e.member(&first, `"agent"`)
		e.buf = append(e.buf, `{"key":`...)
		e.str(n.Agent.Key)
		e.buf = append(e.buf, `,"revision":`...)
		if err := e.int(n.Agent.Revision); err != nil {
			return err
		}
		e.buf = append(e.buf, '}')
	}
	if n.Expression != "" {
		e.member(&first, `"expression"`)
		e.str(n.Expression)
	}
	e.member(&first, `"id"`)
	e.str(n.ID)
	if len(n.Inputs) > 0 {
		e.member(&first, `"inputs"`)
		e.stringMap(n.Inputs)
	}
	e.member(&first, `"kind"`)
	e.str(string(n.Kind))
	if n.Language != "" {
		e.member(&first, `"language"`)
		e.str(n.Language)
	}
	if len(n.Mapping) > 0 {
		e.member(&first, `"mapping"`)
		e.buf = append(e.buf, '{')
		keys, mark := pushSortedKeys(e, n.Mapping)
		for i, k := range keys {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.str(k)
			e.buf = append(e.buf, ':')
			m := n.Mapping[k]
			if err := e.mapping(&m); err != nil {
				return err
			}
		}
		e.popKeys(mark)
		e.buf = append(e.buf, '}')
	}
	if len(n.Outputs) > 0 {
		e.member(&first, `"outputs"`)
		e.stringMap(n.Outputs)
	}
	if n.Retry != nil {
		e.member(&first, `"retry"`)
		if err := e.retry(n.Retry); err != nil {
			return err
		}
	}
	if len(n.Schema) > 0 {
		e.member(&first, `"schema"`)
		if err := e.raw(n.Schema); err != nil {
			return err
		}
	}
	if n.TimeoutMs != 0 {
		e.member(&first, `"timeoutMs"`)
		if err := e.int(n.TimeoutMs); err != nil {
			return err
		}
	}
	if n.Tools != "" {
		e.member(&first, `"tools"`)
		e.str(n.Tools)
	}
	e.buf = append(e.buf, '}')
	return nil
}

func (e *canonEncoder) mapping(m *Mapping) error {
	e.buf = append(e.buf, '{')
	first := true
	if len(m.Bindings) > 0 {
		e.member(&first, `"bindings"`)
		e.stringMap(m.Bindings)
	}
	if len(m.Literal) > 0 {
		e.member(&first, `"literal"`)
		if err := e.raw(m.Literal); err != nil {
			return err
		}
	}
	if m.Pointer != nil {
		e.member(&first, `"pointer"`)
		e.str(*m.Pointer)
	}
	if m.Template != nil {
		e.member(&first, `"template"`)
		e.str(*m.Template)
	}
	e.buf = append(e.buf, '}')
	return nil
}

func (e *canonEncoder) retry(r *Retry) error {
	e.buf = append(e.buf, '{')
	first := true
	if r.Backoff != 0 { // encoding/json's omitempty: -0 is empty too
		e.member(&first, `"backoff"`)
		if err := e.float(r.Backoff); err != nil {
			return err
		}
	}
	for _, f := range [...]struct {
		name string
		v    int
	}{{`"initialIntervalMs"`, r.InitialIntervalMs}, {`"maxAttempts"`, r.MaxAttempts}, {`"maxIntervalMs"`, r.MaxIntervalMs}} {
		if f.v != 0 {
			e.member(&first, f.name)
			if err := e.int(f.v); err != nil {
				return err
			}
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

// actionContract appends an ActionContract or, when pinned, a PinnedAction:
// the contract's members plus "hash" (never omitted).
func (e *canonEncoder) actionContract(c *ActionContract, pinned bool, hash string) error {
	e.buf = append(e.buf, '{')
	first := true
	if c.Description != "" {
		e.member(&first, `"description"`)
		e.str(c.Description)
	}
	if pinned {
		e.member(&first, `"hash"`)
		e.str(hash)
	}
	e.member(&first, `"id"`)
	e.str(c.ID)
	e.member(&first, `"idempotency"`)
	e.str(c.Idempotency)
	e.member(&first, `"inputSchema"`)
	if err := e.rawValue(c.InputSchema); err != nil {
		return err
	}
	e.member(&first, `"outputSchema"`)
	if err := e.rawValue(c.OutputSchema); err != nil {
		return err
	}
	e.member(&first, `"requiredPermissions"`)
	e.stringSlice(c.RequiredPermissions)
	e.member(&first, `"risk"`)
	e.str(string(c.Risk))
	e.member(&first, `"timeoutMs"`)
	if err := e.int(c.TimeoutMs); err != nil {
		return err
	}
	e.member(&first, `"version"`)
	if err := e.int(c.Version); err != nil {
		return err
	}
	e.buf = append(e.buf, '}')
	return nil
}

func (e *canonEncoder) agentContract(c *AgentContract) error {
	e.buf = append(e.buf, '{')
	first := true
	if len(c.AllowedTools) > 0 {
		e.member(&first, `"allowedTools"`)
		e.stringSlice(c.AllowedTools)
	}
	e.member(&first, `"archived"`)
	e.buf = strconv.AppendBool(e.buf, c.Archived)
	e.member(&first, `"hash"`)
	e.str(c.Hash)
	e.member(&first, `"key"`)
	e.str(c.Key)
	if len(c.OutputSchema) > 0 {
		e.member(&first, `"outputSchema"`)
		if err := e.raw(c.OutputSchema); err != nil {
			return err
		}
	}
	if len(c.RequiredPermissions) > 0 {
		e.member(&first, `"requiredPermissions"`)
		e.stringSlice(c.RequiredPermissions)
	}
	e.member(&first, `"revision"`)
	if err := e.int(c.Revision); err != nil {
		return err
	}
	if len(c.Skills) > 0 {
		e.member(&first, `"skills"`)
		e.buf = append(e.buf, '[')
		for i, sk := range c.Skills {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = append(e.buf, '{')
			if sk.Hash != "" {
				e.buf = append(e.buf, `"hash":`...)
				e.str(sk.Hash)
				e.buf = append(e.buf, ',')
			}
			e.buf = append(e.buf, `"key":`...)
			e.str(sk.Key)
			e.buf = append(e.buf, `,"revision":`...)
			if err := e.int(sk.Revision); err != nil {
				return err
			}
			e.buf = append(e.buf, '}')
		}
		e.buf = append(e.buf, ']')
	}
	e.buf = append(e.buf, '}')
	return nil
}
