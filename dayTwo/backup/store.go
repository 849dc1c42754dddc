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
}

// MetadataKey is the key of a dump's metadata.
func MetadataKey(key string) string { return key + ".json" }

// ObjectKey is where a cluster's backup is stored: <prefix><namespace>/<cluster>/<backup>.rdb.
func ObjectKey(prefix, namespace, cluster, backup string) string {
	return prefix + path.Join(namespace, cluster, backup+".rdb")
}

// Store reads and writes dumps in one bucket.
type Store struct {
	t      Target
	client *minio.Client
}

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
	return &Store{t: t, client: c}, nil
}

// Put uploads size bytes from r under key.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	_, err := s.client.PutObject(ctx, s.t.Bucket, key, r, size, minio.PutObjectOptions{
		ContentType: "application/octet-stream", PartSize: PartSize, NumThreads: 1,
	})
	if err != nil {
		return fmt.Errorf("uploading s3://%s/%s: %w", s.t.Bucket, key, err)
	}
	return nil
}

// PutMetadata stores a dump's metadata.
func (s *Store) PutMetadata(ctx context.Context, key string, m Metadata) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	_, err = s.client.PutObject(ctx, s.t.Bucket, MetadataKey(key), bytes.NewReader(b), int64(len(b)),
		minio.PutObjectOptions{ContentType: "application/json"})
	if err != nil {
		return fmt.Errorf("uploading s3://%s/%s: %w", s.t.Bucket, MetadataKey(key), err)
	}
	return nil
}

// Metadata reads a dump's metadata.
func (s *Store) Metadata(ctx context.Context, key string) (Metadata, error) {
	var m Metadata
	obj, err := s.client.GetObject(ctx, s.t.Bucket, MetadataKey(key), minio.GetObjectOptions{})
	if err != nil {
		return m, fmt.Errorf("reading s3://%s/%s: %w", s.t.Bucket, MetadataKey(key), err)
	}
	defer obj.Close()
	if err := json.NewDecoder(io.LimitReader(obj, 1<<20)).Decode(&m); err != nil {
		return m, fmt.Errorf("reading s3://%s/%s: %w", s.t.Bucket, MetadataKey(key), err)
	}
	return m, nil
}

// Get streams a dump.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	obj, err := s.client.GetObject(ctx, s.t.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading s3://%s/%s: %w", s.t.Bucket, key, err)
	}
	return obj, nil
}

// Delete removes a dump and its metadata; a missing object is no error.
func (s *Store) Delete(ctx context.Context, key string) error {
	for _, k := range []string{key, MetadataKey(key)} {
		if err := s.client.RemoveObject(ctx, s.t.Bucket, k, minio.RemoveObjectOptions{}); err != nil {
			if minio.ToErrorResponse(err).Code == "NoSuchKey" {
				continue
			}
			return fmt.Errorf("removing s3://%s/%s: %w", s.t.Bucket, k, err)
		}
	}
	return nil
}

// EnsureBucket creates the bucket when it does not exist (tests and the
// dev cluster; production buckets are made by their owners).
func (s *Store) EnsureBucket(ctx context.Context) error {
	ok, err := s.client.BucketExists(ctx, s.t.Bucket)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	return s.client.MakeBucket(ctx, s.t.Bucket, minio.MakeBucketOptions{Region: s.t.Region})
}
