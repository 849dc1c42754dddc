package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterNode starts a real redis-server in cluster mode that serves
// slots [first, last] alone: with full coverage not required it answers
// for its own slots without the others.
func clusterNode(t *testing.T, dir string, first, last int) *redis.Client {
	t.Helper()
	rc := engineServerIn(t, "redis-server", dir, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-require-full-coverage", "no", "--appendonly", "yes", "--appenddirname", "appendonly")
	if first < 0 {
		return rc
	}
	if err := rc.ClusterAddSlotsRange(context.Background(), first, last).Err(); err != nil {
		t.Fatal(err)
	}
	// A master turns its state ok only a while after it started.
	for i := 0; !strings.Contains(rc.ClusterInfo(context.Background()).Val(), "cluster_state:ok"); i++ {
		if i > 200 {
			t.Fatal("the node never reported cluster_state:ok")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return rc
}

// servedSlots are the slots a node's own CLUSTER NODES line says it
// serves.
func servedSlots(t *testing.T, rc *redis.Client) []int {
	t.Helper()
	nodes, err := rc.ClusterNodes(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || !strings.Contains(f[2], "myself") {
			continue
		}
		for _, r := range f[8:] {
			a, b, ok := strings.Cut(r, "-")
			if !ok {
				b = a
			}
			x, _ := strconv.Atoi(a)
			y, _ := strconv.Atoi(b)
			for s := x; s <= y; s++ {
				out = append(out, s)
			}
		}
	}
	return out
}

// A sharded backup of three real cluster-mode nodes, one dump per shard
// in a folder with its manifest, restores each shard's dump into an empty
// data folder; a cluster-mode redis-server started there holds the
// shard's keys and claims exactly the slots that hold them (Redis takes
// responsibility for unassigned slots it has keys of), all inside the
// range the backup recorded. Another shard count is refused; deleting the
// backup removes the manifest first and then every shard.
func TestShardedBackupRestoresEachShardIntoAClusterNode(t *testing.T) {
	ctx := context.Background()
	ranges := [][2]int{{0, 5461}, {5462, 10922}, {10923, 16383}}
	var nodes []*redis.Client
	for _, r := range ranges {
		nodes = append(nodes, clusterNode(t, t.TempDir(), r[0], r[1]))
	}
	owner := func(slot int) int {
		for i, r := range ranges {
			if slot >= r[0] && slot <= r[1] {
				return i
			}
		}
		return -1
	}
	populated := make([]map[int]bool, 3)
	for i := range populated {
		populated[i] = map[int]bool{}
	}
	for k := range 600 {
		key := fmt.Sprintf("user:%d", k)
		slot := int(nodes[0].ClusterKeySlot(ctx, key).Val())
		i := owner(slot)
		if err := nodes[i].Set(ctx, key, k, 0).Err(); err != nil {
			t.Fatalf("SET %s on shard %d: %v", key, i, err)
		}
		populated[i][slot] = true
	}

	claim := t.TempDir()
	st := NewDirStore(claim, "pvc://backups")
	folder := ShardedFolder("prod/", "ns", "carts", "carts-1")
	if folder != "prod/ns/carts/carts-1/" {
		t.Fatalf("folder %q", folder)
	}
	m := Manifest{Cluster: "carts", Namespace: "ns", Backup: "carts-1", StartTime: time.Unix(0, 0).UTC(), EndTime: time.Unix(1, 0).UTC()}
	keys := make([]int64, 3)
	for i, rc := range nodes {
		key := folder + ShardFile(i)
		res, err := Take(ctx, Source{Addr: rc.Options().Addr, Password: "pw"}, func(ctx context.Context, r io.Reader, size int64) error {
			return st.Put(ctx, key, r, size)
		})
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = rc.DBSize(ctx).Val()
		if res.Header.Keys != keys[i] {
			t.Fatalf("shard %d: the dump holds %d keys, the node %d", i, res.Header.Keys, keys[i])
		}
		slots := []string{fmt.Sprintf("%d-%d", ranges[i][0], ranges[i][1])}
		shard := i
		if err := st.PutMetadata(ctx, key, Metadata{Keys: res.Header.Keys, Size: res.Size, Checksum: res.Checksum, Shard: &shard, Slots: slots}); err != nil {
			t.Fatal(err)
		}
		m.Shards = append(m.Shards, ShardManifest{Index: i, Slots: slots, File: ShardFile(i), Keys: res.Header.Keys, Size: res.Size, Checksum: res.Checksum})
	}
	if _, sum, err := st.PutManifest(ctx, folder, m); err != nil || !strings.HasPrefix(sum, "sha256:") {
		t.Fatalf("manifest: %s, %v", sum, err)
	}
	back, err := st.Manifest(ctx, folder)
	if err != nil || len(back.Shards) != 3 || back.Shards[1].Slots[0] != "5462-10922" {
		t.Fatalf("manifest read back: %+v, %v", back, err)
	}

	// Another shard count: refused, saying what to do; nothing restored.
	empty := t.TempDir()
	if _, err := RestoreShardInto(ctx, st, folder, 0, 4, empty, t.Logf); err == nil ||
		!strings.Contains(err.Error(), "the backup holds 3 shards and the cluster has 4") || !strings.Contains(err.Error(), "spec.shards: 3") {
		t.Fatalf("a restore into 4 shards: %v", err)
	}

	for i := range 3 {
		dir := t.TempDir()
		meta, err := RestoreShardInto(ctx, st, folder, i, 3, dir, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		if meta.Shard == nil || *meta.Shard != i || meta.Keys != keys[i] {
			t.Fatalf("shard %d's metadata: %+v", i, meta)
		}
		// The shard's first pod: a fresh cluster node on the dump.
		rc := clusterNode(t, dir, -1, -1)
		if n := rc.DBSize(ctx).Val(); n != keys[i] {
			t.Errorf("shard %d restored %d keys, want %d", i, n, keys[i])
		}
		served := servedSlots(t, rc)
		want := make([]int, 0, len(populated[i]))
		for s := range populated[i] {
			want = append(want, s)
		}
		slices.Sort(want)
		if !slices.Equal(served, want) {
			t.Errorf("shard %d's node claims %d slots, want the %d that hold its keys", i, len(served), len(want))
		}
		for _, s := range served {
			if owner(s) != i {
				t.Errorf("shard %d's node claims slot %d, outside its recorded range", i, s)
			}
		}
		// A restarted pod keeps what its folder holds.
		if m, err := RestoreShardInto(ctx, st, folder, i, 3, dir, t.Logf); err != nil || m.Checksum != "" {
			t.Errorf("a second restore of shard %d must leave the data alone: %+v, %v", i, m, err)
		}
	}

	var files []string
	for i := range 3 {
		files = append(files, ShardFile(i))
	}
	if err := st.DeleteSharded(ctx, folder, files); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Manifest(ctx, folder); !errors.Is(err, ErrNotFound) {
		t.Errorf("the manifest after the delete: %v", err)
	}
	for _, f := range files {
		if _, err := st.Get(ctx, folder+f); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s after the delete: %v", f, err)
		}
		if _, err := st.Metadata(ctx, folder+f); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s's metadata after the delete: %v", f, err)
		}
	}
	if err := st.DeleteSharded(ctx, folder, files); err != nil {
		t.Errorf("deleting what is gone: %v", err)
	}
}

func TestManifestCheck(t *testing.T) {
	for _, tt := range []struct {
		m    Manifest
		want string
	}{
		{Manifest{}, "the manifest lists no shard"},
		{Manifest{Shards: []ShardManifest{{Index: 1, File: "shard-1.rdb"}}}, "the manifest lists shard 1 at position 0"},
		{Manifest{Shards: []ShardManifest{{Index: 0, File: "../x.rdb"}}}, `the manifest names "../x.rdb" as shard 0's dump, which is not a file of its folder`},
		{Manifest{Shards: []ShardManifest{{Index: 0, File: ".hidden"}}}, `the manifest names ".hidden" as shard 0's dump, which is not a file of its folder`},
		{Manifest{Shards: []ShardManifest{{Index: 0, File: "shard-0.rdb"}}}, ""},
	} {
		err := tt.m.Check()
		if (err == nil) != (tt.want == "") || (err != nil && err.Error() != tt.want) {
			t.Errorf("Check(%+v) = %v, want %q", tt.m, err, tt.want)
		}
	}
}
