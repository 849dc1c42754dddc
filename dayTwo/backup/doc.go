// Package backup takes consistent Redis dumps and stores them in an
// S3-compatible bucket, and puts them back into a data directory before
// redis-server starts.
//
// A dump is taken the way a new replica gets its first copy (and the way
// `redis-cli --rdb` does): SYNC on a connection to the source makes it fork
// and write an RDB snapshot, which is streamed to the bucket as it arrives,
// never held in memory as a whole. The RDB header gives the metadata (Redis
// version, replication offset, keys) stored next to the dump.
package backup
