package schemagen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
)

// Generator makes random values from schemas. It is deterministic for a
// seed: the same seed and the same schema give the same objects.
type Generator struct {
	r *rand.Rand
	// Values adds candidate values for the field at a path: "spec.backup.schedule";
	// a map's values are "<map path>.<key>" or, for every key,
	// "<map path>.*"; an array's items "<array path>[]". A candidate is
	// taken half of the time, or as ValuesChance says for the path.
	Values       map[string][]any
	ValuesChance map[string]float64
	// Keys adds candidate keys for the map at a path, e.g. "spec.config".
	Keys map[string][]string
	// Skip lists paths that are never generated (e.g. "status", which a
	// create ignores).
	Skip map[string]bool
	// Invalid is the chance that a field gets a value the schema should
	// refuse (out of bounds, too long, wrong type, a required field left
	// out), so that both sides of each rule are exercised.
	Invalid float64
	// Optional is the chance that an optional property is set; Chance
	// overrides it for the property at a path.
	Optional float64
	Chance   map[string]float64

	patterns map[string]*compiled
}

// New returns a generator for a seed.
func New(seed uint64) *Generator {
	return &Generator{
		r:            rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		Values:       map[string][]any{},
		ValuesChance: map[string]float64{},
		Keys:         map[string][]string{},
		Skip:         map[string]bool{},
		Chance:       map[string]float64{},
		Invalid:      0.02,
		Optional:     0.4,
		patterns:     map[string]*compiled{},
	}
}

// Rand is the generator's source, for callers that pick more values from
// the same seed.
func (g *Generator) Rand() *rand.Rand { return g.r }

// Object makes one object of the CRD's kind with the given name and
// namespace; every top-level property but apiVersion, kind, metadata and
// the skipped ones comes from the schema.
func (g *Generator) Object(crd *CRD, name, namespace string) map[string]any {
	obj := map[string]any{
		"apiVersion": crd.APIVersion(),
		"kind":       crd.Kind,
		"metadata":   map[string]any{"name": name, "namespace": namespace},
	}
	s := crd.Schema
	for _, k := range sortedKeys(s.Properties) {
		if k == "apiVersion" || k == "kind" || k == "metadata" || g.Skip[k] {
			continue
		}
		if !slices.Contains(s.Required, k) && !g.chance(g.optional(k)) {
			continue
		}
		obj[k] = g.Value(s.Properties[k], k)
	}
	return obj
}

// Value makes a value for the schema at path.
func (g *Generator) Value(s *Schema, path string) any {
	p := 0.5
	if c, ok := g.ValuesChance[path]; ok {
		p = c
	}
	if extra := g.Values[path]; len(extra) > 0 && g.chance(p) {
		return extra[g.r.IntN(len(extra))]
	}
	if s.IntOrString {
		return g.intOrString(s, path)
	}
	if len(s.Enum) > 0 {
		if g.chance(g.Invalid * 2) {
			return g.trickyString()
		}
		return s.Enum[g.r.IntN(len(s.Enum))]
	}
	if g.chance(g.Invalid / 4) {
		return g.wrongType(s.Type)
	}
	switch s.Type {
	case "object":
		return g.object(s, path)
	case "array":
		return g.array(s, path)
	case "string":
		return g.str(s)
	case "integer":
		return g.integer(s)
	case "number":
		return float64(g.integer(s)) + g.r.Float64()
	case "boolean":
		return g.r.IntN(2) == 0
	}
	// No type (x-kubernetes-preserve-unknown-fields or anyOf only).
	return g.trickyString()
}

func (g *Generator) object(s *Schema, path string) map[string]any {
	out := map[string]any{}
	for _, k := range sortedKeys(s.Properties) {
		p := path + "." + k
		if g.Skip[p] {
			continue
		}
		required := slices.Contains(s.Required, k)
		if required && g.chance(g.Invalid/2) {
			continue // a required field left out
		}
		if !required && !g.chance(g.optional(p)) {
			continue
		}
		out[k] = g.Value(s.Properties[k], p)
	}
	if ap := s.AdditionalProperties; ap != nil {
		n := g.r.IntN(4)
		if s.MaxProperties != nil && g.chance(g.Invalid) {
			n = int(*s.MaxProperties) + 1
		}
		for range n {
			k := g.key(path)
			vp := path + "." + k
			if _, ok := g.Values[vp]; !ok {
				vp = path + ".*"
			}
			out[k] = g.Value(ap, vp)
		}
	}
	if len(s.Properties) > 0 && g.chance(g.Invalid/2) {
		// Unknown fields are pruned, not refused; they must not matter.
		out["unknownField"+fmt.Sprint(g.r.IntN(10))] = g.trickyString()
	}
	return out
}

func (g *Generator) optional(path string) float64 {
	if p, ok := g.Chance[path]; ok {
		return p
	}
	return g.Optional
}

func (g *Generator) key(path string) string {
	if ks := g.Keys[path]; len(ks) > 0 && g.chance(0.7) {
		return ks[g.r.IntN(len(ks))]
	}
	if g.chance(g.Invalid * 3) {
		return g.trickyString()
	}
	const first, rest = "abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz0123456789-"
	b := []byte{first[g.r.IntN(len(first))]}
	for range g.r.IntN(16) {
		b = append(b, rest[g.r.IntN(len(rest))])
	}
	return string(b)
}

func (g *Generator) array(s *Schema, path string) []any {
	lo, hi := 0, 3
	if s.MinItems != nil {
		lo = int(*s.MinItems)
	}
	if s.MaxItems != nil {
		hi = min(hi, int(*s.MaxItems))
	}
	if hi < lo {
		hi = lo
	}
	n := lo + g.r.IntN(hi-lo+1)
	out := make([]any, 0, n)
	for range n {
		if s.Items == nil {
			out = append(out, g.trickyString())
			continue
		}
		out = append(out, g.Value(s.Items, path+"[]"))
	}
	return out
}

func (g *Generator) str(s *Schema) any {
	minLen, maxLen := int64(0), int64(-1)
	if s.MinLength != nil {
		minLen = *s.MinLength
	}
	if s.MaxLength != nil {
		maxLen = *s.MaxLength
	}
	fits := func(v string) bool {
		return int64(len([]rune(v))) >= minLen && (maxLen < 0 || int64(len([]rune(v))) <= maxLen)
	}
	if g.chance(g.Invalid) {
		// Just outside the length bounds.
		switch {
		case maxLen >= 0 && g.r.IntN(2) == 0:
			return strings.Repeat("a", int(maxLen)+1)
		case minLen > 0:
			return strings.Repeat("a", int(minLen)-1)
		}
	}
	if s.Format == "date-time" {
		return pick(g.r, dateTimes)
	}
	if s.Pattern != "" && !g.chance(0.1) {
		c := g.pattern(s.Pattern)
		for _, rep := range []int{3, 3, 5, 8, 1, 1, 0, 0} {
			if v := matching(g.r, c.syntax, rep); c.re.MatchString(v) && fits(v) {
				return v
			}
		}
	}
	if g.chance(0.5) {
		return g.trickyString()
	}
	hi := int64(24)
	if maxLen >= 0 {
		hi = min(hi, maxLen)
	}
	lo := min(minLen, hi)
	return g.randomString(int(lo + g.r.Int64N(hi-lo+1)))
}

func (g *Generator) pattern(p string) *compiled {
	c, ok := g.patterns[p]
	if !ok {
		var err error
		c, err = compile(p)
		if err != nil {
			panic(fmt.Sprintf("schema pattern %q: %v", p, err))
		}
		g.patterns[p] = c
	}
	return c
}

func (g *Generator) randomString(n int) string {
	const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._/:@ "
	var b strings.Builder
	for range n {
		if g.chance(0.03) {
			b.WriteRune(rune(0xa0 + g.r.IntN(0x2000)))
			continue
		}
		b.WriteByte(chars[g.r.IntN(len(chars))])
	}
	return b.String()
}

func (g *Generator) integer(s *Schema) int64 {
	if s.Minimum == nil && s.Maximum == nil {
		v := pick(g.r, integers)
		if s.Format == "int32" && !g.chance(g.Invalid) {
			v = max(math.MinInt32, min(math.MaxInt32, v))
		}
		return v
	}
	lo, hi := int64(math.MinInt32), int64(math.MaxInt32)
	if s.Minimum != nil {
		lo = int64(*s.Minimum)
	}
	if s.Maximum != nil {
		hi = int64(*s.Maximum)
	}
	switch x := g.r.Float64(); {
	case x < g.Invalid*2:
		// Just outside.
		if g.r.IntN(2) == 0 {
			return lo - 1
		}
		return hi + 1
	case x < 0.25:
		if g.r.IntN(2) == 0 {
			return lo
		}
		return hi
	}
	return lo + g.r.Int64N(hi-lo+1)
}

func (g *Generator) intOrString(s *Schema, path string) any {
	if g.chance(0.3) {
		return pick(g.r, integers)
	}
	if g.chance(0.6) {
		return pick(g.r, quantities)
	}
	pat := s.Pattern
	for _, a := range s.AnyOf {
		if a.Pattern != "" {
			pat = a.Pattern
		}
	}
	if pat != "" && !g.chance(0.1) {
		c := g.pattern(pat)
		if v := matching(g.r, c.syntax, 4); c.re.MatchString(v) {
			return v
		}
	}
	return g.trickyString()
}

func (g *Generator) wrongType(t string) any {
	switch t {
	case "string":
		return pick(g.r, []any{int64(7), true, []any{"a"}, map[string]any{"a": "b"}})
	case "integer", "number":
		return pick(g.r, []any{"7", 1.5, true, nil})
	case "boolean":
		return pick(g.r, []any{"true", "yes", int64(1)})
	case "object":
		return pick(g.r, []any{"x", []any{}, int64(0)})
	case "array":
		return pick(g.r, []any{"x", map[string]any{}})
	}
	return nil
}

func (g *Generator) trickyString() string { return pick(g.r, Tricky) }

func (g *Generator) chance(p float64) bool { return g.r.Float64() < p }

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func sortedKeys(m map[string]*Schema) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Tricky are values for string fields without a pattern: durations Go
// refuses, empty, negative, overflowing, schedules, words where numbers are
// meant, template syntax, unicode.
var Tricky = []string{
	"7d", "1h", "", "-1s", "99999999999999999999h", "@every 6h", "lots",
	"0", "168h", "1.5h", "P7D", "1h30m", "1y", "0s", "300ms", "1e400",
	"ünïcödé", "日本語", "🙂", " ", "a b", "\t", "null", "true", "-", "..",
	"/", "a/b", "${HOME}", "{{ .Values.name }}", "{{", "%s%n", "' OR 1=1",
	"0x10", "NaN", "-0", "<script>", "a\x00b", "default", "x",
	strings.Repeat("z", 300),
}

// quantities are strings for x-kubernetes-int-or-string fields (resource
// quantities): plain, binary and decimal suffixes, exponents, fractions,
// and magnitudes far beyond int64.
var quantities = []any{
	"1Gi", "1e3", "0.5", "1e400", "9999999999999999999Ei", "100m", "1", "0",
	"-1Gi", "1.5Gi", ".5", "5.", "+1Gi", "1e-3", "1E3", "1Ki", "512Mi", "2",
	"123456789012345678901234567890", "0.000000001", "1e18", "8Ei", "1n",
	"1u", "1e+400", "1e-400", "1e-100000", "1e99999999999999999999", "1m", "256Mi", "4", "0.1", "1Ti", "1k",
	"1Gb", "1 Gi", "", "lots",
}

var integers = []int64{
	0, 1, -1, 2, 3, 7, 15, 60, 1000, 65535, math.MaxInt32, math.MaxInt32 + 1,
	math.MinInt32 - 1, 1 << 53, math.MaxInt64, math.MinInt64,
}

var dateTimes = []string{
	"2026-01-02T03:04:05Z", "2026-01-02T03:04:05.123456789+02:00", "1970-01-01T00:00:00Z",
	"9999-12-31T23:59:59Z", "yesterday", "", "2026-13-40T99:99:99Z",
}
