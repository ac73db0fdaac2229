package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weftworks/weft/client"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/graphyaml"
	"github.com/weftworks/weft/toolsets"
)

// The client verbs (validate, push, publish, run, runs, events, cancel,
// revocations, approve, reject, approvals, replay) talk to a running weft API through package client. They are
// configured by the environment: WEFT_URL (default http://localhost:8080,
// what `weft dev` serves) and WEFT_TOKEN (a bearer token, e.g. the one
// `weft dev` prints or `weft token` mints). `weft validate` works offline.

// defaultAPIURL is where `weft dev` serves the API by default.
const defaultAPIURL = "http://localhost:8080"

// clientCommands returns the client verbs, registered on the root command.
func clientCommands() []*cobra.Command {
	return []*cobra.Command{
		newValidateCmd(),
		newPushCmd(),
		newPullCmd(),
		newPublishCmd(),
		newRunCmd(),
		newRunsCmd(),
		newEventsCmd(),
		newCancelCmd(),
		newVerifyCmd(),
		newRevocationsCmd(),
		newLimitsCmd(),
		newDecideCmd("approve", execution.DecisionApprove),
		newDecideCmd("reject", execution.DecisionReject),
		newApprovalsCmd(),
		newReplayCmd(),
	}
}

// apiBaseURL is the API the client verbs talk to: WEFT_URL, or where
// `weft dev` serves by default, without a trailing slash.
func apiBaseURL() string {
	base := strings.TrimRight(strings.TrimSpace(os.Getenv("WEFT_URL")), "/")
	if base == "" {
		base = defaultAPIURL
	}
	return base
}

// apiClient builds the client from WEFT_URL and WEFT_TOKEN.
func apiClient() (*client.Client, error) {
	base := apiBaseURL()
	token := strings.TrimSpace(os.Getenv("WEFT_TOKEN"))
	if token == "" {
		return nil, errors.New("WEFT_TOKEN is not set: export the token `weft dev` prints, or mint one with `weft token`")
	}
	return client.New(base, token)
}

// silentError ends a command with exit status 1 after it has already
// printed why (issues, a failed run); main prints the message on stderr.
type silentError struct{ msg string }

func (e *silentError) Error() string { return e.msg }

// maxSourceBytes bounds a workflow file read by the CLI: the graph limit
// plus room for comments and indentation.
const maxSourceBytes = 4 << 20

// source is a workflow file as the CLI read it: decoded, positions known,
// toolset folders captured.
type source struct {
	path      string
	format    string // "yaml" or "json"
	doc       *graph.Document
	positions graphyaml.Positions
	captured  []toolsets.Captured
}

// loadSource reads and decodes a workflow file by its extension (.yaml,
// .yml or .json), then captures the toolset folders its tools: values name,
// relative to the file's own directory. A decode error is returned as err
// (with its line and column); capture problems as issues.
func loadSource(path string) (*source, []graph.Issue, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, err
	}
	data, err := readFileBounded(abs, maxSourceBytes)
	if err != nil {
		return nil, nil, err
	}
	s := &source{path: path}
	var raw json.RawMessage
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		s.format = "yaml"
		y, err := graphyaml.ParseYAML(data)
		if err != nil {
			return nil, nil, s.decodeError(err)
		}
		s.doc, raw, s.positions = y.Document, y.JSON, y.Positions
	case ".json":
		s.format = "json"
		doc, err := graph.Decode(data)
		if err != nil {
			s.positions = graphyaml.PositionsOf(data)
			return nil, nil, s.decodeError(err)
		}
		s.doc, raw, s.positions = doc, json.RawMessage(data), graphyaml.PositionsOf(data)
	default:
		return nil, nil, fmt.Errorf("%s: unknown file type %q; workflow files end in .yaml, .yml or .json", path, filepath.Ext(path))
	}
	if s.positions == nil {
		s.positions = graphyaml.Positions{}
	}
	captured, issues := toolsets.Capture(s.doc, raw, filepath.Dir(abs))
	s.captured = captured
	for _, c := range captured {
		// Issues about a captured toolset point where it was selected.
		if p, ok := s.positions.Lookup(c.Pointer); ok {
			s.positions[graph.Pointer("toolsets", c.Name)] = p
		}
	}
	return s, issues, nil
}

func readFileBounded(path string, limit int64) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}

// decodeError renders a decode error as one issue line.
func (s *source) decodeError(err error) error {
	var de *graph.DecodeError
	if !errors.As(err, &de) {
		return fmt.Errorf("%s: %w", s.path, err)
	}
	line, col := de.Line, de.Column
	if line == 0 && s.positions != nil {
		if p, ok := s.positions.Lookup(de.Path); ok {
			line, col = p.Line, p.Column
		}
	}
	return fmt.Errorf("%s", s.issueLine(graph.Issue{Code: de.Code, Path: de.Path, Message: de.Message}, line, col))
}

// issueLine renders one issue as "file:line:col CODE path message".
func (s *source) issueLine(is graph.Issue, line, col int) string {
	where := s.path
	if line > 0 {
		where = fmt.Sprintf("%s:%d:%d", s.path, line, col)
	}
	path := is.Path
	if path == "" {
		path = "(document)"
	}
	return fmt.Sprintf("%s %s %s %s", where, is.Code, path, is.Message)
}

// printIssues writes every issue, located in the file when possible.
func (s *source) printIssues(w io.Writer, issues []graph.Issue) {
	for _, is := range issues {
		var line, col int
		if p, ok := s.positions.Lookup(is.Path); ok {
			line, col = p.Line, p.Column
		}
		fmt.Fprintln(w, s.issueLine(is, line, col))
	}
}

// printServerIssues writes issues the API answered with (paths into the
// graph document), falling back to the error itself.
func printServerIssues(w io.Writer, s *source, err error) {
	var ce *client.Error
	if !errors.As(err, &ce) {
		return
	}
	issues := ce.Issues()
	if s != nil {
		s.printIssues(w, issues)
		return
	}
	for _, is := range issues {
		path := is.Path
		if path == "" {
			path = "(document)"
		}
		fmt.Fprintf(w, "%s %s %s\n", is.Code, path, is.Message)
	}
}
