package main_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/internal/testinfra"
)

// readmeBlock is one shell block of the README.
type readmeBlock struct {
	line int    // of the opening fence, 1-based
	text string // dedented to the fence
	// skip is why the block does not run ("" when it runs), from a
	// <!-- readme-test: skip (reason) --> comment right before it.
	skip string
}

var (
	fencePattern = regexp.MustCompile("^( *)```\\s*([A-Za-z]*)\\s*$")
	skipPattern  = regexp.MustCompile(`^\s*<!-- readme-test: skip(.*?)-->\s*$`)
	reasonSyntax = regexp.MustCompile(`^ \((\S.*)\) $`)
)

// blockFailure is the line the session's ERR trap prints.
var blockFailure = regexp.MustCompile(`README\.md:[0-9]+: the block failed .*`)

// shellLanguages are the fence languages run as shell.
var shellLanguages = map[string]bool{"sh": true, "bash": true, "shell": true}

// readmeBlocks parses markdown into its shell blocks. A skip marker must
// give a reason and be followed by a shell block.
func readmeBlocks(markdown string) ([]readmeBlock, error) {
	var blocks []readmeBlock
	lines := strings.Split(markdown, "\n")
	pendingSkip, pendingLine := "", 0
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := skipPattern.FindStringSubmatch(line); m != nil {
			r := reasonSyntax.FindStringSubmatch(m[1])
			if r == nil {
				return nil, fmt.Errorf("README.md:%d: a skip marker needs a reason: <!-- readme-test: skip (why) -->", i+1)
			}
			pendingSkip, pendingLine = r[1], i+1
			continue
		}
		m := fencePattern.FindStringSubmatch(line)
		if m == nil {
			if pendingSkip != "" && strings.TrimSpace(line) != "" {
				return nil, fmt.Errorf("README.md:%d: the skip marker is not followed by a shell block", pendingLine)
			}
			continue
		}
		indent, lang, start := m[1], m[2], i
		var body []string
		for i++; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) == "```" {
				break
			}
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		if i == len(lines) {
			return nil, fmt.Errorf("README.md:%d: the code block is not closed", start+1)
		}
		if !shellLanguages[lang] {
			if pendingSkip != "" {
				return nil, fmt.Errorf("README.md:%d: the skip marker is not followed by a shell block", pendingLine)
			}
			continue
		}
		blocks = append(blocks, readmeBlock{line: start + 1, text: strings.Join(body, "\n"), skip: pendingSkip})
		pendingSkip = ""
	}
	return blocks, nil
}

func TestReadmeBlocksParse(t *testing.T) {
	md := "# x\n\n```sh\necho one\n```\n\n<!-- readme-test: skip (needs Docker) -->\n- item:\n\n  ```sh\n  docker compose up\n  ```\n\n```json\n{}\n```\n"
	// The marker sits right before its block: a list item's text between
	// them is refused.
	_, err := readmeBlocks(md)
	require.Error(t, err, "a marker separated from its block: %v", err)
	require.Contains(t, err.Error(), "not followed by a shell block", "a marker separated from its block: %v", err)
	md = "```sh\necho one\n```\n\n<!-- readme-test: skip (needs Docker) -->\n  ```sh\n  docker compose up\n  ```\n```json\n{}\n```\n"
	blocks, err := readmeBlocks(md)
	require.NoError(t, err)
	want := []readmeBlock{{line: 1, text: "echo one"}, {line: 6, text: "docker compose up", skip: "needs Docker"}}
	require.Equal(t, fmt.Sprint(want), fmt.Sprint(blocks), "got %+v, want %+v", blocks, want)
	for _, bad := range []string{
		"<!-- readme-test: skip -->\n```sh\nx\n```\n",
		"<!-- readme-test: skip () -->\n```sh\nx\n```\n",
		"<!-- readme-test: skip (why) -->\n```json\n{}\n```\n",
		"```sh\nnever closed\n",
	} {
		_, err = readmeBlocks(bad)
		assert.Error(t, err, "accepted %q", bad)
	}
}

// TestREADME runs every shell block of README.md, in order, in one bash
// session (set -eo pipefail), against a real `weft dev` on a fresh
// database: what `make dev` and the `export WEFT_TOKEN=...` line give a
// reader, the test gives the session (WEFT_URL, WEFT_TOKEN, WEFT_DATA_DIR,
// TEMPORAL_ADDRESS for the temporal CLI). The session works in a copy of
// examples/ with bin/weft (this tree's build) and bin/temporal, and
// weft-dev.log is weft dev's stderr. Blocks marked
// <!-- readme-test: skip (reason) --> do not run.
func TestREADME(t *testing.T) {
	root := testinfra.RepoRoot()
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	blocks, err := readmeBlocks(string(md))
	require.NoError(t, err)
	var script strings.Builder
	script.WriteString("set -eo pipefail\ntrap 'rc=$?; echo \"README.md:$README_LINE: the block failed (exit $rc) at: $BASH_COMMAND\" >&2' ERR\n")
	ran := 0
	for _, b := range blocks {
		if b.skip != "" {
			continue
		}
		ran++
		fmt.Fprintf(&script, "README_LINE=%d\necho \"=== README.md:%d\"\n%s\n", b.line, b.line, b.text)
	}
	require.NotEqual(t, 0, ran, "README.md has no shell block to run")

	for _, tool := range []string{"bash", "curl", "jq"} {
		_, err = exec.LookPath(tool)
		require.NoError(t, err, "the README's shell blocks need %s: apt-get install %s", tool, tool)
	}
	d := startDev(t)
	d.waitReady()
	work := t.TempDir()
	copyTree(t, filepath.Join(root, "examples"), filepath.Join(work, "examples"))
	for name, target := range map[string]string{
		"bin/weft": weftBin, "bin/temporal": testinfra.TemporalBinary(), "weft-dev.log": d.stderr.Name(),
	} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(work, name)), 0o755))
		require.NoError(t, os.Symlink(target, filepath.Join(work, name)))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc")
	cmd.Dir = work
	cmd.Stdin = strings.NewReader(script.String())
	cmd.Env = append(os.Environ(),
		"PATH="+filepath.Join(work, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"WEFT_URL="+d.apiURL,
		"WEFT_TOKEN="+d.token,
		"WEFT_DATA_DIR="+d.dataDir,
		"WEFT_JWT_SECRET=",
		"TEMPORAL_ADDRESS=127.0.0.1:"+strconv.Itoa(d.tempPort),
		"TEMPORAL_NAMESPACE=default",
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	t.Logf("%d README blocks ran in %s (%d skipped)", ran, time.Since(start).Round(time.Millisecond), len(blocks)-ran)
	if err != nil {
		failed := "the session ended early: " + err.Error()
		if m := blockFailure.FindAllString(out.String(), -1); len(m) > 0 {
			failed = m[len(m)-1]
		}
		t.Fatalf("%s\n--- the session's last lines:\n%s", failed, tail(out.String(), 60))
	}
	if testing.Verbose() {
		t.Logf("the session's output:\n%s", out.String())
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// copyTree copies the regular files and directories under src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case e.IsDir():
			return os.MkdirAll(to, 0o755)
		case e.Name() == ".weft-drafts.json" || !e.Type().IsRegular():
			return nil // a reader's record of earlier pushes is not part of a fresh clone
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	require.NoError(t, err)
}
