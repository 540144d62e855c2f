//go:build tools

// Package minio pins the MinIO server the end-to-end tests and `make run`
// update in place. hack/build-tools.sh builds it twice from this module,
// stamped as two releases. It is its own module so MinIO's dependencies never
// meet the control plane's or the operator's.
package minio

import _ "github.com/minio/minio"
