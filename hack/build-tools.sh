#!/usr/bin/env bash
# Builds the pinned control plane (etcd, kube-apiserver,
# kube-controller-manager), kubectl and helm from hack/tools/go.mod, and the
# stamped releases of MinIO (hack/minio/releases) and mc from
# hack/minio/go.mod, into bin/. Each part does
# nothing when bin/ was already built from the same pin.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${root}/bin"
tools="${root}/hack/tools"
stamp="${bin}/.tools.sha256"

# MinIO: one compile, two links. A release is stamped the way MinIO's own
# builds are; without the stamp MinIO takes the binary's mtime as its
# release and refuses in-place updates.
build_minio() {
	local dir="${root}/hack/minio" mstamp="${bin}/.minio.sha256" pin releases r t
	pin="$(cat "${dir}/go.mod" "${dir}/go.sum" "${dir}/releases" "$0" | sha256sum | cut -d' ' -f1)"
	mapfile -t releases < <(grep '^RELEASE\.' "${dir}/releases")
	if [[ -f "${mstamp}" && "$(cat "${mstamp}")" == "${pin}" ]]; then
		local ok=yes
		for r in "${releases[@]}"; do [[ -x "${bin}/minio.${r}" ]] || ok=no; done
		[[ -x "${bin}/mc" ]] || ok=no
		[[ "${ok}" == yes ]] && return 0
	fi
	mkdir -p "${bin}"
	rm -f "${mstamp}"
	echo "building MinIO ${releases[*]} into ${bin} (the first build takes several minutes)"
	local start=$(date +%s)
	for r in "${releases[@]}"; do
		# RELEASE.2026-01-10T10-00-00Z -> 2026-01-10T10:00:00Z
		t="${r#RELEASE.}"
		t="${t:0:13}:${t:14:2}:${t:17:2}Z"
		(cd "${dir}" && CGO_ENABLED=0 go build -trimpath -o "${bin}/minio.${r}" -ldflags "-s -w \
			-X github.com/minio/minio/cmd.Version=${t} \
			-X github.com/minio/minio/cmd.ReleaseTag=${r} \
			-X github.com/minio/minio/cmd.CommitID=$(echo -n "${r}" | sha1sum | cut -d' ' -f1)" \
			github.com/minio/minio)
	done
	# mc, from the same pinned module graph (MinIO's server imports it):
	# what an administrator runs by hand (`mc admin update`).
	(cd "${dir}" && CGO_ENABLED=0 go build -trimpath -o "${bin}/mc" -ldflags "-s -w" github.com/minio/mc)
	echo "${pin}" > "${mstamp}"
	echo "MinIO built in $(( $(date +%s) - start ))s"
}
build_minio

pin="$(cat "${tools}/go.mod" "${tools}/go.sum" "${tools}/etcd/main.go" "$0" | sha256sum | cut -d' ' -f1)"
if [[ -f "${stamp}" && "$(cat "${stamp}")" == "${pin}" ]]; then
	for b in etcd kube-apiserver kube-controller-manager kubectl helm; do
		[[ -x "${bin}/${b}" ]] || { pin_ok=no; break; }
	done
	if [[ "${pin_ok:-yes}" == yes ]]; then
		exit 0
	fi
fi

kube_version="$(cd "${tools}" && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
minor="$(echo "${kube_version}" | cut -d. -f2)"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X ${pkg}.gitVersion=${kube_version} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor}"
	ldflags+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
done

mkdir -p "${bin}"
rm -f "${stamp}"
echo "building control plane ${kube_version} into ${bin} (the first build takes several minutes)"
start=$(date +%s)
cd "${tools}"
go build -trimpath -ldflags "${ldflags}" -o "${bin}/" \
	k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kubectl \
	helm.sh/helm/v3/cmd/helm
go build -trimpath -ldflags "-s -w" -o "${bin}/etcd" ./etcd
echo "${pin}" > "${stamp}"
echo "control plane built in $(( $(date +%s) - start ))s"
