# shellcheck shell=bash
# Pinned versions of the upstream components picolet is tested against (sourced).
# Each is a version the Go module proxy serves and Go 1.26 builds; change one here only,
# and say in the commit what changed for the tests.

# crictl (sigs.k8s.io/cri-tools): a CRI client that is not ours, used to look at the lab's
# runtime from outside. v1.35.0 is not served by the proxy; v1.37.0 is.
# shellcheck disable=SC2034  # used by build.sh
CRICTL_VERSION=v1.37.0

# The lab's control plane (tests/cluster/): kube-apiserver, kube-controller-manager,
# kube-scheduler and kubectl, all from module k8s.io/kubernetes at this version; its staging
# modules (k8s.io/api, k8s.io/client-go, ...) are taken at the matching v0.MINOR.PATCH.
# v1.37.2 is the newest patch of the newest minor the proxy serves (v1.38.0-beta.0 is a
# pre-release); its go.mod says `go 1.26.0`, so Go 1.26 builds it.
# shellcheck disable=SC2034  # used by build.sh
KUBERNETES_VERSION=v1.37.2

# etcd (main package go.etcd.io/etcd/server/v3, built as `etcd`): the version the Kubernetes
# release above pins (its build/dependencies.yaml, and go.etcd.io/etcd/*/v3 in its go.mod).
# shellcheck disable=SC2034  # used by build.sh
ETCD_VERSION=v3.7.0

# ---- containerd 2.x -------------------------------------------------------------
# containerd 2.x (module github.com/containerd/containerd/v2; containerd, its runc shim and ctr
# are built from it, runc comes from Debian): the lab's second runtime (PICOLET_LAB_RUNTIME=
# containerd2). v2.4.2 is the newest patch the proxy serves; its go.mod says `go 1.26.6` and
# has no replace directives, so `go install pkg@v2.4.2` builds it with Go 1.26.
# shellcheck disable=SC2034  # used by build.sh
CONTAINERD2_VERSION=v2.4.2
# runc for the containerd 2.x lab: Debian's runc 1.1.5 has no idmapped mounts, so
# containerd 2.x cannot give pods user namespaces with it (`hostUsers: false`: runc >= 1.2).
# v1.5.3 is the newest the proxy serves (module github.com/opencontainers/runc, a program;
# `runc features` says mountExtensions.idmap enabled); built with cgo and libseccomp.
# shellcheck disable=SC2034  # used by build.sh
RUNC_VERSION=v1.5.3
# ---- end containerd 2.x ----------------------------------------------------------------------

# ---- CRI-O -------------------------------------------------------------
# CRI-O (module github.com/cri-o/cri-o, built as `crio` with its `pinns` helper): its minor
# should match KUBERNETES_VERSION's (1.37), but the Go module proxy serves no v1.37.x (checked
# 2026-12-04 with `go mod download -json github.com/cri-o/cri-o@v1.37.0` (.1, .2): "403 This
# module version is not available"; `go list -m -versions` is refused too). v1.36.3 is the
# newest patch it serves (also v1.36.1, v1.36.2, v1.35.2). One minor behind the control
# plane: move to v1.37.x when the proxy serves it. Its go.mod says `go 1.26.3` and has no
# replace directives; build.sh builds it in a build module all the same (the proxy refuses
# the version list `go install` reads), with CRI-O's pins checked.
# shellcheck disable=SC2034  # used by build.sh
CRIO_VERSION=v1.36.3
# ---- end CRI-O ---------------------------------------------------------------------------

# ---- device plugins -------------------------------------------------------------
# The sample device plugin is built from k8s.io/kubernetes at KUBERNETES_VERSION (above).
# smarter-device-manager is not served by the Go module proxy (checked 2026-12-05:
# `go list -m -versions github.com/smarter-project/smarter-device-manager` and
# gitlab.com/arm-research/smarter/smarter-device-manager: "403 This module version is not
# available"). Its stand-in exposes device nodes the same way: github.com/squat/
# generic-device-plugin, which has no tagged release; this pseudo-version is its newest commit
# the proxy serves (`go list -m -json github.com/squat/generic-device-plugin@latest`); its
# go.mod says `go 1.26.0`.
# shellcheck disable=SC2034  # used by build.sh
GENERIC_DEVICE_PLUGIN_VERSION=v0.0.0-20260515115838-2cc50b05d4d2
# ---- end device plugins ----------------------------------------------------------------------
