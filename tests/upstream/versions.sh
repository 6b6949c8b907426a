# shellcheck shell=bash
# Pinned versions of the upstream components picolet is tested against (sourced).
# Each is a version the Go module proxy serves and Go 1.26 builds; change one here only,
# and say in the commit what changed for the tests.

# crictl (sigs.k8s.io/cri-tools): a CRI client that is not ours, used to look at the lab's
# runtime from outside. v1.35.0 is not served by the proxy; v1.37.0 is.
# shellcheck disable=SC2034  # used by build.sh
CRICTL_VERSION=v1.37.0
