package main

// Remedies: what the user can do about a reason a library package
// reports, in terms of this operator's settings and documentation.

import (
	"github.com/object-store-operator/operator/autocert"
	"github.com/object-store-operator/operator/updates"
)

// binaryRemedy says, in the user's words, what to do about a
// BinaryAvailable reason; binsource reports the reason and the detail.
func binaryRemedy(reason string) string {
	switch reason {
	case "Unsigned":
		return "MinIO's update client installs only binaries with a valid .minisig: use an image that ships minio.minisig, or set OPERATOR_SIGNING_KEY_SECRET so the operator signs binaries of verified images with your platform key, and set MINIO_UPDATE_MINISIGN_PUBKEY on the tenant to its public key"
	case "SignatureInvalid":
		return "the .minisig was not made by a trusted key: check the image, or add its signer's public key to OPERATOR_MINISIGN_PUBKEYS"
	case "ChecksumMismatch":
		return "the bytes do not match their checksum or digest: the image or registry is corrupt or tampered with"
	case "RegistryNotTrusted":
		return "add the registry's CA to an aistor-ca-tls* Secret in the operator namespace; plain HTTP is used only for hosts in OPERATOR_INSECURE_REGISTRIES"
	case "PullTimeout":
		return "the registry did not deliver within OPERATOR_PULL_TIMEOUT; check it, or raise the timeout"
	case "ImageTooLarge":
		return "the image's layers exceed OPERATOR_PULL_MAX_BYTES"
	case "BinaryTooLarge":
		return "the binary exceeds OPERATOR_MAX_BINARY_SIZE"
	case "NoBinaryForPlatform":
		return "use an image that holds a binary for the platform of the tenant's Nodes (kubernetes.io/os, kubernetes.io/arch), check that OPERATOR_PLATFORMS lists it, or pin the tenant's pools to a platform the image has (a nodeSelector on kubernetes.io/arch)"
	case "StoreFull":
		return "delete ObjectStores (or move them to images) whose binaries the namespace no longer needs; binaries no ObjectStore references are removed after OPERATOR_STORE_UNREFERENCED_GRACE; the platform team sets OPERATOR_STORE_NAMESPACE_MAX_BYTES and OPERATOR_STORE_MAX_BYTES"
	}
	return ""
}

// updateRemedy attaches what to do to the causes the in-place updater
// reports, in the user's words.
func updateRemedy(cause string) string {
	switch cause {
	case updates.CauseConfigurationMissing:
		return "set spec.configuration.name to the Secret whose config.env exports MINIO_ROOT_USER and MINIO_ROOT_PASSWORD (and spec.updates.endpoint if MinIO is not at https://<name>-hl.<namespace>.svc:9000)"
	case updates.CauseEndpointNotAllowed:
		return "point spec.updates.endpoint at a Service of the ObjectStore's own namespace (https://<service>.<namespace>.svc:9000, or leave it empty for https://<name>-hl.<namespace>.svc.<cluster domain>:9000); " +
			"to reach MinIO elsewhere, the platform adds the host (a glob such as *.minio.example.com) or its network (a CIDR) to OPERATOR_ALLOWED_UPDATE_ENDPOINTS"
	case updates.CauseTenantUnreachable:
		return "check that MinIO's admin API answers at the endpoint and that its certificate is signed by a CA in the ObjectStore's <name>-generated Secret"
	case updates.CauseOperatorNotTrusted:
		return "the tenant must trust the upgrade server: mount the <name>-generated Secret's CAs.operator.crt into MinIO's certs/CAs and restart the pods, or give the operator a certificate (OPERATOR_CUSTOM_TLS_SECRET_NAME with ca.crt) for the host in OPERATOR_UPDATE_URL"
	case updates.CauseInPlaceRefused:
		return "MinIO's own error is above: MethodNotAllowed means MINIO_UPDATE=off on the tenant; a signature error means MINIO_UPDATE_MINISIGN_PUBKEY on the tenant does not match the key the binary is signed with; \"permission denied\" means the binary's directory is read-only in the image"
	case updates.CauseNodesNotUpdated:
		return "check the nodes' logs; OPERATOR_UPDATE_TIMEOUT bounds how long the operator waits"
	case updates.CauseBinaryUnavailable:
		return "see the ObjectStore's BinaryAvailable condition for why and what to do"
	case updates.CauseMixedPlatforms:
		return "to have it updated in place, run every pool of the tenant on one platform (a nodeSelector on kubernetes.io/arch in every pool)"
	case updates.CauseNodeOffline:
		return "bring the node back; the update starts when every node is online"
	}
	return ""
}

// certRemedy words autocert's problems in terms of this operator's
// settings (docs/tls.md, docs/troubleshooting.md).
func certRemedy(autocertSecret string) autocert.Remedy {
	return func(p autocert.Problem) string {
		switch p {
		case autocert.ProblemUntrustedCA:
			return "put the signing CA into ca.crt of the Secret named by OPERATOR_SERVING_CA_SECRET, or serve a custom " +
				"certificate (OPERATOR_AUTO_CERT_DISABLED=on, OPERATOR_CUSTOM_TLS_SECRET_NAME) signed by a CA the pods trust"
		case autocert.ProblemForeignSecret:
			return "To serve it, set OPERATOR_AUTO_CERT_DISABLED=on and OPERATOR_CUSTOM_TLS_SECRET_NAME=" + autocertSecret +
				"; to let autocert manage it, delete it"
		case autocert.ProblemCSRFailed:
			return "If the signer does not sign (not kubernetes.io/kubelet-serving-capable, EKS, or approvals are blocked), " +
				"set OPERATOR_CSR_SIGNER_NAME, or use a custom certificate: OPERATOR_AUTO_CERT_DISABLED=on and OPERATOR_CUSTOM_TLS_SECRET_NAME=<secret>"
		case autocert.ProblemAwaitingApproval:
			return "OPERATOR_AUTOCERT_APPROVE=off"
		}
		return ""
	}
}
