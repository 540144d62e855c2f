package main

import (
	_ "github.com/gorilla/mux"
	_ "github.com/minio/pkg/v3/certs"
	_ "github.com/minio/pkg/v3/env"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/rs/zerolog"
	_ "github.com/stretchr/testify/require"
	_ "k8s.io/client-go/kubernetes"
	_ "github.com/fsnotify/fsnotify"
)

func main() {}
