package daytwo

import (
	"context"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cacheops/cacheops/dayTwo/access"
)

// killClients drops a pod's normal client connections (not its
// replication links).
func killClients(ctx context.Context, ip string, acc access.Config) error {
	c := redisClient(ip, acc)
	defer c.Close()
	return c.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err()
}

func replicaOf(ctx context.Context, ip string, acc access.Config, host, port string) error {
	c := redisClient(ip, acc)
	defer c.Close()
	return c.Do(ctx, "REPLICAOF", host, port).Err()
}

// redisClient is a connection for one day-two command to a pod's Redis:
// no retries (a step is retried by the next reconcile, on what the pods
// report then), short timeouts.
func redisClient(ip string, acc access.Config) *redis.Client {
	return redisClientReading(ip, acc, 2*time.Second)
}

// redisClientReading is redisClient for a command that answers only after
// work of its own (MIGRATE): read waits for the answer.
func redisClientReading(ip string, acc access.Config, read time.Duration) *redis.Client {
	o := acc.Options(net.JoinHostPort(ip, "6379"))
	o.MaxRetries, o.PoolSize, o.DisableIdentity = -1, 1, true
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 2*time.Second, read, 2*time.Second
	return redis.NewClient(o)
}

// clusterReplicaClient is redisClient for reading keys on a replica of a
// sharded cluster: each connection is READONLY, or the replica would
// answer MOVED (to its master) for every key it holds.
func clusterReplicaClient(ip string, acc access.Config) *redis.Client {
	o := acc.Options(net.JoinHostPort(ip, "6379"))
	o.MaxRetries, o.PoolSize, o.DisableIdentity = -1, 1, true
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 2*time.Second, 2*time.Second, 2*time.Second
	o.OnConnect = func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }
	return redis.NewClient(o)
}
