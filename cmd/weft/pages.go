package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// printPages writes a table: the tab-separated header, then the rows of
// the first page fetch returns and, when all is set, of every page after it
// (fetch gets the cursor, "" first, and returns the next one, nil at the
// end). Columns are aligned once every row is in.
func printPages(w io.Writer, header string, all bool, fetch func(cursor string) (rows []string, next *string, err error)) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	cursor := ""
	for {
		rows, next, err := fetch(cursor)
		if err != nil {
			return err
		}
		for _, r := range rows {
			fmt.Fprintln(tw, r)
		}
		if !all || next == nil {
			break
		}
		cursor = *next
	}
	return tw.Flush()
}
