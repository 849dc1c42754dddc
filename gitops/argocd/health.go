package argocd

import (
	_ "embed"
	"encoding/json"
	"fmt"

	lua "github.com/yuin/gopher-lua"
)

// HealthScript is the Argo CD health check for cache.cacheops.io/CacheCluster.
//
//go:embed cache.cacheops.io/CacheCluster/health.lua
var HealthScript string

// healthStatuses are the values Argo CD accepts in hs.status.
var healthStatuses = map[string]bool{
	"Healthy": true, "Progressing": true, "Degraded": true,
	"Suspended": true, "Missing": true, "Unknown": true,
}

// EvalHealth runs an Argo CD health script against obj the way Argo CD does:
// in a gopher-lua state that opens only the base, table and package
// libraries, with obj as the global `obj`. It returns hs.status and
// hs.message of the table the script returns. A script error, a result that
// is not a table or a status Argo CD does not know is an error.
func EvalHealth(script string, obj map[string]any) (status, message string, err error) {
	return evalHealth(script, obj, false)
}

// evalHealth runs script with Argo CD's sandbox, or with every library of
// gopher-lua open when openLibs is set (Argo CD's useOpenLibs option).
func evalHealth(script string, obj map[string]any, openLibs bool) (status, message string, err error) {
	L := lua.NewState(lua.Options{SkipOpenLibs: !openLibs})
	defer L.Close()
	if !openLibs {
		for _, lib := range []struct {
			name string
			open lua.LGFunction
		}{
			{lua.LoadLibName, lua.OpenPackage},
			{lua.BaseLibName, lua.OpenBase},
			{lua.TabLibName, lua.OpenTable},
		} {
			L.Push(L.NewFunction(lib.open))
			L.Push(lua.LString(lib.name))
			L.Call(1, 0)
		}
	}

	value, err := toLua(L, obj)
	if err != nil {
		return "", "", err
	}
	L.SetGlobal("obj", value)
	if err := L.DoString(script); err != nil {
		return "", "", fmt.Errorf("running health script: %w", err)
	}

	hs, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return "", "", fmt.Errorf("health script returned %s, not a table", L.Get(-1).Type())
	}
	st, ok := hs.RawGetString("status").(lua.LString)
	if !ok || !healthStatuses[string(st)] {
		return "", "", fmt.Errorf("health script returned status %v, which Argo CD does not know", hs.RawGetString("status"))
	}
	msg := hs.RawGetString("message")
	switch msg := msg.(type) {
	case lua.LString:
		message = string(msg)
	case *lua.LNilType:
	default:
		return "", "", fmt.Errorf("health script returned message %v of type %s, not a string", msg, msg.Type())
	}
	return string(st), message, nil
}

// toLua converts a decoded JSON or YAML value into a Lua value: objects
// become tables with string keys, lists become 1-based arrays, numbers
// become LNumber.
func toLua(L *lua.LState, v any) (lua.LValue, error) {
	switch v := v.(type) {
	case nil:
		return lua.LNil, nil
	case bool:
		return lua.LBool(v), nil
	case string:
		return lua.LString(v), nil
	case float64:
		return lua.LNumber(v), nil
	case float32:
		return lua.LNumber(v), nil
	case int:
		return lua.LNumber(v), nil
	case int32:
		return lua.LNumber(v), nil
	case int64:
		return lua.LNumber(v), nil
	case json.Number:
		f, err := v.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %q: %w", v, err)
		}
		return lua.LNumber(f), nil
	case map[string]any:
		t := L.CreateTable(0, len(v))
		for k, e := range v {
			lv, err := toLua(L, e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			t.RawSetString(k, lv)
		}
		return t, nil
	case []any:
		t := L.CreateTable(len(v), 0)
		for i, e := range v {
			lv, err := toLua(L, e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			t.RawSetInt(i+1, lv)
		}
		return t, nil
	}
	return nil, fmt.Errorf("cannot convert %T to a Lua value", v)
}
