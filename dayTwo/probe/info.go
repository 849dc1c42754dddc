package probe

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/cacheops/cacheops/dayTwo/access"
)

// ProbeOnce asks one pod's Redis for its replication state, within the
// given timeout, on a connection of its own that it closes: a look taken
// beside the periodic probes, never waiting behind one.
func ProbeOnce(ctx context.Context, t Target, acc access.Config, timeout time.Duration) Observation {
	if t.IP == "" {
		return Observation{Pod: t.Pod, IP: t.IP, ProbedAt: time.Now(), Err: "pod has no address"}
	}
	c := newConn(t.IP, acc)
	defer c.close()
	return probe(ctx, c, t, timeout, timeout)
}

// probe sends INFO on the pod's connection and reads what the planner
// needs from the answer.
func probe(ctx context.Context, c *conn, t Target, timeout, period time.Duration) Observation {
	o := Observation{Pod: t.Pod, IP: t.IP, ProbedAt: time.Now()}
	info, err := c.do(ctx, infoCommand, timeout, period)
	if err != nil {
		o.Err = err.Error()
		if !errors.Is(err, errBackoff) && ctx.Err() == nil {
			o.MissedWait = timeout
			var ne net.Error
			o.Slow = errors.As(err, &ne) && ne.Timeout()
		}
		return o
	}
	o.Reachable, o.LastSeen = true, time.Now()
	parseInfo(info, &o)
	if t.Cluster && !o.Loading {
		if o.Cluster, err = probeCluster(ctx, c, timeout, period); err != nil {
			o.Err = err.Error()
		}
	}
	return o
}

// ParseInfo reads an INFO reply as a probe does: role, replication offset
// (master_repl_offset on a master, slave_repl_offset on a replica), keys.
func ParseInfo(info string) Observation {
	var o Observation
	parseInfo(info, &o)
	return o
}

// parseInfo reads the fields of INFO the planner needs. The strings it
// keeps are slices of info: parsing allocates nothing.
func parseInfo(info string, o *Observation) {
	o.MasterLastIOSeconds = -1
	for rest := info; rest != ""; {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		parseField(k, v, o)
	}
}

func parseField(k, v string, o *Observation) {
	switch {
	case k == "role":
		o.Role = v
	case k == "master_host":
		o.MasterHost = v
	case k == "master_link_status":
		o.MasterLinkUp = v == "up"
	case k == "connected_slaves":
		o.ConnectedReplicas, _ = strconv.Atoi(v)
	case k == "master_replid":
		o.ReplID = v
	case k == "master_replid2":
		o.ReplID2 = v
	case k == "second_repl_offset":
		o.SecondReplOffset, _ = strconv.ParseInt(v, 10, 64)
	case k == "master_last_io_seconds_ago":
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			o.MasterLastIOSeconds = n
		}
	case k == "master_link_down_since_seconds":
		o.LinkDownSeconds, _ = strconv.ParseInt(v, 10, 64)
	case k == "used_memory":
		o.UsedMemory, _ = strconv.ParseInt(v, 10, 64)
	case k == "maxmemory":
		o.MaxMemory, _ = strconv.ParseInt(v, 10, 64)
	case k == "master_failover_state":
		o.FailoverState = v
	case k == "loading":
		o.Loading = v == "1"
	case k == "rdb_bgsave_in_progress":
		o.Saving = v == "1"
	case k == "aof_rewrite_in_progress":
		o.Rewriting = v == "1"
	case k == "run_id":
		o.RunID = v
	case k == "uptime_in_seconds":
		o.UptimeSeconds, _ = strconv.ParseInt(v, 10, 64)
	case k == "master_repl_offset" && o.Role != "slave":
		o.Offset, _ = strconv.ParseInt(v, 10, 64)
	case k == "slave_repl_offset":
		o.Offset, _ = strconv.ParseInt(v, 10, 64)
	case strings.HasPrefix(k, "db"):
		// db0:keys=3,expires=0,avg_ttl=0
		for part := range strings.SplitSeq(v, ",") {
			if n, ok := strings.CutPrefix(part, "keys="); ok {
				keys, _ := strconv.ParseInt(n, 10, 64)
				o.Keys += keys
			}
		}
	}
}
