package backup

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Target is where dumps go: an S3 endpoint, bucket and key prefix.
type Target struct {
	Endpoint        string
	Bucket          string
	Prefix          string
	Region          string
	AccessKeyID     string
	SecretAccessKey string
	// CA is a PEM bundle that signs the endpoint's certificate; the system
	// roots when empty.
	CA       []byte
	Insecure bool
}

// Metadata is stored as <key>.json next to each dump.
type Metadata struct {
	Cluster           string    `json:"cluster"`
	Namespace         string    `json:"namespace"`
	Backup            string    `json:"backup"`
	SourcePod         string    `json:"sourcePod"`
	RedisVersion      string    `json:"redisVersion"`
	RDBVersion        int       `json:"rdbVersion"`
	ReplicationOffset int64     `json:"replicationOffset"`
	DB                int64     `json:"db"`
	Keys              int64     `json:"keys"`
	ExpiringKeys      int64     `json:"expiringKeys"`
	Size              int64     `json:"size"`
	Checksum          string    `json:"checksum"`
	StartTime         time.Time `json:"startTime"`
	EndTime           time.Time `json:"endTime"`
	// Shard and Slots are set on a shard's dump of a sharded cluster's
	// backup: its index and the slot ranges it served.
	Shard *int     `json:"shard,omitempty"`
	Slots []string `json:"slots,omitempty"`
}

// MetadataKey is the key of a dump's metadata.
func MetadataKey(key string) string { return key + ".json" }

// ObjectKey is where a cluster's backup is stored: <prefix><namespace>/<cluster>/<backup>.rdb.
func ObjectKey(prefix, namespace, cluster, backup string) string {
	return prefix + path.Join(namespace, cluster, backup+".rdb")
}

// Store reads and writes dumps and their metadata in one place: an S3
// bucket, a folder (a mounted claim), or the backup-store pod that serves
// a claim.
type Store struct {
	o objects
	// bucket is set for S3 stores (EnsureBucket).
	s3     *minio.Client
	bucket string
}

// objects is the storage behind a Store.
type objects interface {
	put(ctx context.Context, key string, r io.Reader, size int64) error
	// get returns an error wrapping ErrNotFound when key does not exist.
	get(ctx context.Context, key string) (io.ReadCloser, error)
	// remove removes key; a missing key is no error.
	remove(ctx context.Context, key string) error
	// where names key for people: s3://bucket/key, pvc://claim/key.
	where(key string) string
}

// ErrNotFound: no dump or metadata is stored under the key.
var ErrNotFound = errors.New("not found")

// PartSize is how much of a dump is in memory at a time while uploading.
const PartSize = 16 << 20

// NewStore connects to the target (lazily: no request is made yet).
func NewStore(t Target) (*Store, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// An endpoint that stops answering fails the attempt instead of
	// holding the backup (and so the cluster's operations) forever.
	tr.ResponseHeaderTimeout = 2 * time.Minute
	if len(t.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(t.CA) {
			return nil, errors.New("the CA Secret's ca.crt holds no PEM certificate")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	region := t.Region
	if region == "" {
		region = "us-east-1"
	}
	c, err := minio.New(t.Endpoint, &minio.Options{
		Creds:     credentials.NewStaticV4(t.AccessKeyID, t.SecretAccessKey, ""),
		Secure:    !t.Insecure,
		Region:    region,
		Transport: tr,
	})
	if err != nil {
		return nil, fmt.Errorf("S3 endpoint %s: %w", t.Endpoint, err)
	}
	return &Store{o: &s3Objects{client: c, bucket: t.Bucket}, s3: c, bucket: t.Bucket}, nil
}

// Put uploads size bytes from r under key.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := s.o.put(ctx, key, r, size); err != nil {
		return fmt.Errorf("uploading %s: %w", s.o.where(key), err)
	}
	return nil
}

// PutMetadata stores a dump's metadata.
func (s *Store) PutMetadata(ctx context.Context, key string, m Metadata) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return s.Put(ctx, MetadataKey(key), bytes.NewReader(b), int64(len(b)))
}

// Metadata reads a dump's metadata.
func (s *Store) Metadata(ctx context.Context, key string) (Metadata, error) {
	var m Metadata
	obj, err := s.o.get(ctx, MetadataKey(key))
	if err != nil {
		return m, fmt.Errorf("reading %s: %w", s.o.where(MetadataKey(key)), err)
	}
	defer obj.Close()
	if err := json.NewDecoder(io.LimitReader(obj, 1<<20)).Decode(&m); err != nil {
		return m, fmt.Errorf("reading %s: %w", s.o.where(MetadataKey(key)), err)
	}
	return m, nil
}

// Get streams a dump.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	obj, err := s.o.get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", s.o.where(key), err)
	}
	return obj, nil
}

// Delete removes a dump and its metadata; a missing object is no error.
func (s *Store) Delete(ctx context.Context, key string) error {
	for _, k := range []string{key, MetadataKey(key)} {
		if err := s.o.remove(ctx, k); err != nil {
			return fmt.Errorf("removing %s: %w", s.o.where(k), err)
		}
	}
	return nil
}

// Where names a key of this store for people.
func (s *Store) Where(key string) string { return s.o.where(key) }

// s3Objects keeps dumps in a bucket.
type s3Objects struct {
	client *minio.Client
	bucket string
}

func (o *s3Objects) put(ctx context.Context, key string, r io.Reader, size int64) error {
	contentType := "application/octet-stream"
	if strings.HasSuffix(key, ".json") {
		contentType = "application/json"
	}
	_, err := o.client.PutObject(ctx, o.bucket, key, r, size, minio.PutObjectOptions{
		ContentType: contentType, PartSize: PartSize, NumThreads: 1,
	})
	return err
}

// get checks that the object exists first: minio's GetObject is lazy and
// would report a missing key only at the first read.
func (o *s3Objects) get(ctx context.Context, key string) (io.ReadCloser, error) {
	obj, err := o.client.GetObject(ctx, o.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	if _, err := obj.Stat(); err != nil {
		obj.Close()
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
		}
		return nil, err
	}
	return obj, nil
}

func (o *s3Objects) remove(ctx context.Context, key string) error {
	err := o.client.RemoveObject(ctx, o.bucket, key, minio.RemoveObjectOptions{})
	if err != nil && minio.ToErrorResponse(err).Code == "NoSuchKey" {
		return nil
	}
	return err
}

func (o *s3Objects) where(key string) string { return "s3://" + o.bucket + "/" + key }

// EnsureBucket creates the bucket when it does not exist (tests and the
// dev cluster; production buckets are made by their owners).
func (s *Store) EnsureBucket(ctx context.Context) error {
	if s.s3 == nil {
		return errors.New("not an S3 store")
	}
	ok, err := s.s3.BucketExists(ctx, s.bucket)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	return s.s3.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{})
}
