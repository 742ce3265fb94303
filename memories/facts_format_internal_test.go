package memories

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/memstack/memstack/memories/internal/factsengine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The engine's stored fact encodes as Fact does, byte for byte: the facts
// state's format did not change when the mechanism moved to factsengine.
func TestFacts_EngineFactKeepsTheStateFormat(t *testing.T) {
	from := time.Date(2026, 11, 30, 9, 0, 0, 0, time.FixedZone("WET", 0))
	for _, f := range []Fact{
		{Key: "user name", Subject: "user", Attribute: "name", Value: "Ana", ValidFrom: from},
		{Key: "user city", Subject: "user", Attribute: "city", Value: "Porto", Sources: []int64{3, 4},
			Conversation: "c1", Rule: "location", ValidFrom: from, ValidTo: from.Add(time.Hour)},
	} {
		want, err := json.Marshal(f)
		require.NoError(t, err)
		var e factsengine.Fact
		require.NoError(t, json.Unmarshal(want, &e))
		got, err := json.Marshal(e)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got))
	}
}
