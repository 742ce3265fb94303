package memories_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/summarizer"
)

// TestOptionsOfAnotherTypeAreErrors: an option that does nothing for a
// type is an error naming the option, the type and the types it is for
// (issue 10, item 8), rather than silently ignored.
func TestOptionsOfAnotherTypeAreErrors(t *testing.T) {
	patterns, err := extract.NewPatterns()
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		make func() error
		want []string // in the error, each
	}{
		{"RecentN with Summary and Recall options", func() error {
			_, err := memories.NewRecentN(4, memories.WithMaxTokens(5), memories.WithK(3))
			return err
		}, []string{"WithMaxTokens does not apply to a RecentN (it is an option of Summary)", "WithK does not apply to a RecentN (it is an option of Recall)"}},
		{"TokenWindow with a Facts option", func() error {
			_, err := memories.NewTokenWindow(100, memories.WithMaxFacts(3))
			return err
		}, []string{"WithMaxFacts does not apply to a TokenWindow (it is an option of Facts)"}},
		{"Recall with a Summary option", func() error {
			_, err := memories.NewRecall(memories.WithBatchSize(2))
			return err
		}, []string{"WithBatchSize does not apply to a Recall"}},
		{"Summary with a Recall option", func() error {
			_, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithThreshold(0.5))
			return err
		}, []string{"WithThreshold does not apply to a Summary"}},
		{"Facts with WithBackground is fine", func() error {
			_, err := memories.NewFacts(patterns, memories.WithBackground(true))
			return err
		}, nil},
		{"Recall with WithBackground", func() error {
			_, err := memories.NewRecall(memories.WithBackground(true))
			return err
		}, []string{"WithBackground does not apply to a Recall (it is an option of Summary and Facts)"}},
		{"Buffer reports it on its first call", func() error {
			b := memories.NewBuffer(memories.WithK(2))
			_, err := b.LoadMemoryVariables(context.Background(), nil)
			return err
		}, []string{"WithK does not apply to a Buffer"}},
		{"options of every type are fine everywhere", func() error {
			_, err := memories.NewRecall(memories.WithMemoryKey("past"), memories.WithReturnMessages(true), memories.WithCacheSize(8))
			return err
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.make()
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, memories.ErrInvalidOption)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}
