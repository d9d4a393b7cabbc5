package spillway_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	spillway "github.com/spillway-dev/spillway/clients/go"
	spillwayv1 "github.com/spillway-dev/spillway/clients/go/gen/spillway/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestListRunsPagesThroughEveryRunOnce: against a server of its own, ListRuns and ListAllRuns
// return each live run once with its output count, bytes, TTL and fork parent; a deleted run
// is gone and a forged token is InvalidArgument.
func TestListRunsPagesThroughEveryRunOnce(t *testing.T) {
	url, stop, err := startServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	c, err := spillway.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testContext(t)
	offload := func(runID, callID, body string) {
		t.Helper()
		if _, err := c.Offload(ctx, spillway.Key{Tenant: "dev", RunID: runID, CallID: callID}, strings.NewReader(body), nil); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for i := range 7 {
		runID := fmt.Sprintf("run-%d", i)
		offload(runID, "a", "12345\n")
		want = append(want, runID)
	}
	offload("run-0", "b", "678\n")
	if _, err := c.Raw().SetRunTtl(ctx, &spillwayv1.SetRunTtlRequest{RunId: "run-1", Ttl: durationpb.New(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Raw().ForkRun(ctx, &spillwayv1.ForkRunRequest{ParentRunId: "run-0", ChildRunId: "fork"}); err != nil {
		t.Fatal(err)
	}
	want = append(want, "fork")
	offload("gone", "a", "x\n")
	if _, err := c.DeleteRun(ctx, "gone"); err != nil {
		t.Fatal(err)
	}

	var ids []string
	token, pages := "", 0
	for {
		page, err := c.ListRuns(ctx, 3, token)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Runs) > 3 {
			t.Fatalf("a page of %d runs, asked for 3", len(page.Runs))
		}
		for _, run := range page.Runs {
			ids = append(ids, run.GetRunId())
		}
		pages++
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	slices.Sort(ids)
	slices.Sort(want)
	if pages != 3 || !slices.Equal(ids, want) {
		t.Fatalf("%d pages of %v, want 3 pages of %v", pages, ids, want)
	}

	runs := map[string]*spillwayv1.RunInfo{}
	for run, err := range c.ListAllRuns(ctx, 2) {
		if err != nil {
			t.Fatal(err)
		}
		runs[run.GetRunId()] = run
	}
	if r := runs["run-0"]; r.GetOutputCount() != 2 || r.GetSizeBytes() != 10 || r.GetExpireTime() != nil || r.GetParentRunId() != "" {
		t.Fatalf("run-0: %v", r)
	}
	if r := runs["run-1"]; r.GetExpireTime() == nil {
		t.Fatalf("run-1 has no expire_time: %v", r)
	}
	if r := runs["fork"]; r.GetParentRunId() != "run-0" || r.GetOutputCount() != 2 {
		t.Fatalf("fork: %v", r)
	}
	if _, err := c.ListRuns(ctx, 0, "forged"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a forged token: %v, want InvalidArgument", err)
	}
	if _, err := c.ListRuns(ctx, 1001, ""); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("page_size 1001: %v, want InvalidArgument", err)
	}
}

// TestMergeRunBringsTheForksOutputsIntoItsParent: MergeRun merges what the fork created, once;
// a handle the parent holds with other bytes is AlreadyExists and merges nothing; another
// parent is FailedPrecondition.
func TestMergeRunBringsTheForksOutputsIntoItsParent(t *testing.T) {
	c := dial(t)
	ctx := testContext(t)
	parent, child := newRunID(), newRunID()
	offload := func(runID, callID, body string) {
		t.Helper()
		if _, err := c.Offload(ctx, spillway.Key{Tenant: "dev", RunID: runID, CallID: callID}, strings.NewReader(body), nil); err != nil {
			t.Fatal(err)
		}
	}
	offload(parent, "base", "base\n")
	if _, err := c.Raw().ForkRun(ctx, &spillwayv1.ForkRunRequest{ParentRunId: parent, ChildRunId: child}); err != nil {
		t.Fatal(err)
	}
	offload(child, "x", "from the child\n")
	merged, unchanged, err := c.MergeRun(ctx, child, parent)
	if err != nil || merged != 1 || unchanged != 0 {
		t.Fatalf("MergeRun = %d, %d, %v; want 1, 0", merged, unchanged, err)
	}
	if merged, unchanged, err = c.MergeRun(ctx, child, parent); err != nil || merged != 0 || unchanged != 1 {
		t.Fatalf("repeated MergeRun = %d, %d, %v; want 0, 1", merged, unchanged, err)
	}
	if _, err := c.Stat(ctx, parent, "res_x"); err != nil {
		t.Fatalf("the merged handle: %v", err)
	}
	offload(child, "z", "child z\n")
	offload(parent, "z", "parent z\n")
	_, _, err = c.MergeRun(ctx, child, parent)
	if status.Code(err) != codes.AlreadyExists || !strings.Contains(status.Convert(err).Message(), "res_z") {
		t.Fatalf("conflicting MergeRun: %v; want AlreadyExists naming res_z", err)
	}
	if _, _, err = c.MergeRun(ctx, child, "not-the-parent"); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("MergeRun into another run: %v; want FailedPrecondition", err)
	}
}
