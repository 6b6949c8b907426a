#!/usr/bin/env bash
# The emulated ARM board: an arm64 Debian bookworm system with systemd as PID 1,
# cgroup v2, containerd, runc and the CNI plugins, booted by qemu-system-aarch64 (TCG).
# What needs systemd or cgroup v2 — which the CI machines (cgroup v1, no systemd) lack — is
# tested on it.
#
#   tests/board/board.sh build [DIR]          rootfs (cached), kernel, initrd, disk image
#   tests/board/board.sh up [DIR]             boot, wait until ssh answers
#   tests/board/board.sh down [DIR]           power cut if running, remove run files (keeps images)
#   tests/board/board.sh clean [DIR]          down, then remove DIR entirely (the cache too)
#   tests/board/board.sh ssh [DIR]            interactive shell in the guest
#   tests/board/board.sh run CMD [DIR]        CMD (one shell string) in the guest: its output, its exit code
#   tests/board/board.sh copy-in SRC DST [DIR]  a host file or directory to the guest path DST
#   tests/board/board.sh reboot [DIR]         `systemctl reboot` in the guest, wait for the new boot
#   tests/board/board.sh poweroff [DIR]       `systemctl poweroff` in the guest, wait for qemu to exit
#   tests/board/board.sh kill [DIR]           power cut: qemu quits, the guest gets no shutdown
#   tests/board/board.sh status [DIR]         up / down, and the ssh port
#   tests/board/board.sh images [DIR]         import localhost/busybox:edge and localhost/pause:edge
#                                             (tests/e2e/mkimage.py) into the guest's containerd
#
# DIR defaults to $BOARD_DIR, else /tmp/board. Environment:
#   BOARD_CGROUP=v2|v1     kernel cmdline systemd.unified_cgroup_hierarchy=1|0 (at `up`; default v2)
#   BOARD_CPU=cortex-a53   qemu -cpu (`max` also works, slower under TCG)
#   BOARD_SMP=2 BOARD_MEM=1024
#   BOARD_RTC_BASE=        qemu -rtc base=… (e.g. 2000-01-01: a board whose clock is wrong)
#   BOARD_GUESTFWD=        qemu user-net guestfwd rules, space-separated (e.g.
#                          tcp:10.0.2.100:6443-cmd:socat - TCP:127.0.0.1:6443 — the one way out
#                          of restrict=on, to a server of the host's; spaces inside a rule as
#                          %20)
#   BOARD_BOOT_TIMEOUT=900 seconds `up`/`reboot` wait for ssh (polling)
#   BOARD_SETTLE=1         `up`/`reboot` then wait for the boot to settle (is-system-running
#                          --wait, 10 min at most); 0: return as soon as ssh answers
#   BOARD_DISK_SIZE=4G     size of the raw ext4 disk image (sparse)
#   BOARD_MIRROR=http://deb.debian.org/debian
#
# The host directory DIR/share is the guest's /mnt/share (qemu -virtfs, 9p over virtio,
# mount_tag board-share, security_model=none: files written by the guest's root are the
# host's root's): what the guest writes there is on the host at once, even if the guest
# loses its power right after.
#
# Files in DIR: rootfs/ (the cached tree), rootfs.key (what it was built from), vmlinuz,
# initrd.img, disk.img (ext4, raw), id_ed25519 (the driver's ssh key), env (SSH_PORT=, the
# cmdline), share/ (the guest's /mnt/share), qemu.pid, console.log (serial console, appended across boots), console.sock
# (the serial console, interactive), monitor.sock (qemu's human monitor).
#
# Building needs root (mmdebstrap's root mode, mkfs.ext4 -d keeps owners) and Debian
# packages only: mmdebstrap, arch-test, qemu-user-static, qemu-system-arm, qemu-utils,
# e2fsprogs (installed when missing). The arm64 second stage runs under qemu-aarch64-static:
# when no binfmt_misc handler for aarch64 is registered, build registers one of its own
# (`picolet-board-aarch64`) for the time of mmdebstrap and removes it after.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/../.." && pwd)
SUITE=bookworm
MIRROR=${BOARD_MIRROR:-http://deb.debian.org/debian}

# The guest's packages (Debian's, nothing else). minbase + these, no Recommends.
PACKAGES=(
	systemd systemd-sysv udev dbus kmod
	linux-image-arm64 initramfs-tools e2fsprogs
	iproute2 procps openssh-server openssh-sftp-server
	containerd runc containernetworking-plugins busybox-static
)

log() { printf '==> board: %s\n' "$*" >&2; }
die() {
	printf 'error: board: %s\n' "$*" >&2
	exit 1
}

now() { date +%s; }

# ---- DIR and its files -------------------------------------------------------------------

set_dir() {
	DIR=${1:-${BOARD_DIR:-/tmp/board}}
	case "$DIR" in /*) ;; *) DIR="$PWD/$DIR" ;; esac
	ROOTFS="$DIR/rootfs"
	KEY="$DIR/id_ed25519"
	DISK="$DIR/disk.img"
	PIDFILE="$DIR/qemu.pid"
	ENVFILE="$DIR/env"
	MONITOR="$DIR/monitor.sock"
	CONSOLE_SOCK="$DIR/console.sock"
	CONSOLE_LOG="$DIR/console.log"
}

qemu_pid() {
	local pid
	[ -f "$PIDFILE" ] || return 1
	pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
	[ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
	# Only our qemu: the pid file could be stale and the number reused.
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$PIDFILE" || return 1
	[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ] || return 1
	echo "$pid"
}

ssh_port() {
	[ -f "$ENVFILE" ] || die "no $ENVFILE: the board is not up ('$0 up $DIR')"
	awk -F= '$1 == "SSH_PORT" {print $2}' "$ENVFILE"
}

ssh_opts() {
	SSH_OPTS=(-i "$KEY" -o BatchMode=yes -o StrictHostKeyChecking=no
		-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=20
		-o ServerAliveInterval=15 -o ServerAliveCountMax=8)
}

# guest CMD: run a shell string in the guest; ssh's exit code (255: no connection).
guest() {
	local port
	port=$(ssh_port)
	ssh_opts
	ssh "${SSH_OPTS[@]}" -p "$port" root@127.0.0.1 -- "$1"
}

# A free TCP port on the loopback (the kernel picks it; qemu binds it right after).
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ---- build -------------------------------------------------------------------------------

apt_ensure() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	log "apt-get install ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# binfmt_misc handler for aarch64 ELF (the magic/mask qemu's own scripts register).
BINFMT_NAME=picolet-board-aarch64
BINFMT_MAGIC='\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
BINFMT_MASK='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
BINFMT_MOUNTED=0
BINFMT_OURS=0

binfmt_ensure() {
	local d=/proc/sys/fs/binfmt_misc f
	if [ ! -e "$d/register" ]; then
		mount -t binfmt_misc binfmt_misc "$d" || die "cannot mount binfmt_misc on $d"
		BINFMT_MOUNTED=1
	fi
	for f in "$d"/*; do
		[ -f "$f" ] || continue
		case "$f" in */register | */status) continue ;; esac
		if grep -qx enabled "$f" && grep -q '^magic 7f454c460201010000000000000000000200b700' "$f"; then
			log "binfmt: aarch64 handler ${f##*/} already registered"
			return 0
		fi
	done
	# F: the kernel opens the interpreter now, so it need not exist inside the chroot.
	printf ':%s:M::%s:%s:%s:F\n' "$BINFMT_NAME" "$BINFMT_MAGIC" "$BINFMT_MASK" \
		"$(command -v qemu-aarch64-static)" >"$d/register"
	BINFMT_OURS=1
	log "binfmt: registered $BINFMT_NAME (removed after the build)"
}

binfmt_release() {
	local d=/proc/sys/fs/binfmt_misc
	if [ "$BINFMT_OURS" -eq 1 ] && [ -e "$d/$BINFMT_NAME" ]; then
		echo -1 >"$d/$BINFMT_NAME" || true
	fi
	if [ "$BINFMT_MOUNTED" -eq 1 ]; then
		umount "$d" 2>/dev/null || true
	fi
}

# What the cached rootfs is made from: a new package list, suite or mirror rebuilds it.
rootfs_key() {
	{
		printf '%s\n' "recipe 2" "$SUITE" "$MIRROR" "${PACKAGES[@]}"
		cat "$SCRIPT_DIR/initramfs-tools/conf.d/board" "$SCRIPT_DIR/initramfs-tools/hooks/board" \
			"$SCRIPT_DIR/overlay/etc/fstab"
	} | sha256sum | cut -c1-16
}

build_rootfs() {
	local key start
	key=$(rootfs_key)
	if [ -d "$ROOTFS" ] && [ "$(cat "$DIR/rootfs.key" 2>/dev/null)" = "$key" ]; then
		log "rootfs cached ($ROOTFS, key $key)"
		return 0
	fi
	rm -rf "$ROOTFS" "$ROOTFS.new" "$DIR/rootfs.key"
	binfmt_ensure
	trap binfmt_release EXIT
	start=$(now)
	log "mmdebstrap arm64 $SUITE (${#PACKAGES[@]} packages + minbase) into $ROOTFS"
	local pkgs
	pkgs=$(
		IFS=,
		echo "${PACKAGES[*]}"
	)
	# Before the kernel is installed (essential hook): the initramfs is made for the virt
	# machine only (tests/board/initramfs-tools), and with the board's fstab, so that its
	# fsck hook puts e2fsck into it (the root file system is checked after a power cut).
	# Man pages and translations are not needed on the board; docs stay (dpkg would also
	# drop picolet's /usr/share/doc/picolet, which the package checks look at).
	nice -n 10 mmdebstrap --mode=root --arch=arm64 --variant=minbase \
		--include="$pkgs" \
		--aptopt='Acquire::Languages "none"' \
		--essential-hook="mkdir -p \"\$1/etc/initramfs-tools\" && cp -a '$SCRIPT_DIR/initramfs-tools/.' \"\$1/etc/initramfs-tools/\"" \
		--essential-hook="cp '$SCRIPT_DIR/overlay/etc/fstab' \"\$1/etc/fstab\"" \
		--dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		"$SUITE" "$ROOTFS.new" \
		"deb $MIRROR $SUITE main" \
		"deb $MIRROR $SUITE-updates main" \
		"deb ${MIRROR%/debian}/debian-security $SUITE-security main" \
		>"$DIR/mmdebstrap.log" 2>&1 ||
		{
			tail -n 30 "$DIR/mmdebstrap.log" >&2
			die "mmdebstrap failed (log: $DIR/mmdebstrap.log)"
		}
	binfmt_release
	trap - EXIT
	mv "$ROOTFS.new" "$ROOTFS"
	echo "$key" >"$DIR/rootfs.key"
	log "rootfs built in $(($(now) - start)) s ($(du -sh "$ROOTFS" | cut -f1))"
}

# The board's own settings, written into the (cached) rootfs on every build: cheap, and a
# changed overlay needs no new mmdebstrap run.
configure_rootfs() {
	cp -a "$SCRIPT_DIR/overlay/." "$ROOTFS/"
	install -d -m 0700 "$ROOTFS/root/.ssh"
	install -m 0600 "$KEY.pub" "$ROOTFS/root/.ssh/authorized_keys"
	# systemctl --root works on the tree from the host (no chroot, no systemd running).
	# ssh and containerd are enabled by their packages (and have SysV scripts, which
	# systemctl would sync through a chroot: not from the host without binfmt).
	# A board has no display: the serial getty on ttyAMA0 comes from the console= argument.
	# apt's daily timers would only fail (the board reaches no mirror).
	local out
	out=$(systemctl --root="$ROOTFS" enable systemd-networkd.service mnt-share.mount 2>&1 &&
		systemctl --root="$ROOTFS" mask getty@tty1.service apt-daily.timer \
			apt-daily-upgrade.timer 2>&1) || die "systemctl --root: $out"
	# The machine id is made at first boot (each disk built is a new machine).
	: >"$ROOTFS/etc/machine-id"
	rm -f "$ROOTFS/var/lib/dbus/machine-id"
}

cmd_build() {
	local start kernel initrd
	[ "$(id -u)" -eq 0 ] || die "build needs root"
	! qemu_pid >/dev/null || die "the board in $DIR is running: '$0 down $DIR' first"
	start=$(now)
	mkdir -p "$DIR"
	apt_ensure mmdebstrap arch-test qemu-user-static qemu-system-arm qemu-utils e2fsprogs openssh-client
	[ -f "$KEY" ] || ssh-keygen -q -t ed25519 -N '' -C "picolet-board" -f "$KEY"
	build_rootfs
	configure_rootfs

	kernel=$(find "$ROOTFS/boot" -maxdepth 1 -name 'vmlinuz-*' | sort -V | tail -n 1)
	initrd=$(find "$ROOTFS/boot" -maxdepth 1 -name 'initrd.img-*' | sort -V | tail -n 1)
	{ [ -n "$kernel" ] && [ -n "$initrd" ]; } || die "no kernel or initrd in $ROOTFS/boot"
	cp "$kernel" "$DIR/vmlinuz"
	cp "$initrd" "$DIR/initrd.img"
	echo "${kernel##*/vmlinuz-}" >"$DIR/kernel.version"

	log "disk image $DISK (${BOARD_DISK_SIZE:-4G}, ext4 from $ROOTFS)"
	rm -f "$DISK"
	truncate -s "${BOARD_DISK_SIZE:-4G}" "$DISK"
	mkfs.ext4 -q -F -L board-root -d "$ROOTFS" "$DISK"
	log "built in $(($(now) - start)) s: kernel $(cat "$DIR/kernel.version"), disk $(du -h "$DISK" | cut -f1) used of $(du -h --apparent-size "$DISK" | cut -f1)"
}

# ---- up / down ---------------------------------------------------------------------------

cmdline() {
	local cg=1
	case "${BOARD_CGROUP:-v2}" in
	v2) cg=1 ;;
	v1) cg=0 ;;
	*) die "BOARD_CGROUP must be v1 or v2" ;;
	esac
	echo "root=/dev/vda ro console=ttyAMA0 systemd.unified_cgroup_hierarchy=$cg net.ifnames=0"
}

# wait_ssh DEADLINE_EPOCH [NOT_BOOT_ID]: poll until the guest answers over ssh (and, when
# given, with another boot id than NOT_BOOT_ID); fails when qemu exits or the deadline passes.
wait_ssh() {
	local deadline=$1 not=${2:-} id
	while :; do
		qemu_pid >/dev/null || {
			tail -n 30 "$CONSOLE_LOG" >&2 || true
			die "qemu exited (console: $CONSOLE_LOG)"
		}
		if id=$(guest 'cat /proc/sys/kernel/random/boot_id' 2>/dev/null) && [ -n "$id" ] && [ "$id" != "$not" ]; then
			# systemd still starting is fine for ssh, but wait for the boot to settle so that
			# callers see every unit that starts at boot started (or failed).
			# (A unit that never finishes starting must not hang the driver: 10 min at most.)
			if [ "${BOARD_SETTLE:-1}" = 1 ]; then
				guest 'timeout 600 systemctl is-system-running --wait >/dev/null 2>&1; true' || true
			fi
			return 0
		fi
		[ "$(now)" -lt "$deadline" ] || {
			tail -n 30 "$CONSOLE_LOG" >&2 || true
			die "the guest did not answer over ssh in time (console: $CONSOLE_LOG)"
		}
		sleep 3
	done
}

cmd_up() {
	local start port pid rtc=()
	{ [ -f "$DISK" ] && [ -f "$DIR/vmlinuz" ]; } || die "no board in $DIR: '$0 build $DIR' first"
	if pid=$(qemu_pid); then
		log "already up (qemu pid $pid, ssh port $(ssh_port))"
		return 0
	fi
	rm -f "$MONITOR" "$CONSOLE_SOCK" "$PIDFILE"
	mkdir -p "$DIR/share"
	port=$(free_port)
	printf 'SSH_PORT=%s\nCMDLINE=%q\n' "$port" "$(cmdline)" >"$ENVFILE"
	[ -z "${BOARD_RTC_BASE:-}" ] || rtc=(-rtc "base=$BOARD_RTC_BASE")
	local fwd="" rule
	for rule in ${BOARD_GUESTFWD:-}; do
		fwd+=",guestfwd=${rule//%20/ }"
	done
	printf '\n==== board.sh up %s ====\n' "$(date -u +%FT%TZ)" >>"$CONSOLE_LOG"
	start=$(now)
	# user-mode networking with restrict=on: the guest reaches nothing (no server, not the
	# host) except through the ssh forward. i6300esb: a watchdog device for systemd's
	# RuntimeWatchdogSec (a watchdog timeout resets the board).
	nice -n 10 qemu-system-aarch64 \
		-M virt -cpu "${BOARD_CPU:-cortex-a53}" -smp "${BOARD_SMP:-2}" -m "${BOARD_MEM:-1024}" \
		-accel tcg,thread=multi \
		-kernel "$DIR/vmlinuz" -initrd "$DIR/initrd.img" -append "$(cmdline)" \
		-drive "file=$DISK,format=raw,if=none,id=disk0,cache=writeback" \
		-device virtio-blk-pci,drive=disk0 \
		-netdev "user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:$port-:22$fwd" \
		-device virtio-net-pci,netdev=net0,romfile= \
		-device virtio-rng-pci \
		-virtfs "local,path=$DIR/share,mount_tag=board-share,security_model=none,id=share0" \
		-device i6300esb -action watchdog=reset \
		"${rtc[@]}" \
		-chardev "socket,id=con0,path=$CONSOLE_SOCK,server=on,wait=off,logfile=$CONSOLE_LOG,logappend=on" \
		-serial chardev:con0 \
		-monitor "unix:$MONITOR,server=on,wait=off" \
		-display none -daemonize -pidfile "$PIDFILE" ||
		die "qemu-system-aarch64 failed to start"
	log "qemu started (pid $(cat "$PIDFILE"), ssh port $port); waiting for the guest"
	wait_ssh $((start + ${BOARD_BOOT_TIMEOUT:-900}))
	log "up in $(($(now) - start)) s (ssh port $port, cgroup ${BOARD_CGROUP:-v2})"
}

# wait_exit DEADLINE: poll until our qemu is gone.
wait_exit() {
	local deadline=$1
	while qemu_pid >/dev/null; do
		[ "$(now)" -lt "$deadline" ] || return 1
		sleep 1
	done
}

monitor() {
	python3 - "$MONITOR" "$1" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall((sys.argv[2] + "\n").encode())
try:
    while s.recv(4096):
        pass
except OSError:
    pass
EOF
}

# Power cut: qemu quits at once, nothing in the guest runs (no shutdown, no sync).
cmd_kill() {
	local pid
	pid=$(qemu_pid) || {
		log "not running"
		return 0
	}
	monitor quit >/dev/null 2>&1 || true
	if ! wait_exit $(($(now) + 30)); then
		kill -KILL "$pid" 2>/dev/null || true
		wait_exit $(($(now) + 30)) || die "qemu $pid does not exit"
	fi
	rm -f "$MONITOR" "$CONSOLE_SOCK" "$PIDFILE"
	log "power cut (qemu $pid gone)"
}

cmd_down() {
	cmd_kill
	rm -f "$ENVFILE" "$MONITOR" "$CONSOLE_SOCK" "$PIDFILE"
}

cmd_clean() {
	cmd_down
	case "$DIR" in / | "") die "refusing to remove '$DIR'" ;; esac
	rm -rf "$DIR"
	log "removed $DIR"
}

cmd_reboot() {
	local start id
	qemu_pid >/dev/null || die "the board is not up"
	id=$(guest 'cat /proc/sys/kernel/random/boot_id') || die "guest not reachable"
	start=$(now)
	# The connection may drop before ssh sees the exit status (255): the new boot id is the proof.
	guest 'systemctl reboot' || true
	wait_ssh $((start + ${BOARD_BOOT_TIMEOUT:-900})) "$id"
	log "rebooted in $(($(now) - start)) s"
}

cmd_poweroff() {
	local start
	qemu_pid >/dev/null || die "the board is not up"
	start=$(now)
	guest 'systemctl poweroff' || true
	wait_exit $((start + 600)) || die "the guest did not power off in 600 s"
	rm -f "$MONITOR" "$CONSOLE_SOCK" "$PIDFILE"
	log "powered off in $(($(now) - start)) s"
}

cmd_ssh() {
	local port
	port=$(ssh_port)
	ssh_opts
	exec ssh "${SSH_OPTS[@]}" -t -p "$port" root@127.0.0.1
}

cmd_run() {
	qemu_pid >/dev/null || die "the board is not up"
	guest "$1"
}

# copy-in SRC DST: a file is written to DST (mode kept); a directory's contents go into DST.
cmd_copy_in() {
	local src=$1 dst=$2 mode q
	qemu_pid >/dev/null || die "the board is not up"
	printf -v q '%q' "$dst"
	if [ -d "$src" ]; then
		tar -C "$src" -cf - . | guest "mkdir -p $q && tar -C $q -xf -"
	elif [ -f "$src" ]; then
		mode=$(stat -c %a "$src")
		guest "cat > $q.board-tmp && chmod $mode $q.board-tmp && mv -f $q.board-tmp $q" <"$src"
	else
		die "copy-in: no file or directory $src"
	fi
}

# The lab's two images (tests/e2e/mkimage.py) from the guest's own busybox-static (arm64),
# imported into containerd's k8s.io namespace; nothing is pulled.
cmd_images() {
	local tmp
	qemu_pid >/dev/null || die "the board is not up"
	tmp=$(mktemp -d)
	python3 "$REPO/tests/e2e/mkimage.py" --name localhost/pause:edge --arch arm64 \
		--busybox "$ROOTFS/bin/busybox" -o "$tmp/pause.tar" \
		--entrypoint /bin/busybox --entrypoint sh --entrypoint=-c \
		--entrypoint 'trap "exit 0" TERM INT; busybox sleep infinity & wait' 2>/dev/null
	python3 "$REPO/tests/e2e/mkimage.py" --name localhost/busybox:edge --arch arm64 \
		--busybox "$ROOTFS/bin/busybox" -o "$tmp/busybox.tar" --cmd sh 2>/dev/null
	cmd_copy_in "$tmp/pause.tar" /root/pause.tar
	cmd_copy_in "$tmp/busybox.tar" /root/busybox.tar
	rm -rf "$tmp"
	guest 'ctr -n k8s.io images import /root/pause.tar >/dev/null &&
		ctr -n k8s.io images import /root/busybox.tar >/dev/null &&
		ctr -n k8s.io images ls -q | grep -x -e localhost/pause:edge -e localhost/busybox:edge'
}

cmd_status() {
	local pid
	if pid=$(qemu_pid); then
		echo "up: qemu pid $pid, ssh port $(ssh_port)"
	else
		echo "down"
		return 3
	fi
}

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

[ $# -ge 1 ] || {
	usage
	exit 2
}
cmd=$1
shift
case "$cmd" in
build | up | down | clean | ssh | reboot | poweroff | kill | status | images)
	[ $# -le 1 ] || die "$cmd takes [DIR]"
	set_dir "${1:-}"
	case "$cmd" in
	build) cmd_build ;;
	up) cmd_up ;;
	down) cmd_down ;;
	clean) cmd_clean ;;
	ssh) cmd_ssh ;;
	reboot) cmd_reboot ;;
	poweroff) cmd_poweroff ;;
	kill) cmd_kill ;;
	status) cmd_status ;;
	images) cmd_images ;;
	esac
	;;
run)
	{ [ $# -ge 1 ] && [ $# -le 2 ]; } || die "usage: $0 run CMD [DIR]"
	set_dir "${2:-}"
	cmd_run "$1"
	;;
copy-in)
	{ [ $# -ge 2 ] && [ $# -le 3 ]; } || die "usage: $0 copy-in SRC DST [DIR]"
	set_dir "${3:-}"
	cmd_copy_in "$1" "$2"
	;;
-h | --help | help) usage ;;
*)
	usage >&2
	exit 2
	;;
esac
