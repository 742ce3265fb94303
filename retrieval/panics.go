package retrieval

import "fmt"

// catch, deferred in a function with a named error result, turns a panic
// of that function into *err: an error saying what panicked, and with
// what. Embedders and vector stores are other people's code; a bug in one
// must fail the operation, never take the process down (a hybrid runs its
// parts on goroutines of its own, where no caller could recover).
// What panicked is named by format and args, formatted only on a panic.
func catch(err *error, format string, args ...any) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("retrieval: %s panicked: %v", fmt.Sprintf(format, args...), p)
	}
}
