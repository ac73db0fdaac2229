package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// draftStateFile records, in the directory of the workflow files, which
// draft of each workflow the files there were last pulled as or pushed to
// (per API). weft push sends it as expectedRevision, so a push never
// replaces a draft someone saved since without saying so. It is a small,
// sorted JSON file meant to be committed with the workflow files: whoever
// pushes next from the repository pushes on the draft the files came from.
const draftStateFile = ".weft-drafts.json"

// draftState is the content of draftStateFile.
type draftState struct {
	Drafts []draftRecord `json:"drafts"`
}

// draftRecord is the last draft revision of Key on API that a file in the
// directory was pulled as or pushed to.
type draftRecord struct {
	API           string `json:"api"`
	Key           string `json:"key"`
	DraftRevision int    `json:"draftRevision"`
}

// draftStatePath is the state file of the directory holding file.
func draftStatePath(file string) string {
	return filepath.Join(filepath.Dir(file), draftStateFile)
}

// loadDraftState reads path; a missing file is an empty state.
func loadDraftState(path string) (*draftState, error) {
	data, err := readFileBounded(path, 1<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return &draftState{}, nil
	}
	if err != nil {
		return nil, err
	}
	var s draftState
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w (delete it to start over; weft push --force ignores it)", path, err)
	}
	return &s, nil
}

// get returns the recorded draft revision of key on api.
func (s *draftState) get(api, key string) (int, bool) {
	for _, r := range s.Drafts {
		if r.API == api && r.Key == key {
			return r.DraftRevision, true
		}
	}
	return 0, false
}

// set records draft revision rev of key on api.
func (s *draftState) set(api, key string, rev int) {
	for i, r := range s.Drafts {
		if r.API == api && r.Key == key {
			s.Drafts[i].DraftRevision = rev
			return
		}
	}
	s.Drafts = append(s.Drafts, draftRecord{API: api, Key: key, DraftRevision: rev})
}

// save writes the state to path, records sorted so diffs stay small.
func (s *draftState) save(path string) error {
	slices.SortFunc(s.Drafts, func(a, b draftRecord) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return strings.Compare(a.API, b.API)
	})
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(data, '\n'))
}

// recordDraft notes in the state file next to file that it is draft rev
// of key on the current API. A failure is a warning: the draft is saved.
func recordDraft(file, key string, rev int) error {
	path := draftStatePath(file)
	s, err := loadDraftState(path)
	if err != nil {
		return err
	}
	s.set(apiBaseURL(), key, rev)
	if err := s.save(path); err != nil {
		return fmt.Errorf("recording draft %d of %s in %s: %w", rev, key, path, err)
	}
	return nil
}
