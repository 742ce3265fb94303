package adapter_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tmc/langchaingo/memory"

	"github.com/memstack/memstack/adapter"
)

// FuzzTurn fuzzes key selection over a chain's input and output maps. The
// seeds below and testdata/fuzz/FuzzTurn run with every `go test`; to search
// longer:
//
//	go test ./adapter -run '^$' -fuzz '^FuzzTurn$' -fuzztime 10m
//
// Up to four entries per map come from '|'-separated fuzzed keys; the bits
// of kinds make an entry's value a string, an int, nil or a []string, and
// include an agent executor's "intermediateSteps" entry in the outputs.
// Properties:
//
//   - nothing panics;
//   - InputValue selects exactly what langchaingo's memory.GetInputValue
//     selects (both fail, or both return the same string); so does
//     OutputValue, except for the documented extension: with no output
//     key, an "intermediateSteps" entry next to others is ignored (and a
//     value that is not valid UTF-8 may be rejected, see agree);
//   - Turn succeeds exactly when both sides do, with their values;
//   - every error wraps adapter.ErrInvalidValues (langchaingo's
//     memory.ErrInvalidInputValues) and never contains a value: every
//     string value starts with a \x01 byte, which %q-quoted keys and type
//     names can never produce.
func FuzzTurn(f *testing.F) {
	f.Add("input", "hello", "", "output", "hi", "", uint16(0))
	f.Add("input|context", "q|ctx", "", "text", "a", "", uint16(0))
	f.Add("input|context", "q|ctx", "input", "text", "a", "", uint16(0))
	f.Add("input", "q", "question", "text", "a", "", uint16(0))
	f.Add("", "", "", "", "", "", uint16(0))
	f.Add("input", "q", "", "output", "a", "", uint16(1<<12))
	f.Add("input", "q", "", "", "", "", uint16(1<<12))
	f.Add("input", "q", "", "output|text", "a|b", "text", uint16(1<<12))
	f.Add("input", "q", "", "output", "a", "intermediateSteps", uint16(1<<12))
	f.Add("input", "q", "", "output", "a", "", uint16(1|1<<4))
	f.Add("input", "q", "", "output", "a", "", uint16(2|2<<4|3<<8))
	f.Add("a:b|*|{x}|%", "1|2|3|4", "*", "\x00|é", "5|6", "\x00", uint16(0))
	f.Add("in\xff", "\xff\xfe", "in\xff", "out", "\x00", "", uint16(0))
	f.Add("intermediateSteps", "x", "", "intermediateSteps", "y", "", uint16(0))
	f.Fuzz(func(t *testing.T, inKeys, inVals, inputKey, outKeys, outVals, outputKey string, kinds uint16) {
		inputs := buildMap(inKeys, inVals, kinds)
		outputs := buildMap(outKeys, outVals, kinds>>4)
		if kinds&(1<<12) != 0 {
			if outputs == nil {
				outputs = map[string]any{}
			}
			outputs[adapter.IntermediateStepsKey] = []string{"\x01step"}
		}

		in, inErr := adapter.InputValue(inputs, inputKey)
		lcIn, lcInErr := memory.GetInputValue(inputs, inputKey)
		agree(t, "InputValue", in, inErr, lcIn, lcInErr)

		out, outErr := adapter.OutputValue(outputs, outputKey)
		ref := outputs
		if outputKey == "" && len(outputs) > 1 {
			if _, ok := outputs[adapter.IntermediateStepsKey]; ok {
				ref = make(map[string]any, len(outputs))
				for k, v := range outputs {
					if k != adapter.IntermediateStepsKey {
						ref[k] = v
					}
				}
			}
		}
		lcOut, lcOutErr := memory.GetInputValue(ref, outputKey)
		agree(t, "OutputValue", out, outErr, lcOut, lcOutErr)

		human, ai, err := adapter.Turn(inputs, outputs, inputKey, outputKey)
		switch {
		case inErr != nil || outErr != nil:
			if err == nil {
				t.Fatalf("Turn succeeded although InputValue (%v) or OutputValue (%v) failed", inErr, outErr)
			}
			if human != "" || ai != "" {
				t.Fatalf("Turn returned values with an error: %q, %q", human, ai)
			}
			checkErr(t, "Turn", err)
		case err != nil:
			t.Fatalf("Turn failed although both sides succeed: %v", err)
		case human != in || ai != out:
			t.Fatalf("Turn = %q, %q; InputValue/OutputValue = %q, %q", human, ai, in, out)
		}
	})
}

// buildMap makes a map of up to four entries from '|'-separated keys and
// values; bits of kinds choose each value's type (string unless the two
// bits of its entry say int, nil or []string). Empty keys gives a nil map
// (when kinds is even) or an empty one.
func buildMap(keys, vals string, kinds uint16) map[string]any {
	if keys == "" {
		if kinds&1 == 0 {
			return nil
		}
		return map[string]any{}
	}
	ks := strings.SplitN(keys, "|", 4)
	vs := strings.SplitN(vals, "|", 4)
	m := make(map[string]any, len(ks))
	for i, k := range ks {
		v := ""
		if i < len(vs) {
			v = vs[i]
		}
		switch (kinds >> (2 * uint(i%2))) & 3 {
		case 1:
			m[k] = len(v)
		case 2:
			m[k] = nil
		case 3:
			m[k] = []string{"\x01" + v}
		default:
			m[k] = "\x01" + v
		}
	}
	return m
}

// agree checks memstack's selection against langchaingo's. One divergence
// is allowed in advance: memstack may reject a value that is not valid
// UTF-8 (which no persistent store can keep) with an error saying so,
// where langchaingo accepts it.
func agree(t *testing.T, what, got string, err error, want string, lcErr error) {
	t.Helper()
	if err != nil && lcErr == nil && !utf8.ValidString(want) && strings.Contains(err.Error(), "UTF-8") {
		checkErr(t, what, err)
		return
	}
	if (err == nil) != (lcErr == nil) {
		t.Fatalf("%s: memstack error %v, langchaingo error %v (memstack value %q, langchaingo value %q)", what, err, lcErr, got, want)
	}
	if err != nil {
		if got != "" {
			t.Fatalf("%s returned %q with an error", what, got)
		}
		checkErr(t, what, err)
		return
	}
	if got != want {
		t.Fatalf("%s = %q, langchaingo selects %q", what, got, want)
	}
}

// checkErr checks that err wraps ErrInvalidValues and quotes no value.
func checkErr(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, adapter.ErrInvalidValues) || !errors.Is(err, memory.ErrInvalidInputValues) {
		t.Fatalf("%s error does not wrap ErrInvalidValues: %v", what, err)
	}
	if strings.Contains(err.Error(), "\x01") {
		t.Fatalf("%s error contains a value: %q", what, err.Error())
	}
}
