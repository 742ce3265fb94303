package memories_test

import (
	"go/build"
	"path/filepath"
	"strings"
	"testing"
)

// Package memories implements the layer contract (package layer) without
// importing package combined, directly or through another package of the
// module: the composer may change without the memories, and the memories
// without the composer.
func TestMemoriesDoNotImportCombined(t *testing.T) {
	const module = "github.com/memstack/memstack"
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var visit func(path string, via []string)
	visit = func(path string, via []string) {
		if seen[path] {
			return
		}
		seen[path] = true
		if path == module+"/combined" {
			t.Errorf("memories imports combined: %s", strings.Join(append(via, path), " -> "))
			return
		}
		dir := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(path, module), "/")))
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, imp := range pkg.Imports {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				visit(imp, append(via, path))
			}
		}
	}
	visit(module+"/memories", nil)
	if !seen[module+"/layer"] {
		t.Errorf("memories does not import layer (visited %d packages)", len(seen))
	}
}
