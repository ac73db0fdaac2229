package execution

import "testing"

func TestTerminal(t *testing.T) {
	for status, want := range map[string]bool{
		StatusQueued: false, StatusRunning: false, "": false,
		StatusSucceeded: true, StatusFailed: true, StatusCancelled: true,
	} {
		if got := Terminal(status); got != want {
			t.Errorf("Terminal(%q) = %v, want %v", status, got, want)
		}
	}
}
