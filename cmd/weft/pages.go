package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// printPages writes a table: the tab-separated header, then the rows of
// the first page fetch returns and, when all is set, of every page after it
// (fetch gets the cursor, "" first, and returns the next one, nil at the
// end). Columns are aligned once every row is in. With no row at all it
// prints none instead (e.g. "no runs match"), not a bare header.
func printPages(w io.Writer, header, none string, all bool, fetch func(cursor string) (rows []string, next *string, err error)) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	cursor := ""
	printed := 0
	for {
		rows, next, err := fetch(cursor)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if printed == 0 {
				fmt.Fprintln(tw, header)
			}
			fmt.Fprintln(tw, r)
			printed++
		}
		if printed == 0 && next == nil {
			fmt.Fprintln(w, none)
			return nil
		}
		if !all || next == nil {
			break
		}
		cursor = *next
	}
	return tw.Flush()
}
