package change

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// Drift lists how the live spec differs from the spec in git, one line per
// field ("spec.replicas: 4 live, 3 in git"), sorted by field. Both sides
// get the CRD's defaults first, so a field git leaves to its default is no
// drift. Nothing listed means the live cluster runs what git says.
func Drift(git, live *cachev1alpha1.CacheCluster) ([]string, error) {
	g, err := flatSpec(git)
	if err != nil {
		return nil, err
	}
	l, err := flatSpec(live)
	if err != nil {
		return nil, err
	}
	fields := map[string]bool{}
	for k := range g {
		fields[k] = true
	}
	for k := range l {
		fields[k] = true
	}
	var out []string
	for f := range fields {
		gv, inGit := g[f]
		lv, isLive := l[f]
		switch {
		case inGit && isLive && gv == lv:
		case !isLive:
			out = append(out, fmt.Sprintf("%s: unset live, %s in git", f, gv))
		case !inGit:
			out = append(out, fmt.Sprintf("%s: %s live, unset in git", f, lv))
		default:
			out = append(out, fmt.Sprintf("%s: %s live, %s in git", f, lv, gv))
		}
	}
	sort.Strings(out)
	return out, nil
}

// flatSpec is the spec of cc with its defaults, as leaf field paths
// ("spec.config.maxmemory") to their JSON values. Empty maps and lists are
// left out: the API server keeps no difference between them and absence
// that a user could see.
func flatSpec(cc *cachev1alpha1.CacheCluster) (map[string]string, error) {
	d, err := WithDefaults(cc)
	if err != nil {
		return nil, err
	}
	js, err := json.Marshal(d.Spec)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(js, &v); err != nil {
		return nil, err
	}
	out := map[string]string{}
	flatten("spec", v, out)
	return out, nil
}

func flatten(path string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			flatten(path+"."+k, e, out)
		}
	case []any:
		for i, e := range x {
			flatten(fmt.Sprintf("%s[%d]", path, i), e, out)
		}
	case nil:
	default:
		js, _ := json.Marshal(x)
		out[path] = strings.Trim(string(js), `"`)
	}
}
