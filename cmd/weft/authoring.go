package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/client"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/variables"
	"github.com/weftworks/weft/variables/graphcheck"
)

func newValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE",
		Short: "Validate a workflow file (YAML or JSON) locally, without a server",
		Long: `Decodes FILE (.yaml, .yml or .json) with the same strict decoder as the API,
captures the toolset folders its tools: values name (relative to FILE), and
validates the graph with the same validator publication uses, against the
built-in action catalog and the built-in variables. It prints one line per
issue:

  FILE:LINE:COLUMN CODE PATH MESSAGE

and exits 1 when there is any. A valid file prints each toolset with its
tools and its one-line summary; a toolset without a summary (a document
written before summaries existed) is a warning line
("warning: ... MISSING_TOOLSET_SUMMARY ..."), which does not fail the
command. Agent revisions live on the server, so agent
references are not checked here (they are at dry-run and publication); nor
are actions a worker registers beyond the built-ins. A valid file without
agent references also prints its checksum: the one publishing it gives
(its actions being the built-ins).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			s, issues, err := loadSource(args[0])
			if err != nil {
				fmt.Fprintln(out, err)
				return &silentError{msg: args[0] + " is not a well-formed workflow document"}
			}
			if len(issues) == 0 {
				issues, err = validateLocally(s.doc)
				if err != nil {
					return err
				}
			}
			agents := 0
			issues = slices.DeleteFunc(issues, func(is graph.Issue) bool {
				unresolvedAgent := is.Code == graph.CodeMissingDependency && strings.HasSuffix(is.Path, "/agent")
				if unresolvedAgent {
					agents++
				}
				return unresolvedAgent
			})
			if len(issues) > 0 {
				s.printIssues(out, issues)
				return &silentError{msg: fmt.Sprintf("%s: %d issue(s)", args[0], len(issues))}
			}
			fmt.Fprintf(out, "%s: valid (%d nodes, %d edges", s.path, len(s.doc.Nodes), len(s.doc.Edges))
			if len(s.captured) > 0 {
				names := make([]string, 0, len(s.captured))
				for _, c := range s.captured {
					names = append(names, fmt.Sprintf("%s from %s", c.Name, c.Path))
				}
				fmt.Fprintf(out, "; toolsets %s", strings.Join(names, ", "))
			}
			fmt.Fprintln(out, ")")
			s.printToolsets(out)
			if agents > 0 {
				fmt.Fprintf(out, "note: %d agent reference(s) are resolved by the server at dry-run and publication\n", agents)
			} else if sum, err := checksumLocally(s.doc); err == nil {
				// Without agents, the built-in actions are all a revision
				// pins: publication of this file on a server whose workers
				// register them unchanged gives this checksum.
				fmt.Fprintf(out, "checksum %s (what publishing this file gives, with the built-in actions)\n", sum)
			}
			return nil
		},
	}
}

// printToolsets lists the document's toolsets with their tools and
// summaries, then a warning line per toolset without a summary.
func (s *source) printToolsets(w io.Writer) {
	for _, name := range slices.Sorted(maps.Keys(s.doc.Toolsets)) {
		ts := s.doc.Toolsets[name]
		summary := ts.Summary
		if summary == "" {
			summary = "(no summary)"
		}
		fmt.Fprintf(w, "  toolset %s: %s [%s]\n", name, summary, strings.Join(ts.Tools, ", "))
	}
	for _, is := range graph.ToolsetWarnings(s.doc) {
		var line, col int
		if p, ok := s.positions.Lookup(strings.TrimSuffix(is.Path, "/summary")); ok {
			line, col = p.Line, p.Column
		}
		fmt.Fprintln(w, "warning: "+s.issueLine(is, line, col))
	}
}

// validateLocally runs graph validation against what is known without a
// server: the built-in actions and variables.
func validateLocally(doc *graph.Document) ([]graph.Issue, error) {
	reg, err := variables.Builtin(variables.NoAgents{})
	if err != nil {
		return nil, err
	}
	cat := graph.NewStaticCatalog(catalog.BuiltinContracts(), nil)
	return graph.ValidateWith(doc, cat, graph.Options{Templates: graphcheck.New(reg)}), nil
}

// checksumLocally compiles doc against the built-in actions and returns
// the revision checksum; an error when it does not compile.
func checksumLocally(doc *graph.Document) (string, error) {
	reg, err := variables.Builtin(variables.NoAgents{})
	if err != nil {
		return "", err
	}
	cat := graph.NewStaticCatalog(catalog.BuiltinContracts(), nil)
	c, issues := graph.CompileWith(doc, cat, graph.Options{Templates: graphcheck.New(reg)})
	if len(issues) > 0 || c == nil {
		return "", fmt.Errorf("%d issue(s)", len(issues))
	}
	return c.Checksum, nil
}

func newPushCmd() *cobra.Command {
	var key string
	var expected int
	var force bool
	cmd := &cobra.Command{
		Use:   "push FILE --key KEY [--expected-revision N | --force]",
		Short: "Save a workflow file as the next draft of KEY (creating KEY if absent)",
		Long: `Reads FILE (.yaml, .yml or .json), captures the toolset folders its tools:
values name (paths relative to FILE; each folder's toolset.yaml and SKILL.md
are copied into the document's toolsets map, so the server never reads a
path), and saves it as a draft of workflow KEY: the workflow is created with
draft revision 1 when it does not exist, otherwise the next draft revision is
saved. A missing or invalid folder, or a toolset the server refuses (an
unknown action), fails the push; nothing is saved then. A draft may still
hold other graph issues: see weft validate and publish.

A push never replaces, unawares, a draft someone saved since. The draft FILE
was last pulled as or pushed to (per API) is recorded in .weft-drafts.json
next to it (weft pull -o and weft push write it; commit it with the
workflow files); the push sends it as expectedRevision, and the API refuses
the save (REVISION_CONFLICT, nothing saved) when KEY's latest draft is
another one. --expected-revision N names the draft to replace instead;
--force replaces whatever draft is the latest, on purpose. Without a record
(a file never pulled or pushed here) the push saves on top of the latest
draft.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			file := args[0]
			if expected < 0 {
				return fmt.Errorf("push %s: --expected-revision takes a positive draft revision", key)
			}
			if force && expected > 0 {
				return fmt.Errorf("push %s: --force replaces whatever draft is the latest; --expected-revision only draft %d: give one of them", key, expected)
			}
			statePath := draftStatePath(file)
			state, err := loadDraftState(statePath)
			if err != nil && !force {
				return fmt.Errorf("push %s: %w", key, err)
			}
			s, issues, err := loadSource(file)
			if err != nil {
				fmt.Fprintln(out, err)
				return &silentError{msg: "push refused: " + file + " is not a well-formed workflow document"}
			}
			if len(issues) > 0 {
				s.printIssues(out, issues)
				return &silentError{msg: fmt.Sprintf("push refused: %d toolset problem(s) in %s", len(issues), file)}
			}
			doc, err := json.Marshal(s.doc)
			if err != nil {
				return err
			}
			c, err := apiClient()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			// base is the draft this push replaces, and why.
			base, basis := expected, fmt.Sprintf("draft %d (--expected-revision)", expected)
			if base == 0 && !force && state != nil {
				if rev, ok := state.get(apiBaseURL(), key); ok {
					base, basis = rev, fmt.Sprintf("draft %d, which %s was last pulled as or pushed to (%s)", rev, file, statePath)
				}
			}
			var d client.Draft
			w, err := c.GetWorkflow(ctx, key)
			switch {
			case client.IsNotFound(err) && expected > 0:
				return fmt.Errorf("push %s --expected-revision %d: workflow %s does not exist; push without --expected-revision to create it", key, expected, key)
			case client.IsNotFound(err):
				// Nothing to replace (a record from a server since reset
				// included): create it.
				d, err = c.CreateWorkflow(ctx, key, doc)
			case err == nil && base == 0:
				d, err = c.SaveDraft(ctx, key, w.DraftRevision, doc)
			case err == nil:
				d, err = c.SaveDraft(ctx, key, base, doc)
			}
			if client.Code(err) == "REVISION_CONFLICT" && base > 0 {
				latest := w.DraftRevision
				var ce *client.Error
				if errors.As(err, &ce) {
					if v, ok := ce.Details["currentRevision"].(float64); ok {
						latest = int(v)
					}
				}
				return fmt.Errorf("push %s refused, nothing saved: %s's latest draft is %d, not %s.\n"+
					"Someone saved a draft since. Pull it (weft pull %s -o %s), merge your change, and push again; "+
					"or replace draft %d on purpose with weft push %s --key %s --force", key, key, latest, basis,
					key, file, latest, file, key)
			}
			if err != nil {
				printServerIssues(out, s, err)
				return fmt.Errorf("push %s: %w", key, err)
			}
			fmt.Fprintf(out, "pushed %s: draft revision %d\n", d.Key, d.DraftRevision)
			for _, cp := range s.captured {
				ts := s.doc.Toolsets[cp.Name]
				fmt.Fprintf(out, "  toolset %s from %s: %d tool(s), skill %d bytes: %s\n", cp.Name, cp.Dir, len(ts.Tools), len(ts.Skill), ts.Summary)
			}
			if err := recordDraft(file, key, d.DraftRevision); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v\n", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "workflow key (required)")
	cmd.Flags().IntVar(&expected, "expected-revision", 0, "the draft revision this push replaces (default: the one recorded in .weft-drafts.json)")
	cmd.Flags().BoolVar(&force, "force", false, "replace the latest draft whatever it is, ignoring the recorded draft")
	_ = cmd.MarkFlagRequired("key")
	return cmd
}

func newPublishCmd() *cobra.Command {
	var draft int
	cmd := &cobra.Command{
		Use:   "publish KEY [--draft N]",
		Short: "Publish a draft of KEY (the latest by default) as an immutable revision",
		Long: `Validates and compiles the draft on the server and stores an immutable,
content-addressed revision pinning its actions, agents and toolsets. A draft
with graph issues is refused: every issue is printed as CODE PATH MESSAGE and
the command exits 1. Publishing content identical to the latest revision
creates nothing and reports that revision.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			key := args[0]
			c, err := apiClient()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			w, err := c.GetWorkflow(ctx, key)
			if err != nil {
				return fmt.Errorf("publish %s: %w", key, err)
			}
			switch {
			case draft == 0:
				draft = w.DraftRevision
			case draft > w.DraftRevision:
				return fmt.Errorf("publish %s --draft %d: %s has no draft %d; its latest draft is %d", key, draft, key, draft, w.DraftRevision)
			case draft < w.DraftRevision:
				// The API publishes the latest draft, checked against the
				// revision the caller expects, so a draft saved since is
				// never published by accident.
				return fmt.Errorf("publish %s --draft %d: only the latest draft (%d) can be published; "+
					"run `weft publish %s` to publish draft %d, or save draft %d's document again (weft push) to make it the latest",
					key, draft, w.DraftRevision, key, w.DraftRevision, draft)
			}
			p, err := c.Publish(ctx, key, draft)
			if err != nil {
				printServerIssues(out, nil, err)
				return fmt.Errorf("publish %s draft %d: %w", key, draft, err)
			}
			if p.Created {
				fmt.Fprintf(out, "published %s revision %d from draft %d (checksum %s)\n", p.Key, p.Revision, draft, p.Checksum)
			} else {
				fmt.Fprintf(out, "%s revision %d already holds this content (checksum %s); nothing new published\n", p.Key, p.Revision, p.Checksum)
			}
			for _, w := range p.Warnings {
				fmt.Fprintf(out, "warning: %s %s %s\n", w.Code, w.Path, w.Message)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&draft, "draft", 0, "draft revision to publish (default: the latest)")
	return cmd
}
