package daytwo

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cacheops/cacheops/dayTwo/plan"
)

// Every action the planner can return, read from its source, has an
// executor (None and Wait are handled by act itself): a new action type
// without one would fail at run time with "unknown action".
func TestEveryActionHasAnExecutor(t *testing.T) {
	files, err := filepath.Glob("plan/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no planner sources: %v", err)
	}
	fset := token.NewFileSet()
	var found int
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			if id, ok := spec.Type.(*ast.Ident); !ok || id.Name != "ActionType" {
				return true
			}
			for i, name := range spec.Names {
				lit, ok := spec.Values[i].(*ast.BasicLit)
				if !ok {
					t.Errorf("%s: %s is not a string literal", f, name.Name)
					continue
				}
				v, _ := strconv.Unquote(lit.Value)
				found++
				a := plan.ActionType(v)
				if a == plan.ActionNone || a == plan.ActionWait {
					continue
				}
				if _, ok := executors[a]; !ok {
					t.Errorf("%s (%s, in %s) has no executor in execute.go", name.Name, v, f)
				}
			}
			return true
		})
	}
	if found < 30 {
		t.Fatalf("found only %d action types in plan/: the parse misses them", found)
	}
	if len(executors) != found-2 {
		t.Errorf("%d executors for %d action types (None and Wait need none)", len(executors), found)
	}
}
