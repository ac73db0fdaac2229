package graph

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// StaticCatalog is an in-memory Catalog: a snapshot of the action contracts
// and agent revisions a caller loaded (see References) before validating.
// It is safe for concurrent reads once built.
type StaticCatalog struct {
	actions map[ActionRef]ActionContract
	agents  map[AgentRef]AgentContract
	skills  map[SkillRef]SkillContract
}

// NewStaticCatalog builds a catalog from contracts. A later contract with the
// same id@version (or key@revision) replaces an earlier one.
func NewStaticCatalog(actions []ActionContract, agents []AgentContract) *StaticCatalog {
	c := &StaticCatalog{
		actions: make(map[ActionRef]ActionContract, len(actions)),
		agents:  make(map[AgentRef]AgentContract, len(agents)),
	}
	for _, a := range actions {
		c.actions[ActionRef{ID: a.ID, Version: a.Version}] = a
	}
	for _, a := range agents {
		c.agents[AgentRef{Key: a.Key, Revision: a.Revision}] = a
	}
	return c
}

// WithSkills adds skill revisions to the catalog (a later one with the
// same key@revision replaces an earlier one) and returns it. Call it while
// building the catalog, before it is shared.
func (c *StaticCatalog) WithSkills(skills []SkillContract) *StaticCatalog {
	if c.skills == nil {
		c.skills = make(map[SkillRef]SkillContract, len(skills))
	}
	for _, s := range skills {
		c.skills[SkillRef{Key: s.Key, Revision: s.Revision}] = s
	}
	return c
}

// Skill implements Catalog.
func (c *StaticCatalog) Skill(key string, revision int) (SkillContract, bool) {
	if c == nil {
		return SkillContract{}, false
	}
	s, ok := c.skills[SkillRef{Key: key, Revision: revision}]
	return s, ok
}

// Action implements Catalog.
func (c *StaticCatalog) Action(id string, version int) (ActionContract, bool) {
	if c == nil {
		return ActionContract{}, false
	}
	a, ok := c.actions[ActionRef{ID: id, Version: version}]
	return a, ok
}

// Agent implements Catalog.
func (c *StaticCatalog) Agent(key string, revision int) (AgentContract, bool) {
	if c == nil {
		return AgentContract{}, false
	}
	a, ok := c.agents[AgentRef{Key: key, Revision: revision}]
	return a, ok
}

// emptyCatalog resolves nothing; Validate uses it for a nil Catalog so every
// dependency is reported missing instead of panicking.
type emptyCatalog struct{}

func (emptyCatalog) Action(string, int) (ActionContract, bool) { return ActionContract{}, false }
func (emptyCatalog) Agent(string, int) (AgentContract, bool)   { return AgentContract{}, false }
func (emptyCatalog) Skill(string, int) (SkillContract, bool)   { return SkillContract{}, false }

// String renders an action reference as "id@version", the form toolsets and
// agents' allowed tools use.
func (r ActionRef) String() string { return r.ID + "@" + strconv.Itoa(r.Version) }

// String renders a skill reference as "key@revision".
func (r SkillRef) String() string { return r.Key + "@" + strconv.Itoa(r.Revision) }

// SkillRefs lists the distinct skill revisions the agent contracts list,
// sorted, so a caller can load exactly those into a StaticCatalog.
func SkillRefs(agents []AgentContract) []SkillRef {
	out := []SkillRef{}
	for _, a := range agents {
		for _, s := range a.Skills {
			out = append(out, SkillRef{Key: s.Key, Revision: s.Revision})
		}
	}
	slices.SortFunc(out, func(a, b SkillRef) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Revision, b.Revision))
	})
	return slices.Compact(out)
}

// String renders an agent reference as "key@revision".
func (r AgentRef) String() string { return r.Key + "@" + strconv.Itoa(r.Revision) }

// ParseActionRef parses "id@version" (version a positive integer), the form
// used in toolsets and agents' allowed tools.
func ParseActionRef(s string) (ActionRef, error) {
	id, v, ok := strings.Cut(s, "@")
	if !ok || id == "" {
		return ActionRef{}, fmt.Errorf("%q is not actionId@version", s)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || strconv.Itoa(n) != v {
		return ActionRef{}, fmt.Errorf("%q is not actionId@version with a positive version", s)
	}
	return ActionRef{ID: id, Version: n}, nil
}

// References lists the distinct action versions and agent revisions a
// document names (action nodes, agent and agent-decision nodes, and tools in
// its toolsets), sorted, so a caller can load exactly those contracts into a
// StaticCatalog before validating. Malformed references are skipped; they
// are reported by Validate.
func References(doc *Document) (actions []ActionRef, agents []AgentRef) {
	actions, agents = []ActionRef{}, []AgentRef{}
	if doc == nil {
		return actions, agents
	}
	for _, n := range doc.Nodes {
		if n.Action != nil && n.Kind == KindAction {
			actions = append(actions, *n.Action)
		}
		if n.Agent != nil && (n.Kind == KindAgent || n.Kind == KindAgentDecision) {
			agents = append(agents, *n.Agent)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(doc.Toolsets)) {
		for _, t := range doc.Toolsets[name].Tools {
			if r, err := ParseActionRef(t); err == nil {
				actions = append(actions, r)
			}
		}
	}
	slices.SortFunc(actions, compareActionRef)
	slices.SortFunc(agents, compareAgentRef)
	return slices.Compact(actions), slices.Compact(agents)
}

func compareActionRef(a, b ActionRef) int {
	return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Version, b.Version))
}

func compareAgentRef(a, b AgentRef) int {
	return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Revision, b.Revision))
}
