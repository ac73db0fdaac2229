package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/weftworks/weft/client"
)

func newPullCmd() *cobra.Command {
	var revision, draft int
	var output string
	cmd := &cobra.Command{
		Use:   "pull KEY [--revision N | --draft N] [-o FILE.yaml]",
		Short: "Write a workflow's graph (the latest draft, a draft or a published revision) as YAML",
		Long: `Exports KEY's graph document as YAML: the latest draft by default, draft N
with --draft N, or published revision N with --revision N (the compiled
document: nodes in compile order). The server writes it (GET
/v1/workflows/{key}/draft or /revisions/{n} with ?format=yaml): block style,
graph members in a fixed order, maps sorted, multi-line text as literal
blocks, toolsets inline. It reads back to the same document, so pushing it
unchanged, or running weft validate on it, gives the same checksum.

Without -o the YAML goes to standard output; with -o it is written to FILE
(created or replaced), a line on standard output says what was pulled, and
the draft it came from (for a revision, the draft it was published from) is
recorded in .weft-drafts.json next to FILE: weft push FILE then refuses to
replace a draft saved since (see weft push).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := args[0]
			if revision < 0 || draft < 0 {
				return fmt.Errorf("pull %s: --revision and --draft take a positive number", key)
			}
			if revision > 0 && draft > 0 {
				return fmt.Errorf("pull %s: --revision and --draft name different documents; give one of them", key)
			}
			c, err := apiClient()
			if err != nil {
				return err
			}
			var g client.GraphYAML
			what := ""
			if revision > 0 {
				g, err = c.GetRevisionYAML(cmd.Context(), key, revision)
				what = fmt.Sprintf("revision %d (checksum %s, from draft %d)", g.Revision, g.Checksum, g.DraftRevision)
			} else {
				g, err = c.GetDraftYAML(cmd.Context(), key, draft)
				what = fmt.Sprintf("draft revision %d", g.DraftRevision)
			}
			if err != nil {
				return fmt.Errorf("pull %s: %w", key, err)
			}
			if output == "" || output == "-" {
				_, err := cmd.OutOrStdout().Write(g.YAML)
				return err
			}
			if err := writeFileAtomic(output, g.YAML); err != nil {
				return fmt.Errorf("pull %s: %w", key, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pulled %s %s into %s\n", key, what, output)
			if err := recordDraft(output, key, g.DraftRevision); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v\n", err)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&revision, "revision", 0, "published revision to pull")
	cmd.Flags().IntVar(&draft, "draft", 0, "draft revision to pull (default: the latest draft)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "file to write (default: standard output)")
	return cmd
}

// writeFileAtomic replaces path with data through a temporary file in the
// same directory, so a reader (or an interrupted pull) never sees half a file.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp, 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
	}
	return werr
}
