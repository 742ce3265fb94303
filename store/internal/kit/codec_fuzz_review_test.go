package kit

import (
	"reflect"
	"testing"
)

// FuzzReviewS30DecodeCommon: decodeCommon returns what decodeJSON
// returns, or declines.
func FuzzReviewS30DecodeCommon(f *testing.F) {
	f.Add([]byte(`{"v":1,"type":"human","content":"a\/b\"c\\","at":"2023-05-08T10:30:00.123456789+02:00"}`))
	f.Add([]byte(`{"v":1,"type":"ai","content":"","at":"2023-05-08T08:30:00Z"}`))
	f.Add([]byte(`{"v":1,"type":"system","content":"x\n\t\r\b\f"}`))
	f.Add([]byte(`{"v":1,"type":"human","content":"é","at":"0001-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"v":1,"type":"human","content":"x","at":"2023-05-08T10:30:00-00:00"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		msg, at, ok := decodeCommon(data)
		if !ok {
			return
		}
		wmsg, wat, err := decodeJSON(data)
		if err != nil {
			t.Fatalf("%q: decodeCommon ok, decodeJSON %v", data, err)
		}
		if !reflect.DeepEqual(msg, wmsg) || !reflect.DeepEqual(at, wat) {
			t.Fatalf("%q: decodeCommon %#v %v, decodeJSON %#v %v", data, msg, at, wmsg, wat)
		}
	})
}
