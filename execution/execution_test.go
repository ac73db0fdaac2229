package execution

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTerminal(t *testing.T) {
	for status, want := range map[string]bool{
		StatusQueued: false, StatusRunning: false, "": false,
		StatusSucceeded: true, StatusFailed: true, StatusCancelled: true,
	} {
		got := Terminal(status)
		assert.Equal(t, want, got, "Terminal(%q) = %v, want %v", status, got, want)
	}
}
