package starter

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra"
)

// BenchmarkStartOptions measures what each part of the starter's Temporal
// start costs (issue 14: enqueue throughput): bursts of the same start
// onto a queue no worker polls from 20 goroutines at once (weftbench's 20
// clients), bare (the raw SDK start weftbench compares with), with the
// run's parameters as its argument, and with each of the options start
// adds (the conflict policy, the four search attributes, the summary and
// details), then all of them. The variants take turns burst by burst, in
// an order rotating every round, so the machine's load drifts over all of
// them alike; each reports its median starts per second over the rounds
// (<variant>-starts/s) and its ratio to bare (<variant>/bare). The
// dev server's work is most of it.
//
//	go test ./starter -run '^$' -bench StartOptions -benchtime 1x
func BenchmarkStartOptions(b *testing.B) {
	const rounds, perBurst, clients = 5, 200, 20
	_, tc := testinfra.SharedClient(b)
	queue := "start-options-" + uuid.NewString()
	input := json.RawMessage(`{"text":"hello from weftbench","n":42}`)
	durable := execution.DefaultDurability
	params := execution.RunParams{TenantID: "t-bench", TenantName: "Tenant t-bench", RunID: uuid.NewString(),
		WorkflowKey: "chain10", Revision: 1, Checksum: "sha256:" + fmt.Sprintf("%064x", 1), Mode: execution.ModeLive,
		Input: execution.Value{Inline: input}, Actor: execution.Actor{Kind: "user", Sub: "bench"},
		Origin: execution.Origin{Kind: "api"}, Permissions: []string{"runs.execute", "runs.read"},
		EnqueuedAt: time.Now(), Durability: &durable}
	search := temporal.NewSearchAttributes(execution.KeyTenant.ValueSet(params.TenantID),
		execution.KeyWorkflowKey.ValueSet(params.WorkflowKey), execution.KeyMode.ValueSet(string(params.Mode)),
		execution.KeyRevision.ValueSet(1))
	summary := Summary(params.WorkflowKey, params.Revision, params.Mode)
	details := fmt.Sprintf("run %s · origin %s · actor %s", params.RunID, params.Origin.Kind, params.Actor.Sub)
	conflict := func(o *client.StartWorkflowOptions) {
		o.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
		o.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
	}
	withSearch := func(o *client.StartWorkflowOptions) { o.TypedSearchAttributes = search }
	withSummary := func(o *client.StartWorkflowOptions) { o.StaticSummary, o.StaticDetails = summary, details }
	variants := []struct {
		name   string
		params bool
		opts   func(*client.StartWorkflowOptions)
	}{
		{"bare", false, nil},
		{"params", true, nil},
		{"params+conflict", true, conflict},
		{"params+search", true, withSearch},
		{"params+summary", true, withSummary},
		{"all", true, func(o *client.StartWorkflowOptions) { conflict(o); withSearch(o); withSummary(o) }},
	}
	perSecond := make([][]float64, len(variants))
	run := uuid.NewString()[:8]
	for b.Loop() {
		for r := 0; r <= rounds; r++ { // round 0 warms up, unrecorded
			for k := range variants {
				i := (r + k) % len(variants)
				v := variants[i]
				var arg any = input
				if v.params {
					arg = params
				}
				var next atomic.Int64
				var wg sync.WaitGroup
				began := time.Now()
				for range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for n := next.Add(1); n <= perBurst; n = next.Add(1) {
							o := client.StartWorkflowOptions{ID: fmt.Sprintf("%s-%s-%d-%d", v.name, run, r, n), TaskQueue: queue}
							if v.opts != nil {
								v.opts(&o)
							}
							if _, err := tc.ExecuteWorkflow(context.Background(), o, execution.WorkflowName, arg); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				if r > 0 {
					perSecond[i] = append(perSecond[i], perBurst/time.Since(began).Seconds())
				}
			}
		}
		run += "x"
	}
	bare := median(perSecond[0])
	for i, v := range variants {
		m := median(perSecond[i])
		b.ReportMetric(m, v.name+"-starts/s")
		if i > 0 {
			b.ReportMetric(m/bare, v.name+"/bare")
		}
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
