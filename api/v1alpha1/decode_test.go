package v1alpha1

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// decoder decodes as client-go and controller-runtime's informers do.
func decoder(t *testing.T) runtime.Decoder {
	t.Helper()
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return serializer.NewCodecFactory(s).UniversalDeserializer()
}

func TestAnUndecodableObjectKeepsItsMetadataAndSaysWhy(t *testing.T) {
	dec := decoder(t)
	list := `{"apiVersion":"cache.cacheops.io/v1alpha1","kind":"CacheClusterList","metadata":{},"items":[
		{"apiVersion":"cache.cacheops.io/v1alpha1","kind":"CacheCluster","metadata":{"name":"good","namespace":"a","uid":"1"},"spec":{"version":"7.0.15","replicas":3}},
		{"apiVersion":"cache.cacheops.io/v1alpha1","kind":"CacheCluster","metadata":{"name":"bad","namespace":"b","uid":"2","finalizers":["cache.cacheops.io/finalizer"]},"spec":{"version":"7.0.15","replicas":"three"}}]}`
	obj, _, err := dec.Decode([]byte(list), nil, nil)
	if err != nil {
		t.Fatalf("one bad item must not fail the list: %v", err)
	}
	items := obj.(*CacheClusterList).Items
	if len(items) != 2 {
		t.Fatalf("got %d items, want 2", len(items))
	}
	good, bad := items[0], items[1]
	if good.DecodeError != "" || good.DesiredReplicas() != 3 {
		t.Errorf("the good item: DecodeError %q, replicas %d", good.DecodeError, good.DesiredReplicas())
	}
	if bad.Name != "bad" || bad.Namespace != "b" || string(bad.UID) != "2" || len(bad.Finalizers) != 1 {
		t.Errorf("the bad item lost its metadata: %+v", bad.ObjectMeta)
	}
	if !strings.Contains(bad.DecodeError, "spec.replicas") || bad.Spec.Version != "" {
		t.Errorf("the bad item: DecodeError %q (must name spec.replicas), spec %+v (must be empty)", bad.DecodeError, bad.Spec)
	}

	backup := `{"apiVersion":"cache.cacheops.io/v1alpha1","kind":"CacheBackup","metadata":{"name":"b1"},"spec":{"cluster":"x"},"status":{"size":"big"}}`
	obj, _, err = dec.Decode([]byte(backup), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cb := obj.(*CacheBackup); cb.Name != "b1" || !strings.Contains(cb.DecodeError, "status.size") {
		t.Errorf("CacheBackup: name %q, DecodeError %q", cb.Name, cb.DecodeError)
	}
}

func TestDurationParse(t *testing.T) {
	tests := []struct {
		given   Duration
		want    time.Duration
		wantErr bool
	}{
		{given: "7d", want: 7 * 24 * time.Hour},
		{given: "168h", want: 168 * time.Hour},
		{given: "1d12h", want: 36 * time.Hour},
		{given: "90m", want: 90 * time.Minute},
		{given: "1h30m15s", want: time.Hour + 30*time.Minute + 15*time.Second},
		{given: "9999d999999h9999999m99999999s", want: 9999*24*time.Hour + 999999*time.Hour + 9999999*time.Minute + 99999999*time.Second},
		{given: "", wantErr: true},
		{given: "0h", wantErr: true},
		{given: "7 days", wantErr: true},
		{given: "1.5h", wantErr: true},
		{given: "12h7d", wantErr: true},
		{given: "-1h", wantErr: true},
	}
	for _, tt := range tests {
		got, err := tt.given.Parse()
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("Duration(%q).Parse() = %v, %v; want %v, error %v", tt.given, got, err, tt.want, tt.wantErr)
		}
	}
}
