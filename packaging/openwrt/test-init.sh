#!/usr/bin/env bash
# Check what /etc/init.d/picolet asks procd to run, without OpenWrt: the rc.common / UCI /
# procd helpers are replaced by stubs that record the instance's command line.
#
#   packaging/openwrt/test-init.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pass=0 fail=0

# --- stubs of OpenWrt's functions.sh / procd.sh -------------------------------------------
declare -A UCI
load_uci_file() { # parse `option name 'value'` lines of a UCI file into UCI[]
	local key value
	UCI=()
	while read -r word key value; do
		[ "$word" = option ] || continue
		value=${value#\'}
		UCI[$key]=${value%\'}
	done <"$1"
}
config_load() { :; }
config_get() { # <var> <section> <option> [default]
	local v=${UCI[$3]-}
	[ -n "$v" ] || v=${4-}
	printf -v "$1" '%s' "$v"
}
config_get_bool() {
	config_get "$@"
	case "${!1}" in 1 | on | true | yes | enabled) printf -v "$1" 1 ;; *) printf -v "$1" 0 ;; esac
}
INSTANCES=0 CMD=() PARAMS=()
procd_open_instance() { INSTANCES=$((INSTANCES + 1)); }
procd_close_instance() { :; }
procd_set_param() {
	local k=$1
	shift
	if [ "$k" = command ]; then CMD=("$@"); else PARAMS+=("$k=$*"); fi
}
procd_append_param() { shift; CMD+=("$@"); }
procd_add_reload_trigger() { :; }
mkdir() { :; }
chmod() { :; }

# shellcheck source=packaging/openwrt/files/picolet.init
. "$here/files/picolet.init"

run() { INSTANCES=0 CMD=() PARAMS=(); start_service; }
check() { # <name> <expected> <actual>
	if [ "$2" = "$3" ]; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		printf 'FAIL %s\n  want: %s\n  got:  %s\n' "$1" "$2" "$3"
	fi
}

# 1. The shipped /etc/config/picolet: every documented default passed as a flag.
load_uci_file "$here/files/picolet.config"
run
check "default: one instance" 1 "$INSTANCES"
check "default: command" "/usr/bin/picolet run --pod-manifest-path /etc/kubernetes/manifests --container-runtime-endpoint unix:///run/containerd/containerd.sock --root-dir /var/lib/picolet --pod-log-dir /var/log/pods --image-mirror-address 127.0.0.1:10261" "${CMD[*]}"
check "default: respawn forever" "respawn=3600 5 0" "$(printf '%s\n' "${PARAMS[@]}" | grep '^respawn=')"
check "default: RUST_LOG" "env=RUST_LOG=info" "$(printf '%s\n' "${PARAMS[@]}" | grep '^env=')"

# 2. Hostname, config file, log level, archive directory set; an emptied option is not passed.
UCI[hostname_override]=edge-01
UCI[config_file]=/etc/picolet/config.yaml
UCI[log_level]=debug
UCI[pod_log_dir]=''
UCI[image_archive_dir]=/mnt/usb/images
run
check "set: command" "/usr/bin/picolet run --config /etc/picolet/config.yaml --pod-manifest-path /etc/kubernetes/manifests --container-runtime-endpoint unix:///run/containerd/containerd.sock --root-dir /var/lib/picolet --hostname-override edge-01 --image-mirror-address 127.0.0.1:10261 --image-archive-dir /mnt/usb/images" "${CMD[*]}"
check "set: RUST_LOG" "env=RUST_LOG=debug" "$(printf '%s\n' "${PARAMS[@]}" | grep '^env=')"

# 3. A value with a space stays one argument.
UCI[pod_manifest_path]='/mnt/usb/my manifests'
run
check "space: one argument" "/mnt/usb/my manifests" "${CMD[5]}"

# 4. Disabled: no instance.
UCI[enabled]=0
run
check "disabled: no instance" 0 "$INSTANCES"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
