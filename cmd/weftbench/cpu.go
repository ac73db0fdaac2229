package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/weftworks/weft/store"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on
// every Linux architecture Go supports (sysconf(_SC_CLK_TCK) needs cgo).
const clockTicks = 100

// CPUUse is CPU time (user + system) spent by the processes a throughput
// or capacity measurement loads. CPU seconds, not wall time, so a busy
// machine slows both sides without moving what each run costs.
type CPUUse struct {
	// DevServer is the dev server process the measurement runs on.
	DevServer time.Duration
	// Postgres is the bench database's PostgreSQL backends (the pool's
	// connections and any autovacuum worker on it): each commit's work
	// and, with synchronous commit, its WAL flush. The cluster's shared
	// processes (WAL writer, checkpointer) serve other databases too and
	// are left out.
	Postgres time.Duration
	// Self is this process: API, starter and worker of both sides.
	Self time.Duration
}

func (c CPUUse) add(o CPUUse) CPUUse {
	return CPUUse{c.DevServer + o.DevServer, c.Postgres + o.Postgres, c.Self + o.Self}
}

// Total is the three together.
func (c CPUUse) Total() time.Duration { return c.DevServer + c.Postgres + c.Self }

// perRun divides every figure by n runs.
func (c CPUUse) perRun(n int) CPUUse {
	if n <= 0 {
		return CPUUse{}
	}
	d := time.Duration(n)
	return CPUUse{c.DevServer / d, c.Postgres / d, c.Self / d}
}

// cpuMeter samples CPUUse's processes. It reads /proc, so outside Linux
// (or when the dev server's process is not found) it measures nothing and
// says so (ok false).
type cpuMeter struct {
	devServer int // pid, 0 when unknown
	store     *store.Store
}

// cpuSnapshot is each process's CPU time so far, by pid.
type cpuSnapshot struct {
	devServer, self time.Duration
	postgres        map[int]time.Duration
}

func (m *cpuMeter) ok() bool { return m != nil && m.devServer > 0 }

func (m *cpuMeter) snapshot(ctx context.Context) (cpuSnapshot, error) {
	var s cpuSnapshot
	var err error
	if s.devServer, err = processCPU(strconv.Itoa(m.devServer)); err != nil {
		return s, err
	}
	if s.self, err = processCPU("self"); err != nil {
		return s, err
	}
	rows, err := m.store.Pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		return s, fmt.Errorf("postgres backends: %w", err)
	}
	defer rows.Close()
	s.postgres = map[int]time.Duration{}
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			return s, err
		}
		// A backend that exited between the query and the read has
		// nothing left to count: skip it.
		if d, err := processCPU(strconv.Itoa(pid)); err == nil {
			s.postgres[pid] = d
		}
	}
	return s, rows.Err()
}

// since is what the processes used from before to s. A backend that
// started in between counts from zero; one that ended in between is lost
// (the pool keeps its connections, so that is rare and small).
func (s cpuSnapshot) since(before cpuSnapshot) CPUUse {
	u := CPUUse{DevServer: s.devServer - before.devServer, Self: s.self - before.self}
	for pid, d := range s.postgres {
		u.Postgres += d - before.postgres[pid]
	}
	return u
}

// measure runs f and returns what the processes used meanwhile (zero when
// the meter cannot measure).
func (m *cpuMeter) measure(ctx context.Context, f func() error) (CPUUse, error) {
	if !m.ok() {
		return CPUUse{}, f()
	}
	before, err := m.snapshot(ctx)
	if err != nil {
		return CPUUse{}, err
	}
	if err := f(); err != nil {
		return CPUUse{}, err
	}
	after, err := m.snapshot(ctx)
	if err != nil {
		return CPUUse{}, err
	}
	return after.since(before), nil
}

// processCPU is utime + stime of /proc/<pid>/stat.
func processCPU(pid string) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/<pid>/stat line; the command (field 2) is in parentheses and may
// hold spaces, so fields are counted after its closing parenthesis.
func parseStatCPU(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat %q: no command field", b)
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("stat %q: too few fields", b)
	}
	var ticks int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat %q: %w", b, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// devServerPID finds the dev server listening on hostPort among this
// process's children (testsuite.StartDevServer runs the CLI with
// `--port <port>` and does not expose its process); 0 when none is found.
func devServerPID(hostPort string) int {
	_, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return 0
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := os.Getpid()
	want := []byte("\x00--port\x00" + port + "\x00")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil || parentPID(stat) != self {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(append(cmdline, 0), want) {
			return pid
		}
	}
	return 0
}

// parentPID is field 4 of a /proc/<pid>/stat line (-1 if unreadable).
func parentPID(stat []byte) int {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return -1
	}
	p, err := strconv.Atoi(f[1])
	if err != nil {
		return -1
	}
	return p
}
