package controller

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/examples"
	"github.com/cacheops/cacheops/renderer"
	"github.com/cacheops/cacheops/test/schemagen"
)

// The schema property tests replay with the same objects for the same seed:
// go test ./renderer/controller/ -run TestAdmitted -schemaprop.seed=7
// (or SCHEMAPROP_SEED=7); -schemaprop.n (SCHEMAPROP_N) sets how many, and
// SCHEMAPROP_DEBUG=1 logs every refusal.
var (
	schemaSeedFlag = flag.Uint64("schemaprop.seed", 0, "seed of the schema property tests (default 1, or $SCHEMAPROP_SEED)")
	schemaNFlag    = flag.Int("schemaprop.n", 0, "objects the schema property test generates (default 600, or $SCHEMAPROP_N)")
)

func schemaSeed() uint64 {
	if *schemaSeedFlag != 0 {
		return *schemaSeedFlag
	}
	if v, err := strconv.ParseUint(os.Getenv("SCHEMAPROP_SEED"), 10, 64); err == nil && v != 0 {
		return v
	}
	return 1
}

func schemaN(def int) int {
	if *schemaNFlag > 0 {
		return *schemaNFlag
	}
	if v, err := strconv.Atoi(os.Getenv("SCHEMAPROP_N")); err == nil && v > 0 {
		return v
	}
	return def
}

// logSeedOnFailure prints how to replay a failed run.
func logSeedOnFailure(t *testing.T, seed uint64) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("schema property seed %d: replay with -schemaprop.seed=%d (or SCHEMAPROP_SEED=%d)", seed, seed, seed)
		}
	})
}

func loadCRD(t testing.TB, file string) *schemagen.CRD {
	t.Helper()
	crd, err := schemagen.LoadCRD(filepath.Join(repoRoot(), "charts", "cacheops", "crds", file), cachev1alpha1.GroupVersion.Version)
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

// cacheClusterGenerator generates CacheClusters from the CRD's schema, with
// candidate values a person might write where the schema says only
// "string": durations, schedules, Redis parameters, resource names.
func cacheClusterGenerator(seed uint64) *schemagen.Generator {
	g := schemagen.New(seed)
	g.Skip["status"] = true // a create ignores status
	// Most restores are refused (one source, exactly); set it less often
	// so that enough objects are admitted.
	g.Chance["spec.restore"] = 0.07
	// A sharded layout is refused in replication mode and needed in
	// sharded mode: the parts come alone rarely (both sides of each rule);
	// shardedLayout makes a fifth of the objects consistently sharded.
	g.Chance["spec.mode"] = 0.02
	g.Values["spec.mode"] = []any{"replication", "replication", "sharded"}
	g.ValuesChance["spec.mode"] = 0.95
	g.Chance["spec.shards"] = 0.005
	g.Chance["spec.replicasPerShard"] = 0.005
	// Engine and version must name a row of the engine table together;
	// the generator picks them independently, so supported versions only
	// (redis 7.0.15 most of all) keep enough objects admitted; valkey
	// with a redis version still comes, and the validation tests refuse
	// the unsupported versions one by one.
	g.Chance["spec.engine"] = 0.05
	g.Values["spec.engine"] = []any{"redis", "valkey"}
	g.ValuesChance["spec.version"] = 1
	g.Values["spec.version"] = append(slices.Repeat([]any{"7.0.15"}, 40), "8.0.1", "6.2.14")
	g.Values["spec.image"] = []any{"redis:7.2", "valkey/valkey:8.0", "registry.example.com:5000/team/redis@sha256:" + strings.Repeat("a", 64), "Redis:LATEST", "redis 7"}
	g.Values["spec.backup.retention.maxAge"] = []any{"7d", "168h", "1h", "-1s", "0s", "99999999999999999999h", "1h30m", "P7D", "1w", "", "30m", "2562047h"}
	g.Values["spec.backup.schedule"] = []any{
		"0 3 * * *", "@daily", "@hourly", "@every 6h", "@every 1d", "@every 0s", "@every -1h", "@every 99999999999999h",
		"*/0 * * * *", "0 0 30 2 *", "61 * * * *", "59-0 * * * *", "0 0 0 0 0", "@reboot", "@", "@yearly",
		"TZ=Mars/Olympus 0 3 * * *", "CRON_TZ=UTC 0 3 * * *", "*/5 * * * *", "0 3 * * MON-FRI", "0 3 L * *", "? ? ? ? ?",
	}
	// A spread mode is one of two words; a person may misspell it.
	g.Values["spec.scheduling.spread"] = []any{"preferred", "required", "preferred", "required", "preferred", "Required"}
	g.ValuesChance["spec.scheduling.spread"] = 0.95
	// An allowed client needs a selector; most generated ones have none.
	g.Chance["spec.network.allowedClients"] = 0.05
	// TLS: durations a person writes, some wrong (renewBefore not
	// shorter than duration, too short for cert-manager), an issuer
	// sometimes (with enabled, mostly).
	g.Chance["spec.tls"] = 0.15
	g.Values["spec.tls.enabled"] = []any{true, true, true, false}
	g.ValuesChance["spec.tls.enabled"] = 1
	g.Chance["spec.tls.issuerRef"] = 0.1
	g.Values["spec.tls.duration"] = []any{"90d", "2160h", "30d", "90d", "1h", "10m", "3m"}
	g.ValuesChance["spec.tls.duration"] = 0.95
	g.Values["spec.tls.renewBefore"] = []any{"7d", "168h", "1d", "7d", "30m", "2m", "90d"}
	g.ValuesChance["spec.tls.renewBefore"] = 0.95
	g.Values["spec.tls.issuerRef.kind"] = []any{"Issuer", "ClusterIssuer", "AWSPCAClusterIssuer", "issuer"}
	g.ValuesChance["spec.tls.issuerRef.kind"] = 0.9
	g.Values["spec.tls.issuerRef.group"] = []any{"cert-manager.io", "cert-manager.io", "awspca.cert-manager.io"}
	g.ValuesChance["spec.tls.issuerRef.group"] = 0.9
	// Users: rules and rotation windows a person writes, some refused
	// (a password in the rules, a negative window).
	g.Chance["spec.users"] = 0.04
	g.Values["spec.users.previousPasswordValidFor"] = []any{"24h", "20s", "0s", "1h30m", "-1h", "720h", "3000h"}
	g.ValuesChance["spec.users.previousPasswordValidFor"] = 0.95
	g.Values["spec.users.rules"] = []any{"~app:* +@read +@write -@dangerous", "~* +@read", "", "+@all", "~app:* >secret", "on +get", "(~x +get) &ch"}
	g.ValuesChance["spec.users.rules"] = 0.9
	configValues(g)
	for _, p := range []string{"spec.resources.limits", "spec.resources.requests"} {
		g.Keys[p] = []string{"cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "example.com/gpu", "memory"}
		// Quantities whose decimal exponent makes resource.ParseQuantity
		// compute 10^|exponent| (see costlyQuantities). Only here: no CEL
		// rule parses these fields, while storage.size's rule would make
		// the API server itself do the computation.
		g.Values[p+".*"] = []any{"1e-2147483647", "1e2147483648", "1e-9999999999", "1e9999999999", "500m", "1Gi", "2"}
	}
	return g
}

// shardedLayout makes a fifth of the generated objects sharded: mode
// sharded, no replicas, a shard count and sometimes replicas per shard,
// in range (the admission tests cover the values out of range), and no
// scheduled backup or restore (not supported for sharded clusters yet).
func shardedLayout(g *schemagen.Generator, obj map[string]any) {
	r := g.Rand()
	spec, ok := obj["spec"].(map[string]any)
	if !ok || r.Float64() >= 0.2 {
		return
	}
	spec["mode"] = "sharded"
	delete(spec, "replicas")
	delete(spec, "restore")
	if backup, ok := spec["backup"].(map[string]any); ok {
		delete(backup, "enabled")
		delete(backup, "autoRestore")
	}
	spec["shards"] = []int64{3, 3, 3, 4, 4, 5, 6, 8, 16, 64}[r.IntN(10)]
	if r.Float64() < 0.4 {
		spec["replicasPerShard"] = []int64{0, 1, 1, 1, 2, 2, 3, 5}[r.IntN(8)]
	}
}

// configValues steers spec.config towards the parameters admission
// accepts (api/v1alpha1's allow-list), with values of each one's kind, in
// range and just outside, and a few parameters it refuses.
func configValues(g *schemagen.Generator) {
	keys := []string{"requirepass", "port", "loadmodule", "Maxmemory"}
	for k, kind := range cachev1alpha1.ConfigParameters {
		keys = append(keys, k)
		var valid, invalid []any
		switch kind {
		case cachev1alpha1.ConfigMemory:
			valid, invalid = []any{"100mb", "1gb", "1048576", "0", "64MB"}, []any{"16gb", "1.5gb", "lots", "-1"}
		case cachev1alpha1.ConfigBool:
			valid, invalid = []any{"yes", "no"}, []any{"YES", "true", ""}
		case cachev1alpha1.ConfigInt:
			r := cachev1alpha1.ConfigRanges[k]
			valid = []any{fmt.Sprint(r[0]), fmt.Sprint(r[1]), fmt.Sprint((r[0] + r[1]) / 2)}
			invalid = []any{fmt.Sprint(r[1] + 1), fmt.Sprint(r[0] - 1), "7d", "0x10"}
		case cachev1alpha1.ConfigEnum:
			for _, e := range cachev1alpha1.ConfigEnums[k] {
				valid = append(valid, e)
			}
			invalid = []any{"delete-everything", ""}
		default:
			valid, invalid = []any{"900 1 300 10", `""`, "KEA", "3600 1"}, []any{"normal 0 0 0", "5%", "lots", "{{ .Release.Name }}"}
		}
		// Valid values three times as often: an object is admitted only
		// if every parameter is.
		vals := append(append(append(append([]any{}, valid...), valid...), valid...), invalid...)
		g.Values["spec.config."+k] = vals
		g.ValuesChance["spec.config."+k] = 0.9
	}
	sort.Strings(keys)
	g.Keys["spec.config"] = keys
}

// objectName is a name the API server may accept for a custom resource
// (a DNS subdomain), mostly short and plain, sometimes with dots, a leading
// digit, or long, since derived names (Services, pod labels) have tighter
// rules than the CacheCluster's own.
func objectName(g *schemagen.Generator, i int) string {
	r := g.Rand()
	base := fmt.Sprintf("c%d", i)
	switch x := r.IntN(100); {
	case x < 3:
		return base + ".team.example"
	case x < 5:
		return fmt.Sprintf("%d-c", i)
	case x < 7:
		return base + "-" + strings.Repeat("n", 62-len(base)) // 63 characters
	case x < 8:
		return base + "-" + strings.Repeat("l", 200)
	case x < 9:
		return "C" + base // refused: upper case
	}
	return base
}

// schemaFailure is one property violation at one field, with the distinct
// values that showed it and the first whole input.
type schemaFailure struct {
	kind, field string
	details     []string
	input       string
	count       int
}

type failures struct {
	order []string
	byKey map[string]*schemaFailure
}

// mapKey drops the key of a map entry from a field path (resource names,
// Redis parameters), so one problem is reported once.
var mapKey = regexp.MustCompile(`\.(limits|requests|config)\..*$`)

// add records a failure; detail starts with the field path ("spec.x: ...",
// "StatefulSet.spec.replicas: ...") when it is known.
func (f *failures) add(kind, detail, input string) {
	if f.byKey == nil {
		f.byKey = map[string]*schemaFailure{}
	}
	field := ""
	if i := strings.Index(detail, ": "); i > 0 && !strings.Contains(detail[:i], " ") {
		field = mapKey.ReplaceAllString(detail[:i], ".$1.*")
	}
	key := kind + "\x00" + field
	if field == "" {
		key += "\x00" + detail
	}
	e, ok := f.byKey[key]
	if !ok {
		e = &schemaFailure{kind: kind, field: field, input: input}
		f.byKey[key] = e
		f.order = append(f.order, key)
	}
	e.count++
	if len(e.details) < 8 && !slices.Contains(e.details, detail) {
		e.details = append(e.details, detail)
	}
}

func (f *failures) report(t *testing.T) {
	t.Helper()
	for _, k := range f.order {
		e := f.byKey[k]
		where := ""
		if e.field != "" {
			where = " at " + e.field
		}
		t.Errorf("admitted objects fail %s%s (%d objects):\n  %s\n  first one: %s", e.kind, where, e.count, strings.Join(e.details, "\n  "), e.input)
	}
}

// counter counts strings and prints the most frequent.
type counter map[string]int

func (c counter) top(n int) string {
	type kv struct {
		k string
		v int
	}
	var all []kv
	for k, v := range c {
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v || (all[i].v == all[j].v && all[i].k < all[j].k) })
	var b strings.Builder
	for i, e := range all {
		if i == n {
			fmt.Fprintf(&b, "\n    ... %d more", len(all)-n)
			break
		}
		fmt.Fprintf(&b, "\n    %4d  %s", e.v, e.k)
	}
	return b.String()
}

// decoder decodes as the manager's informers do: the scheme's JSON
// serializer through a codec factory.
var decoder = serializer.NewCodecFactory(scheme).UniversalDeserializer()

// decode decodes an object as the informers do. An object that does not
// match the types decodes with its metadata only and DecodeError set (so
// that one bad object does not stop the informer); for an object the API
// server admitted under today's CRD that is a failure all the same.
func decode(u *unstructured.Unstructured) (kruntime.Object, error) {
	data, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	obj, _, err := decoder.Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	switch o := obj.(type) {
	case *cachev1alpha1.CacheCluster:
		if o.DecodeError != "" {
			return nil, errors.New(o.DecodeError)
		}
	case *cachev1alpha1.CacheBackup:
		if o.DecodeError != "" {
			return nil, errors.New(o.DecodeError)
		}
	}
	return obj, nil
}

// culprits names the fields that fail to decode on their own: each leaf of
// the object is decoded in an otherwise empty object of the same kind.
func culprits(u *unstructured.Unstructured) []string {
	var out []string
	var walk func(path []string, v any)
	walk = func(path []string, v any) {
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(append(path, k), m[k])
			}
			return
		}
		probe := &unstructured.Unstructured{Object: map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind()}}
		if err := unstructured.SetNestedField(probe.Object, kruntime.DeepCopyJSONValue(v), path...); err != nil {
			return
		}
		if _, err := decode(probe); err != nil {
			val, _ := json.Marshal(v)
			out = append(out, fmt.Sprintf("%s: %s: %v", strings.Join(path, "."), val, err))
		}
	}
	walk(nil, map[string]any{"spec": u.Object["spec"]})
	return out
}

// quantityExponent matches a quantity with a decimal exponent, e.g. 1e-9.
var quantityExponent = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)[eE]([+-]?[0-9]+)$`)

// costlyQuantities names the quantities of an object whose magnitude makes
// someone spend unbounded time and memory. resource.ParseQuantity keeps a
// decimal exponent as an int32 (1e2147483648 wraps to 1e-2147483648, and
// 1e9999999999 to 10e1410065406) and rounds a negative one by computing
// 10^|exponent|: measured here, 1e-1000000 0.15 s, 1e-10000000 3 s,
// 1e-2147483647 not done after 15 s (and gigabytes); the informer's decode
// would hang. A huge positive one decodes at once, but the API server does
// the computation when it validates the rendered StatefulSet: with
// 1e9999999999 in spec.resources.limits the dry-run apply timed out after
// 60 s, again on every retry, and the reconciler (one worker) reconciled
// no other cluster meanwhile, a valid neighbour included. Such objects are
// reported and not decoded or applied, so the test cannot hang.
func costlyQuantities(u *unstructured.Unstructured) []string {
	var out []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(path+"."+k, x[k])
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		case string:
			m := quantityExponent.FindStringSubmatch(x)
			if m == nil {
				return
			}
			e, err := strconv.ParseInt(m[3], 10, 64)
			if err != nil {
				return // ParseQuantity refuses it at once
			}
			switch w := int64(int32(e)); {
			case w < -1_000_000:
				out = append(out, fmt.Sprintf("%s: %q: resource.ParseQuantity would compute 10^%d (exponent %d as int32): the decode hangs", path, x, -w, w))
			case w > 1_000_000:
				out = append(out, fmt.Sprintf("%s: %q: decodes as a number of %d digits (exponent %d as int32): the API server times out validating the rendered StatefulSet, and the reconciler waits on it", path, x, w, w))
			}
		}
	}
	walk("spec", u.Object["spec"])
	return out
}

// discoveryCapabilities are what the manager's reconciler reads: the test
// API server's own discovery.
func discoveryCapabilities(t testing.TB) renderer.Capabilities {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(testEnv.Config)
	if err != nil {
		t.Fatal(err)
	}
	caps, err := NewDiscoveryCapabilities(dc, time.Minute).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return caps
}

// preApply runs what the day-one reconciler does with a decoded spec
// before it applies anything: the checks of checkBackup (the schedule; a
// restore from a CacheBackup, none of which exists here) and the render. It returns the rendered objects, or the
// Stalled reason and message the controller would set; a panic is
// returned as an error.
func preApply(rd *renderer.Renderer, cc *cachev1alpha1.CacheCluster, caps renderer.Capabilities) (objs []*unstructured.Unstructured, stalled *stall, panicked error) {
	defer func() {
		if p := recover(); p != nil {
			panicked = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	if cc.Spec.Backup.Enabled {
		if _, err := cachev1alpha1.ParseSchedule(cc.Spec.Backup.Schedule); err != nil {
			return nil, &stall{reason: cachev1alpha1.ReasonInvalidBackupSchedule, message: err.Error()}, nil
		}
	}
	if rs := cc.Spec.Restore; rs != nil && rs.Backup != "" && cc.Status.RestoreFrom == nil {
		// checkBackup looks the CacheBackup up; the generated ones name
		// none that exists.
		return nil, &stall{reason: cachev1alpha1.ReasonRestoreSourceNotReady, message: "no CacheBackup " + rs.Backup}, nil
	}
	objs, err := rd.Render(cc, caps)
	if err != nil {
		return nil, &stall{reason: cachev1alpha1.ReasonRenderFailed, message: err.Error()}, nil
	}
	return objs, nil, nil
}

// typedCheck converts each rendered object into its Go type, strictly, as
// server-side apply types it: a value of the wrong type (a claim name
// rendered as a number) or an unknown field is an error there that is
// neither transient nor reported as Stalled, so the cluster would retry
// forever.
func typedCheck(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		typed, err := scheme.New(o.GroupVersionKind())
		if err != nil {
			continue // a kind the scheme does not know (e.g. ServiceMonitor)
		}
		err = kruntime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, typed, true)
		if err == nil {
			continue
		}
		// The converter does not name the field; encoding/json does.
		field := o.GetKind()
		if data, jerr := json.Marshal(o.Object); jerr == nil {
			var ute *json.UnmarshalTypeError
			if jerr := json.Unmarshal(data, typed); errors.As(jerr, &ute) {
				field = fmt.Sprintf("%s.%s", o.GetKind(), ute.Field)
				err = fmt.Errorf("rendered as a JSON %s, the type wants %s", ute.Value, ute.Type)
			}
		}
		out = append(out, fmt.Sprintf("%s: %v (%s %s)", field, err, o.GetKind(), o.GetName()))
	}
	return out
}

// refusal is the API server's answer to a refused object, as a short key:
// the fields it names, or its message.
func refusal(err error) string {
	var se *apierrors.StatusError
	if errors.As(err, &se) && se.ErrStatus.Details != nil && len(se.ErrStatus.Details.Causes) > 0 {
		var fields []string
		for _, c := range se.ErrStatus.Details.Causes {
			fields = append(fields, c.Field+" ("+string(c.Type)+")")
		}
		sort.Strings(fields)
		return strings.Join(fields, ", ")
	}
	msg := err.Error()
	if len(msg) > 160 {
		msg = msg[:160] + "..."
	}
	return msg
}

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// propertyFailure is one way an admitted object breaks golden rule 0.
type propertyFailure struct{ kind, detail string }

// admittedResult is what the day-one controller would make of an admitted
// object: rendered objects, a stall, or failures of the property.
type admittedResult struct {
	objs     []*unstructured.Unstructured
	stall    *stall
	failures []propertyFailure
}

// checkAdmitted checks golden rule 0 for an object the API server
// admitted (as it returned it): it decodes as the informers decode it, and
// the reconciler's pre-apply steps render it into objects of their kinds'
// types or stall it with a reason, without a panic.
func checkAdmitted(rd *renderer.Renderer, caps renderer.Capabilities, u *unstructured.Unstructured) admittedResult {
	var res admittedResult
	fail := func(kind string, details ...string) admittedResult {
		for _, d := range details {
			res.failures = append(res.failures, propertyFailure{kind, d})
		}
		return res
	}
	if c := costlyQuantities(u); len(c) > 0 {
		return fail("decode or apply (unbounded cost, not tried here)", c...)
	}
	obj, err := decode(u)
	if err != nil {
		c := culprits(u)
		if len(c) == 0 {
			c = []string{err.Error()}
		}
		return fail("decode", c...)
	}
	cc, ok := obj.(*cachev1alpha1.CacheCluster)
	if !ok {
		return fail("decode", fmt.Sprintf("decoded into %T, not a CacheCluster", obj))
	}
	if r := cc.Spec.Backup.Retention; r != nil && r.MaxAge != nil {
		// Day-two's retention parses it; an admitted value never fails.
		if _, err := r.MaxAge.Parse(); err != nil {
			return fail("parse", fmt.Sprintf("spec.backup.retention.maxAge: %q: %v", string(*r.MaxAge), err))
		}
	}
	objs, st, panicked := preApply(rd, cc, caps)
	switch {
	case panicked != nil:
		return fail("render (panic)", panicked.Error())
	case st != nil && st.reason == "":
		return fail("render", "stalled without a reason: "+st.message)
	case st != nil:
		res.stall = st
		return res
	case len(objs) == 0:
		return fail("render", "rendered no objects and no error")
	}
	if errs := typedCheck(objs); len(errs) > 0 {
		return fail("render (object not of its kind's type)", errs...)
	}
	res.objs = objs
	return res
}

// Golden rule 0: anything the API server admits decodes into the Go types
// (as the informers decode it), and renders or stalls with a reason: never
// a decode error, never a panic. The objects come from the CRD's own schema
// and go through the real API server (dry-run creates, so nothing is
// stored); what it refuses is counted, not checked.
func TestAdmittedCacheClustersDecodeAndRender(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	seed, n := schemaSeed(), schemaN(600)
	logSeedOnFailure(t, seed)
	crd := loadCRD(t, "cache.cacheops.io_cacheclusters.yaml")
	g := cacheClusterGenerator(seed)
	caps := discoveryCapabilities(t)
	rd, err := renderer.Shared()
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	var admitted, rendered, stalled, failed int
	rejected, stalls, renderErrs := counter{}, counter{}, counter{}
	var renderInputs []string
	var bad failures
	for i := range n {
		u := &unstructured.Unstructured{Object: g.Object(crd, objectName(g, i), ns)}
		shardedLayout(g, u.Object)
		input := compactJSON(u.Object["spec"])
		sent := u.DeepCopy()
		if err := k8s.Create(ctx, u, client.DryRunAll); err != nil {
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Fatalf("the API server failed (instead of admitting or refusing) %s %s: %v\n  spec: %s", sent.GetKind(), sent.GetName(), err, input)
			}
			rejected[refusal(err)]++
			if os.Getenv("SCHEMAPROP_DEBUG") != "" {
				t.Logf("refused: %v", err)
			}
			continue
		}
		admitted++
		// The object as stored: defaults applied, unknown fields pruned.
		stored := compactJSON(u.Object["spec"])
		input = fmt.Sprintf("name %q, spec as sent %s, as admitted %s", u.GetName(), input, stored)

		res := checkAdmitted(rd, caps, u)
		switch {
		case len(res.failures) > 0:
			failed++
			for _, f := range res.failures {
				bad.add(f.kind, f.detail, input)
			}
		case res.stall != nil:
			stalled++
			stalls[res.stall.reason]++
			if res.stall.reason == cachev1alpha1.ReasonRenderFailed {
				if renderErrs[res.stall.message] == 0 {
					renderInputs = append(renderInputs, res.stall.message+"\n      "+input)
				}
				renderErrs[res.stall.message]++
			}
		default:
			rendered++
		}
	}
	t.Logf("seed %d: %d objects in %s: %d admitted (%d rendered, %d stalled, %d failed the property), %d refused",
		seed, n, time.Since(start).Round(time.Millisecond), admitted, rendered, stalled, failed, n-admitted)
	t.Logf("stalled by reason:%s", stalls.top(10))
	if len(renderErrs) > 0 {
		t.Logf("render errors (Stalled RenderFailed):%s", renderErrs.top(10))
		t.Logf("first input of each render error:\n    %s", strings.Join(renderInputs, "\n    "))
	}
	t.Logf("refused, by the fields the API server named:%s", rejected.top(15))
	bad.report(t)
	// The generator must keep exercising the operator, not only admission.
	if admitted*100 < n*30 {
		t.Errorf("only %d of %d generated objects were admitted (want at least 30%%): the generator no longer exercises the operator", admitted, n)
	}
}

// The inputs the generator found, kept as a table so that each one's fate
// is plain: refused at admission, or admitted and then decoded and rendered
// or stalled. A case passes either way; it fails only while the input is
// admitted and breaks the rule.
func TestAdmittedKnownInputs(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	caps := discoveryCapabilities(t)
	rd, err := renderer.Shared()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, spec string }{
		{"basic example", `{version: "7.0.15"}`},
		{"maxAge in days", `{version: "7.0.15", backup: {retention: {maxAge: 7d}}}`},
		{"maxAge ISO 8601", `{version: "7.0.15", backup: {retention: {maxAge: P7D}}}`},
		{"maxAge not a duration", `{version: "7.0.15", backup: {retention: {maxAge: lots}}}`},
		{"quantity with a fractional exponent", `{version: "7.0.15", resources: {limits: {cpu: "1e.5"}}}`},
		{"quantity exponent beyond int64", `{version: "7.0.15", resources: {requests: {memory: "1e99999999999999999999"}}}`},
		{"quantity exponent beyond int32", `{version: "7.0.15", resources: {limits: {memory: "1e2147483648"}}}`},
		{"quantity with a huge negative exponent", `{version: "7.0.15", resources: {requests: {cpu: "1e-2147483647"}}}`},
		{"quantity with a huge positive exponent", `{version: "7.0.15", resources: {limits: {cpu: "1e9999999999"}}}`},
		{"secret name of digits", `{version: "7.0.15", auth: {secretRef: {name: "8"}}}`},
		{"claim name of digits", `{version: "7.0.15", backup: {pvc: {claimName: "8"}}}`},
		{"credentials secret named true", `{version: "7.0.15", backup: {autoRestore: true, s3: {endpoint: s3.example.com, bucket: b1b, credentialsSecret: "true"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := map[string]any{}
			if err := yaml.Unmarshal([]byte(tt.spec), &spec); err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": cachev1alpha1.GroupVersion.String(), "kind": "CacheCluster",
				"metadata": map[string]any{"name": "known", "namespace": ns},
				"spec":     spec,
			}}
			if err := k8s.Create(ctx, u, client.DryRunAll); err != nil {
				if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
					t.Fatalf("the API server failed (instead of admitting or refusing): %v", err)
				}
				t.Logf("refused at admission: %v", err)
				return
			}
			res := checkAdmitted(rd, caps, u)
			for _, f := range res.failures {
				t.Errorf("admitted, and fails %s: %s", f.kind, f.detail)
			}
			switch {
			case res.stall != nil:
				t.Logf("admitted and Stalled %s: %s", res.stall.reason, res.stall.message)
			case len(res.failures) == 0:
				t.Logf("admitted and rendered %d objects", len(res.objs))
			}
		})
	}
}

// The same rule for CacheBackups: admitted means decodable.
func TestAdmittedCacheBackupsDecode(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	seed, n := schemaSeed(), schemaN(600)/6
	logSeedOnFailure(t, seed)
	crd := loadCRD(t, "cache.cacheops.io_cachebackups.yaml")
	g := schemagen.New(seed)
	g.Skip["status"] = true
	var admitted int
	rejected := counter{}
	var bad failures
	for i := range n {
		u := &unstructured.Unstructured{Object: g.Object(crd, objectName(g, i), ns)}
		input := compactJSON(u.Object["spec"])
		if err := k8s.Create(ctx, u, client.DryRunAll); err != nil {
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Fatalf("the API server failed (instead of admitting or refusing) %s: %v\n  spec: %s", u.GetName(), err, input)
			}
			rejected[refusal(err)]++
			continue
		}
		admitted++
		obj, err := decode(u)
		if err != nil {
			bad.add("decode", err.Error(), fmt.Sprintf("name %q, spec %s", u.GetName(), compactJSON(u.Object["spec"])))
			continue
		}
		if _, ok := obj.(*cachev1alpha1.CacheBackup); !ok {
			bad.add("decode", fmt.Sprintf("decoded into %T, not a CacheBackup", obj), input)
		}
	}
	t.Logf("seed %d: %d objects: %d admitted, %d refused:%s", seed, n, admitted, n-admitted, rejected.top(10))
	bad.report(t)
	if admitted*100 < n*30 {
		t.Errorf("only %d of %d generated objects were admitted (want at least 30%%)", admitted, n)
	}
}

// The slow layer of the same rule: a few generated objects that the API
// server admits and that decode are really created, and the manager's
// reconciler must bring each to one of two ends within 30 s: its
// objects applied (observedGeneration caught up, its StatefulSet exists and
// is controlled by it) or Stalled with a reason. A valid cluster created
// beside them still gets its StatefulSet. Objects that do not decode are
// left to the fast test above: one of them would stop the manager's
// informer for every test of this package.
func TestGeneratedCacheClustersReconcileOrStall(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	seed, want := schemaSeed(), 20
	logSeedOnFailure(t, seed)
	crd := loadCRD(t, "cache.cacheops.io_cacheclusters.yaml")
	gen := cacheClusterGenerator(seed + 1) // other objects than the fast test's

	var created []*unstructured.Unstructured
	inputs := map[string]string{}
	t.Cleanup(func() { removeAll(t, ns, created) })
	refused, undecodable := 0, 0
	for i := 0; len(created) < want && i < 40*want; i++ {
		u := &unstructured.Unstructured{Object: gen.Object(crd, objectName(gen, i), ns)}
		// A paused cluster is left alone by design; the point is what the
		// reconciler does with the rest of the spec.
		unstructured.RemoveNestedField(u.Object, "spec", "paused")
		probe := u.DeepCopy()
		if err := k8s.Create(ctx, probe, client.DryRunAll); err != nil {
			refused++
			continue
		}
		if len(costlyQuantities(probe)) > 0 {
			undecodable++
			continue
		}
		if _, err := decode(probe); err != nil {
			undecodable++
			continue
		}
		g.Expect(k8s.Create(ctx, u)).To(Succeed(), "create %s", compactJSON(u.Object))
		created = append(created, u)
		inputs[u.GetName()] = compactJSON(u.Object["spec"])
	}
	g.Expect(created).To(HaveLen(want), "too few generated objects were admitted")
	t.Logf("seed %d (generator seed %d): created %d generated CacheClusters (%d refused, %d admitted but undecodable, skipped)", seed, seed+1, len(created), refused, undecodable)

	neighbour := loadExample(t, "basic", ns)
	neighbour.Name = "neighbour"
	g.Expect(k8s.Create(ctx, neighbour)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(ctx, neighbour) })

	// A reconcile takes well under a second here; 30 s is many retries.
	const settle = 30 * time.Second
	deadline := time.Now().Add(settle)
	outcome := map[string]string{}
	for len(outcome) < len(created) && time.Now().Before(deadline) {
		for _, u := range created {
			if _, done := outcome[u.GetName()]; done {
				continue
			}
			if o := reconcileOutcome(ctx, u); o != "" {
				outcome[u.GetName()] = o
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	ends := counter{}
	for _, u := range created {
		if o, ok := outcome[u.GetName()]; ok {
			ends[o]++
			continue
		}
		cc := &cachev1alpha1.CacheCluster{}
		_ = k8s.Get(ctx, client.ObjectKeyFromObject(u), cc)
		t.Errorf("CacheCluster %s neither applied nor Stalled after %s: phase %q, observedGeneration %d of %d, conditions %s\n  spec: %s",
			u.GetName(), settle, cc.Status.Phase, cc.Status.ObservedGeneration, cc.Generation, compactJSON(cc.Status.Conditions), inputs[u.GetName()])
	}
	t.Logf("ends:%s", ends.top(10))

	g.Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "neighbour"}, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet"}})
	}, timeout, interval).Should(Succeed(), "the valid neighbour got no StatefulSet")
}

// reconcileOutcome is "applied", "Stalled: <reason>", or "" while neither.
func reconcileOutcome(ctx context.Context, u *unstructured.Unstructured) string {
	cc := &cachev1alpha1.CacheCluster{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(u), cc); err != nil {
		return ""
	}
	if c := condition(cc, cachev1alpha1.ConditionStalled); c != nil && c.Status == "True" {
		if c.Reason == "" {
			return ""
		}
		msg := c.Message
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		return "Stalled: " + c.Reason + ": " + msg
	}
	if cc.Status.ObservedGeneration != cc.Generation {
		return ""
	}
	sts := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet"}}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: cc.Name}, sts); err != nil {
		return ""
	}
	for _, ref := range sts.GetOwnerReferences() {
		if ref.UID == cc.UID && ref.Controller != nil && *ref.Controller {
			return "applied"
		}
	}
	return ""
}

// removeAll deletes the generated clusters and waits for the operator to
// let them go, so none keeps being reconciled during later tests; a
// finalizer the operator did not remove in time is removed here.
func removeAll(t *testing.T, ns string, objs []*unstructured.Unstructured) {
	ctx := context.Background()
	for _, u := range objs {
		_ = k8s.Delete(ctx, u.DeepCopy())
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, u := range objs {
		for {
			cur := u.DeepCopy()
			err := k8s.Get(ctx, client.ObjectKeyFromObject(u), cur)
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Logf("CacheCluster %s/%s still there after deletion; removing its finalizer", ns, u.GetName())
				cur.SetFinalizers(nil)
				_ = k8s.Update(ctx, cur)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// FuzzAdmittedCacheCluster mutates CacheCluster specs, starting from
// generated ones and the examples: whatever the API server admits must
// decode and render or stall. A plain `go test` runs the seeds only; fuzz
// with
//
//	go test ./renderer/controller/ -run '^$' -fuzz FuzzAdmittedCacheCluster -parallel 1
//
// (each fuzz worker starts its own API server). A mutation can reach
// storage.size with an exponent like e-2147483647, which the CRD's CEL rule
// hands to the API server's own quantity parser: watch the API server's
// CPU and memory when fuzzing for long.
func FuzzAdmittedCacheCluster(f *testing.F) {
	ctx := context.Background()
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
	ns.SetGenerateName("fuzz-")
	if err := k8s.Create(ctx, ns); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = k8s.Delete(ctx, ns) })
	crd := loadCRD(f, "cache.cacheops.io_cacheclusters.yaml")
	g := cacheClusterGenerator(schemaSeed())
	for range 30 {
		f.Add([]byte(compactJSON(g.Object(crd, "c", "ns")["spec"])))
	}
	for _, name := range []string{"basic", "production", "restore", "single"} {
		cc, err := examples.Load(name, "ns")
		if err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(compactJSON(cc.Spec)))
	}
	f.Add([]byte(`{"version":"7.0.15","backup":{"retention":{"maxAge":"7d"}}}`))
	caps := discoveryCapabilities(f)
	rd, err := renderer.Shared()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, specJSON []byte) {
		var spec map[string]any
		if err := json.Unmarshal(specJSON, &spec); err != nil || spec == nil {
			return
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": crd.APIVersion(), "kind": crd.Kind,
			"metadata": map[string]any{"name": "fuzz", "namespace": ns.GetName()},
			"spec":     spec,
		}}
		if err := k8s.Create(ctx, u, client.DryRunAll); err != nil {
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Fatalf("the API server failed (instead of admitting or refusing): %v\n  spec: %s", err, specJSON)
			}
			return
		}
		if res := checkAdmitted(rd, caps, u); len(res.failures) > 0 {
			for _, f := range res.failures {
				t.Errorf("admitted object fails %s: %s", f.kind, f.detail)
			}
			t.Fatalf("spec as admitted: %s", compactJSON(u.Object["spec"]))
		}
	})
}
