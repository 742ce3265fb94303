package memories

import (
	"time"

	"github.com/memstack/memstack/retrieval"
)

// recallSettings holds the options of the Recall memory (see recall.go).
type recallSettings struct {
	k             int
	kSet          bool
	threshold     float64
	thresholdSet  bool
	neighbours    int
	neighboursSet bool
	unit          RecallUnit
	excludeRecent int
	index         retrieval.Index
	// hybridVector is WithHybrid's vector part; NewRecall builds the
	// hybrid.
	hybridVector *retrieval.Vector
	// indexBy lists the options that chose an index: choosing twice is
	// an error.
	indexBy []string
	timeout time.Duration
	hook    func(RecallEvent)
	// contextWeight is WithContextWeight's weight; contextSet tells it
	// was given.
	contextWeight float64
	contextSet    bool
	// noDates is WithRecallDates(false), noQueryDates
	// WithQueryDates(false).
	noDates, noQueryDates bool
	// share is WithNeighbourShare's share; shareSet tells it was given.
	share    float64
	shareSet bool
	// scope is WithRecallScope's scope; scopeSet tells it was given.
	scope    RecallScope
	scopeSet bool
	// stateName is WithRecallStateName's name ("" for RecallStateName).
	stateName string
}
