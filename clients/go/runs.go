package spillway

import (
	"context"
	"iter"

	spillwayv1 "github.com/spillway-dev/spillway/clients/go/gen/spillway/v1"
)

// RunsPage is one page of ListRuns.
type RunsPage struct {
	// Runs are the caller's runs, each with its live outputs' count and bytes, times, expiry
	// and fork parent, in the server's stored order (not alphabetical).
	Runs []*spillwayv1.RunInfo
	// NextPageToken continues with the next page; empty on the last page.
	NextPageToken string
}

// ListRuns returns one page of the calling tenant's runs; expired and deleted runs are not
// listed. pageSize 0 takes the server's default (100, at most 1000). A page may hold fewer
// runs than pageSize and still have a next page (the server bounds what one call reads). A
// token of another tenant, of ListToolOutputs or an edited one is codes.InvalidArgument.
func (c *Client) ListRuns(ctx context.Context, pageSize int32, pageToken string) (*RunsPage, error) {
	res, err := c.raw.ListRuns(ctx, &spillwayv1.ListRunsRequest{PageSize: pageSize, PageToken: pageToken})
	if err != nil {
		return nil, err
	}
	return &RunsPage{Runs: res.GetRuns(), NextPageToken: res.GetNextPageToken()}, nil
}

// ListAllRuns yields every run of the calling tenant, fetching pages of pageSize as it goes.
// A failed page yields its error once and ends the sequence.
func (c *Client) ListAllRuns(ctx context.Context, pageSize int32) iter.Seq2[*spillwayv1.RunInfo, error] {
	return func(yield func(*spillwayv1.RunInfo, error) bool) {
		token := ""
		for {
			page, err := c.ListRuns(ctx, pageSize, token)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, run := range page.Runs {
				if !yield(run, nil) {
					return
				}
			}
			if page.NextPageToken == "" {
				return
			}
			token = page.NextPageToken
		}
	}
}
