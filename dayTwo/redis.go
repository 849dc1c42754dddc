package daytwo

import (
	"context"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// killClients drops a pod's normal client connections (not its
// replication links).
func killClients(ctx context.Context, ip, password string) error {
	c := redisClient(ip, password)
	defer c.Close()
	return c.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err()
}

func replicaOf(ctx context.Context, ip, password, host, port string) error {
	c := redisClient(ip, password)
	defer c.Close()
	return c.Do(ctx, "REPLICAOF", host, port).Err()
}

// redisClient is a connection for one day-two command to a pod's Redis:
// no retries (a step is retried by the next reconcile, on what the pods
// report then), short timeouts.
func redisClient(ip, password string) *redis.Client {
	return redisClientReading(ip, password, 2*time.Second)
}

// redisClientReading is redisClient for a command that answers only after
// work of its own (MIGRATE): read waits for the answer.
func redisClientReading(ip, password string, read time.Duration) *redis.Client {
	return redis.NewClient(redisOptions(ip, password, read))
}

// clusterReplicaClient is redisClient for reading keys on a replica of a
// sharded cluster: each connection is READONLY, or the replica would
// answer MOVED (to its master) for every key it holds.
func clusterReplicaClient(ip, password string) *redis.Client {
	opts := redisOptions(ip, password, 2*time.Second)
	opts.OnConnect = func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }
	return redis.NewClient(opts)
}

func redisOptions(ip, password string, read time.Duration) *redis.Options {
	return &redis.Options{Addr: net.JoinHostPort(ip, "6379"), Password: password, MaxRetries: -1, PoolSize: 1, DisableIdentity: true,
		DialTimeout: 2 * time.Second, ReadTimeout: read, WriteTimeout: 2 * time.Second}
}
