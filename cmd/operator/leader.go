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

	"github.com/object-store-operator/operator/internal/controller"
)

// replicaIdentity names this replica in its leader Lease. Replicas may share a host name outside Kubernetes; the
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

// leaderElector is client-go's leader election as the Manager's Elector:
// it runs lead for each term this replica wins, until ctx ends; nil with
// leader election off (one replica, always leading).
func leaderElector(cfg config, cs kubernetes.Interface, identity string, log zerolog.Logger) controller.Elector {
	if !cfg.leaderElection {
		return nil
	}
	log = log.With().Str("component", "leader").Str("lease", cfg.namespace+"/"+leaseName).Str("identity", identity).Logger()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.namespace, Name: leaseName},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	return func(ctx context.Context, lead func(context.Context)) error {
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
						lead(ctx)
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
}
