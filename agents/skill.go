package agents

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/weftworks/weft/graph"
)

// Limits of a tenant skill revision.
const (
	// MaxSkillNameChars bounds a skill's name.
	MaxSkillNameChars = 200
	// MaxSkillTextBytes bounds a skill's text (UTF-8 bytes).
	MaxSkillTextBytes = 16 << 10
	// MaxAgentSkills bounds the skills one agent revision lists.
	MaxAgentSkills = 16
)

// CodeInvalidSkill refuses a skill revision with issues (422, details.issues).
const CodeInvalidSkill = "INVALID_SKILL"

// Skill is the content of one immutable revision of a tenant skill: a
// name and a guidance text appended to the instructions of every agent
// revision that lists it (SPEC's agent-tool-design seed: skills are tenant
// records appended to agent instructions). The text is literal, never a
// template, like a toolset's skill.
type Skill struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// Normalize trims the name; the text is kept exactly as written.
func (s Skill) Normalize() Skill {
	s.Name = strings.TrimSpace(s.Name)
	return s
}

// Hash is hex sha256 of the canonical JSON (RFC 8785) of the normalized
// skill: the revision's content hash, pinned by publication with every
// agent revision that lists it.
func (s Skill) Hash() (string, error) {
	b, err := graph.Canonical(s.Normalize())
	if err != nil {
		return "", err
	}
	return graph.SHA256Hex(b), nil
}

// ValidateSkill returns every issue of the normalized skill s with JSON
// pointer paths below prefix (e.g. "" for a request body).
func ValidateSkill(s Skill, prefix string) []graph.Issue {
	issues := []graph.Issue{}
	add := func(code, path, format string, args ...any) {
		issues = append(issues, graph.Issue{Code: code, Path: prefix + path, Message: fmt.Sprintf(format, args...)})
	}
	switch {
	case s.Name == "":
		add(IssueInvalidField, "/name", "name is required")
	case utf8.RuneCountInString(s.Name) > MaxSkillNameChars:
		add(IssueLimitExceeded, "/name", "name has more than %d characters", MaxSkillNameChars)
	case strings.IndexFunc(s.Name, unicode.IsControl) >= 0:
		add(IssueInvalidField, "/name", "name must be one line without control characters")
	}
	switch {
	case !utf8.ValidString(s.Text):
		add(IssueInvalidField, "/text", "text is not valid UTF-8")
	case strings.TrimSpace(s.Text) == "":
		add(IssueInvalidField, "/text", "text is required")
	case len(s.Text) > MaxSkillTextBytes:
		add(IssueLimitExceeded, "/text", "text is %d bytes; the limit is %d", len(s.Text), MaxSkillTextBytes)
	case strings.IndexFunc(s.Text, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' && r != '\r' }) >= 0:
		add(IssueInvalidField, "/text", "text must not contain control characters other than tabs and line breaks")
	}
	return issues
}

// SkillRef names one exact revision of a tenant skill in an agent
// definition (graph.SkillRef).
type SkillRef = graph.SkillRef
