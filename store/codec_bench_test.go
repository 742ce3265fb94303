package store_test

import (
	"testing"

	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack/store/storekit"
)

func BenchmarkDecodeMessage(b *testing.B) {
	data, err := storekit.EncodeMessage(llms.AIChatMessage{Content: "turn 3: launch on the 14th, budget capped at 20k, review on Friday."})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := storekit.DecodeMessage(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeMessage(b *testing.B) {
	m := llms.AIChatMessage{Content: "turn 3: launch on the 14th, budget capped at 20k, review on Friday."}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := storekit.EncodeMessage(m); err != nil {
			b.Fatal(err)
		}
	}
}
