package main

import (
	"context"
	"fmt"
	"os"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// replicaIdentity names this replica in its leader Lease and its
// install's claim. Replicas may share a host name outside Kubernetes; the
// suffix keeps identities apart.
func replicaIdentity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("replica identity: %w", err)
	}
	return host + "_" + string(uuid.NewUUID()), nil
}

// leaseName is the Lease replicas compete for.
const leaseName = "object-store-operator"

// runAsLeader runs fn whenever this replica leads, until ctx ends. Only
// the leader files CSRs and writes Secrets; every replica serves.
func runAsLeader(ctx context.Context, cfg config, cs kubernetes.Interface, identity string, log zerolog.Logger, fn func(context.Context) error) error {
	if !cfg.leaderElection {
		return fn(ctx)
	}
	log = log.With().Str("component", "leader").Str("lease", cfg.namespace+"/"+leaseName).Str("identity", identity).Logger()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.namespace, Name: leaseName},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	for ctx.Err() == nil {
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   cfg.leaseDuration,
			RenewDeadline:   cfg.renewDeadline,
			RetryPeriod:     cfg.retryPeriod,
			ReleaseOnCancel: true,
			Name:            leaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					log.Info().Msg("became leader: issuing and renewing certificates")
					if err := fn(ctx); err != nil {
						log.Error().Err(err).Msg("leader work stopped")
					}
				},
				OnStoppedLeading: func() { log.Info().Msg("no longer leader: serving only") },
				OnNewLeader: func(id string) {
					if id != identity {
						log.Info().Str("leader", id).Msg("another replica leads")
					}
				},
			},
		})
		if err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
		elector.Run(ctx)
	}
	return nil
}
