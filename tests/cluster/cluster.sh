#!/usr/bin/env bash
# A real Kubernetes control plane for picolet's lab: etcd, kube-apiserver,
# kube-controller-manager and kube-scheduler, built from their Go modules at the versions
# pinned in tests/upstream/versions.sh (tests/upstream/build.sh; a second run builds nothing),
# all on 127.0.0.1, all state under one directory.
#
#   tests/cluster/cluster.sh up     [DIR]   PKI, kubeconfigs, start, wait until ready, then the
#                                           bootstrap token, node RBAC and DIR/bootstrap-kubeconfig
#   tests/cluster/cluster.sh down   [DIR]   stop (TERM, then KILL), check nothing of DIR is left,
#                                           remove DIR (KEEP=1 keeps it)
#   tests/cluster/cluster.sh status [DIR]   what runs, on which port, and its health
#   tests/cluster/cluster.sh env    [DIR]   `export` lines: eval "$(tests/cluster/cluster.sh env)"
#
# DIR defaults to $PICOLET_CLUSTER_DIR or /tmp/picolet-cluster. Under it: pki/, etcd/ (data),
# kubeconfigs/ (admin, controller-manager, scheduler), bootstrap-kubeconfig (for a node),
# logs/<component>.log, pids/<component>.pid, env (the ports, chosen free, and paths).
# Needs no root; installs openssl and curl from Debian only if they are missing (as root).
# PICOLET_CLUSTER_SIGNING_DURATION (e.g. 10m): the controller-manager's
# --cluster-signing-duration, the lifetime of the certificates it signs (default: its own, a
# year); tests/cluster/bootstrap.sh shortens it to see a rotation.
set -euo pipefail
shopt -s inherit_errexit

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=$SCRIPT_DIR/../upstream/build.sh
# shellcheck source=tests/upstream/versions.sh
. "$SCRIPT_DIR/../upstream/versions.sh"

COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler)
SERVICE_CIDR=${PICOLET_SERVICE_CIDR:-10.96.0.0/12}
SERVICE_FIRST_IP=10.96.0.1 # the `kubernetes` Service's ClusterIP, in the apiserver cert
CLUSTER_NAME=picolet-lab
BOOTSTRAP_GROUP=system:bootstrappers:kubeadm:default-node-token
T0=$(date +%s.%N)

say() { printf 'cluster: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }'; }

usage() { sed -n '2,18p' "$0"; }

# need CMD PACKAGE: CMD on PATH, or install PACKAGE from Debian (as root only).
need() {
	command -v "$1" >/dev/null 2>&1 && return 0
	if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
		say "installing $2 (for $1) from Debian"
		if ! { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null; }; then
			die "apt-get install $2 failed"
		fi
	fi
	command -v "$1" >/dev/null 2>&1 || die "'$1' is missing: install Debian package '$2'"
}

# ---------------------------------------------------------------------------------------------
# Processes of DIR: every command line we start names a path under DIR.

# ancestors: this shell, its subshell and every process above them, one line each.
ancestors() {
	local p=$BASHPID stat
	while [[ -n $p && $p != 0 ]]; do
		echo "$p"
		stat=$(<"/proc/$p/stat") || break
		stat=${stat##*) } # after "pid (comm) ": "state ppid ..."
		stat=${stat#* }
		p=${stat%% *}
	done
	echo "$$"
}

# dir_pids: PIDs whose command line holds a path under DIR ("$DIR/" and more: a bare "DIR/"
# argument, as a script given DIR may have, is not), other than this script and its
# ancestors (a shell that ran `cluster.sh up DIR; ...; cluster.sh down DIR` names DIR/...).
dir_pids() {
	local p args cmd self
	self=" $(ancestors | tr '\n' ' ') "
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		[[ $self == *" $p "* ]] && continue
		mapfile -d '' args 2>/dev/null <"/proc/$p/cmdline" || continue # (no fork per process)
		cmd="${args[*]} "
		[[ $cmd == *"$DIR/"[!\ ]* ]] && echo "$p"
	done
	return 0
}

# pid_of NAME: the PID in DIR/pids/NAME.pid if that process still runs and is ours.
pid_of() {
	local f=$DIR/pids/$1.pid p args
	[[ -f $f ]] || return 1
	p=$(<"$f")
	[[ -r /proc/$p/cmdline ]] || return 1
	mapfile -d '' args 2>/dev/null <"/proc/$p/cmdline" || return 1
	[[ "${args[*]}" == *"$DIR/"* ]] || return 1
	echo "$p"
}

# exited PID: our child PID has ended (gone, or a zombie not yet reaped). Not `pid_of`: between
# fork and exec a child's cmdline is still this script's, which is not "ours" by pid_of's rule,
# and `wait` on a child taken for dead then blocked until the job's own timeout.
exited() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	stat=${stat##*) }
	[[ ${stat%% *} == Z ]]
}

# start NAME BINARY ARG...: in the background, in its own session, log and PID under DIR.
start() {
	local name=$1 bin=$2
	shift 2
	printf '%q ' "$bin" "$@" >"$DIR/logs/$name.cmdline"
	echo >>"$DIR/logs/$name.cmdline"
	setsid "$bin" "$@" </dev/null >"$DIR/logs/$name.log" 2>&1 9>&- &
	echo $! >"$DIR/pids/$name.pid"
	say "$name started (pid $!, log $DIR/logs/$name.log)"
}

# wait_for WHAT SECONDS CMD...: until CMD succeeds; on timeout show the log tails and fail.
wait_for() {
	local what=$1 secs=$2 name deadline
	shift 2
	# Wall time, not a count of tries: a check that hangs until its own timeout (curl's
	# --max-time) must not stretch the wait to many times SECONDS.
	deadline=$((SECONDS + secs))
	while ((SECONDS < deadline)); do
		if "$@" >/dev/null 2>&1; then
			say "$what ready after $(elapsed)"
			return 0
		fi
		for name in "${COMPONENTS[@]}"; do
			if [[ -f $DIR/pids/$name.pid ]] && exited "$(<"$DIR/pids/$name.pid")"; then
				tail -n 30 "$DIR/logs/$name.log" >&2 || true
				# Our child: its exit status says how it ended (137: SIGKILL from outside).
				local rc=0
				wait "$(<"$DIR/pids/$name.pid")" 2>/dev/null || rc=$?
				die "$name exited (status $rc) while waiting for $what (log $DIR/logs/$name.log)"
			fi
		done
		sleep 0.2
	done
	for name in "${COMPONENTS[@]}"; do
		[[ -f $DIR/logs/$name.log ]] && { say "--- $name.log (tail)"; tail -n 15 "$DIR/logs/$name.log" >&2; }
	done
	say "--- the last check: $*"
	"$@" >&2 || true
	die "$what not ready after ${secs}s"
}

# ---------------------------------------------------------------------------------------------
# Ports: free TCP ports on 127.0.0.1, distinct from each other.

PICKED=" "
port_busy() {
	if command -v ss >/dev/null 2>&1; then
		[[ -n $(ss -Htan "( sport = :$1 )" 2>/dev/null) ]]
	else
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
	fi
}
# free_port VAR [PREFERRED]: sets VAR to PREFERRED if free, else a random free port in
# 20000-32767 (below the kernel's ephemeral range), never one this run picked before. (A
# variable, not `$(free_port)`: a command substitution's subshell would forget PICKED.)
free_port() {
	local var=$1 p=${2:-} i
	for ((i = 0; i < 200; i++)); do
		if [[ -n $p && $PICKED != *" $p "* ]] && ! port_busy "$p"; then
			PICKED+="$p "
			printf -v "$var" '%s' "$p"
			return 0
		fi
		p=$((20000 + RANDOM % 12768))
	done
	die "no free port found"
}

# Clusters brought up at the same time would pick the same free ports (6443 first of all)
# before either binds them: from picking its ports until every component listens, an `up`
# holds a machine-wide lock (fd 9, closed in every process it starts, so that a component
# never keeps it).
UP_LOCK=${TMPDIR:-/tmp}/picolet-cluster-up.lock
lock_ports() {
	# Made readable by all once; opened read-only (no O_CREAT: another user's file in a
	# sticky /tmp opens so even with fs.protected_regular). Without it, no lock, said.
	[[ -e $UP_LOCK ]] || (umask 022 && : >>"$UP_LOCK") 2>/dev/null || true
	if ! exec 9<"$UP_LOCK"; then
		say "no lock $UP_LOCK: ports picked without it"
		return 0
	fi
	if ! flock -n 9; then
		say "waiting for another cluster's up to bind its ports ($UP_LOCK)"
		flock 9
	fi
}
unlock_ports() { exec 9>&-; }

# ---------------------------------------------------------------------------------------------
# PKI (openssl): one CA for everything (it also signs the nodes' certificates, through the
# controller-manager, and is the apiserver's --kubelet-certificate-authority).

# cert NAME SUBJECT EXT_USAGE [SAN]: DIR/pki/NAME.{key,crt}, an RSA key signed by the CA.
cert() {
	local name=$1 subj=$2 eku=$3 san=${4:-} pki=$DIR/pki ext
	ext=$pki/$name.ext
	{
		echo "basicConstraints = critical, CA:FALSE"
		echo "keyUsage = critical, digitalSignature, keyEncipherment"
		echo "extendedKeyUsage = $eku"
		echo "authorityKeyIdentifier = keyid"
		[[ -z $san ]] || echo "subjectAltName = $san"
	} >"$ext"
	openssl req -new -newkey rsa:2048 -nodes -keyout "$pki/$name.key" -subj "$subj" \
		-out "$pki/$name.csr" 2>/dev/null
	openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
		-set_serial "0x$(openssl rand -hex 16)" -days 365 -sha256 -extfile "$ext" \
		-out "$pki/$name.crt" 2>/dev/null
	rm -f "$pki/$name.csr" "$ext"
}

make_pki() {
	local pki=$DIR/pki
	mkdir -p "$pki"
	(
		umask 077
		openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -out "$pki/ca.crt" \
			-days 3650 -sha256 -subj "/CN=$CLUSTER_NAME-ca" \
			-addext "basicConstraints=critical,CA:TRUE" \
			-addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
		cert apiserver "/CN=kube-apiserver" serverAuth \
			"DNS:localhost, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.cluster.local, IP:127.0.0.1, IP:::1, IP:$SERVICE_FIRST_IP${PICOLET_CLUSTER_APISERVER_SANS:+, $PICOLET_CLUSTER_APISERVER_SANS}"
		cert apiserver-kubelet-client "/CN=kube-apiserver-kubelet-client" clientAuth
		cert apiserver-etcd-client "/CN=kube-apiserver-etcd-client" clientAuth
		cert etcd "/CN=etcd" "serverAuth, clientAuth" "DNS:localhost, IP:127.0.0.1"
		cert admin "/O=system:masters/CN=$CLUSTER_NAME-admin" clientAuth
		cert controller-manager "/CN=system:kube-controller-manager" clientAuth
		cert scheduler "/CN=system:kube-scheduler" clientAuth
		# Service-account tokens: signed with sa.key by the apiserver, checked with sa.pub.
		openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$pki/sa.key" 2>/dev/null
		openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
	)
	say "PKI made in $pki ($(elapsed))"
}

# kubeconfig FILE USER [client CERT-NAME | token TOKEN]
kubeconfig() {
	local file=$1 user=$2 kind=$3 what=$4 pki=$DIR/pki
	{
		cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $CLUSTER_NAME
  cluster:
    server: $APISERVER_URL
    certificate-authority-data: $(base64 -w0 <"$pki/ca.crt")
contexts:
- name: $user@$CLUSTER_NAME
  context:
    cluster: $CLUSTER_NAME
    user: $user
current-context: $user@$CLUSTER_NAME
users:
- name: $user
  user:
EOF
		if [[ $kind == client ]]; then
			echo "    client-certificate-data: $(base64 -w0 <"$pki/$what.crt")"
			echo "    client-key-data: $(base64 -w0 <"$pki/$what.key")"
		else
			echo "    token: $what"
		fi
	} >"$file"
	chmod 600 "$file"
}

# ---------------------------------------------------------------------------------------------

write_env() {
	cat >"$DIR/env" <<EOF
# picolet lab control plane ($(date -u +%FT%TZ)); source it, or eval "\$(cluster.sh env)"
export PICOLET_CLUSTER_DIR=$DIR
export KUBERNETES_VERSION=$KUBERNETES_VERSION
export ETCD_VERSION=$ETCD_VERSION
export ETCD_CLIENT_PORT=$ETCD_CLIENT_PORT
export ETCD_PEER_PORT=$ETCD_PEER_PORT
export APISERVER_PORT=$APISERVER_PORT
export APISERVER_URL=$APISERVER_URL
export CONTROLLER_MANAGER_PORT=$CONTROLLER_MANAGER_PORT
export SCHEDULER_PORT=$SCHEDULER_PORT
export SERVICE_CIDR=$SERVICE_CIDR
export CLUSTER_CA=$DIR/pki/ca.crt
export KUBECONFIG=$DIR/kubeconfigs/admin.kubeconfig
export BOOTSTRAP_KUBECONFIG=$DIR/bootstrap-kubeconfig
export KUBECTL=$KUBECTL
EOF
}

load_env() {
	[[ -f $DIR/env ]] || return 1
	# shellcheck disable=SC1091
	. "$DIR/env"
}

kc() { "$KUBECTL" --kubeconfig "$DIR/kubeconfigs/admin.kubeconfig" "$@"; }

health() { # health PORT PATH: the component's own HTTPS health endpoint (anonymous is allowed)
	curl -sSfk --max-time 3 "https://127.0.0.1:$1$2"
}

etcd_health() {
	curl -sSf --max-time 3 --cacert "$DIR/pki/ca.crt" --cert "$DIR/pki/apiserver-etcd-client.crt" \
		--key "$DIR/pki/apiserver-etcd-client.key" "https://127.0.0.1:$ETCD_CLIENT_PORT/health" |
		grep -q '"health":"true"'
}

# The objects kubeadm makes for nodes to join, and a bootstrap token for them.
post_up_objects() {
	local id secret expiration
	id=$(openssl rand -hex 3)     # [a-z0-9]{6}
	secret=$(openssl rand -hex 8) # [a-z0-9]{16}
	expiration=$(date -u -d '+24 hours' +%FT%TZ)
	kc apply -f - >&2 <<EOF
apiVersion: v1
kind: Secret
metadata:
  name: bootstrap-token-$id
  namespace: kube-system
type: bootstrap.kubernetes.io/token
stringData:
  description: picolet lab bootstrap token (tests/cluster/cluster.sh)
  token-id: "$id"
  token-secret: "$secret"
  expiration: "$expiration"
  usage-bootstrap-authentication: "true"
  usage-bootstrap-signing: "true"
  auth-extra-groups: $BOOTSTRAP_GROUP
---
# kubeadm:kubelet-bootstrap: bootstrap tokens may create CSRs.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: kubeadm:kubelet-bootstrap
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:node-bootstrapper"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: "$BOOTSTRAP_GROUP"}
---
# kubeadm:node-autoapprove-bootstrap: their node-client CSRs are approved automatically.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: kubeadm:node-autoapprove-bootstrap
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:certificates.k8s.io:certificatesigningrequests:nodeclient"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: "$BOOTSTRAP_GROUP"}
---
# kubeadm:node-autoapprove-certificate-rotation: nodes renewing their own client certificate.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: kubeadm:node-autoapprove-certificate-rotation
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: "system:nodes"}
---
# The apiserver's client certificate at the kubelet (logs, exec, port-forward, ...).
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: picolet-lab:apiserver-kubelet-client
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:kubelet-api-admin"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: kube-apiserver-kubelet-client}
---
# cluster-info, as kubeadm publishes it (the bootstrapsigner controller signs it for the token).
apiVersion: v1
kind: ConfigMap
metadata:
  name: cluster-info
  namespace: kube-public
data:
  kubeconfig: |
    apiVersion: v1
    kind: Config
    clusters:
    - name: ""
      cluster:
        server: $APISERVER_URL
        certificate-authority-data: $(base64 -w0 <"$DIR/pki/ca.crt")
    contexts: []
    users: []
EOF
	kubeconfig "$DIR/bootstrap-kubeconfig" "tls-bootstrap-token-user" token "$id.$secret"
	echo "$id" >"$DIR/bootstrap-token-id"
	say "bootstrap token $id (expires $expiration), node RBAC, $DIR/bootstrap-kubeconfig ($(elapsed))"
}

up() {
	local bins etcd apiserver kcm scheduler
	need openssl openssl
	need curl curl
	need setsid util-linux
	need flock util-linux
	if [[ -d $DIR ]]; then
		[[ -n $(dir_pids) ]] && die "$DIR has running processes; '$0 down $DIR' first"
		if [[ -f $DIR/.picolet-cluster ]]; then
			rm -rf "$DIR"
		elif [[ -n $(ls -A "$DIR") ]]; then
			die "$DIR exists and is not a picolet cluster directory; choose another"
		fi
	fi
	mkdir -p "$DIR"/{logs,pids,kubeconfigs,etcd}
	chmod 700 "$DIR" "$DIR/etcd"
	touch "$DIR/.picolet-cluster"

	say "binaries: etcd $ETCD_VERSION, Kubernetes $KUBERNETES_VERSION (tests/upstream/build.sh)"
	mapfile -t bins < <("$BUILD" --path etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)
	[[ ${#bins[@]} == 5 ]] || die "tests/upstream/build.sh did not give 5 binaries"
	etcd=${bins[0]} apiserver=${bins[1]} kcm=${bins[2]} scheduler=${bins[3]} KUBECTL=${bins[4]}
	say "binaries ready ($(elapsed))"

	lock_ports
	free_port ETCD_CLIENT_PORT
	free_port ETCD_PEER_PORT
	free_port APISERVER_PORT 6443
	free_port CONTROLLER_MANAGER_PORT
	free_port SCHEDULER_PORT
	APISERVER_URL=https://127.0.0.1:$APISERVER_PORT
	write_env

	make_pki
	local pki=$DIR/pki
	kubeconfig "$DIR/kubeconfigs/admin.kubeconfig" "$CLUSTER_NAME-admin" client admin
	kubeconfig "$DIR/kubeconfigs/controller-manager.kubeconfig" system:kube-controller-manager client controller-manager
	kubeconfig "$DIR/kubeconfigs/scheduler.kubeconfig" system:kube-scheduler client scheduler

	start etcd "$etcd" \
		--name="$CLUSTER_NAME" --data-dir="$DIR/etcd" \
		--listen-client-urls="https://127.0.0.1:$ETCD_CLIENT_PORT" \
		--advertise-client-urls="https://127.0.0.1:$ETCD_CLIENT_PORT" \
		--listen-peer-urls="https://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-advertise-peer-urls="https://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster="$CLUSTER_NAME=https://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster-state=new \
		--cert-file="$pki/etcd.crt" --key-file="$pki/etcd.key" \
		--client-cert-auth --trusted-ca-file="$pki/ca.crt" \
		--peer-cert-file="$pki/etcd.crt" --peer-key-file="$pki/etcd.key" \
		--peer-client-cert-auth --peer-trusted-ca-file="$pki/ca.crt"
	wait_for etcd 60 etcd_health

	# An audit log of what nodes (and bootstrapping nodes) ask, at Metadata level: the tests
	# count a node's requests by verb and resource and find any it was refused.
	cat >"$DIR/audit-policy.yaml" <<-EOF
		apiVersion: audit.k8s.io/v1
		kind: Policy
		omitStages: [RequestReceived]
		rules:
		- level: Metadata
		  userGroups: ["system:nodes", "system:bootstrappers"]
		- level: None
	EOF
	# --endpoint-reconciler-type=none: the `kubernetes` Service gets no Endpoints, since an
	# Endpoints address may not be a loopback one and this apiserver listens on 127.0.0.1 only.
	start kube-apiserver "$apiserver" \
		--audit-policy-file="$DIR/audit-policy.yaml" --audit-log-path="$DIR/logs/audit.log" \
		--audit-log-maxsize=200 --audit-log-maxbackup=1 \
		--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
		--endpoint-reconciler-type=none \
		--etcd-servers="https://127.0.0.1:$ETCD_CLIENT_PORT" --etcd-cafile="$pki/ca.crt" \
		--etcd-certfile="$pki/apiserver-etcd-client.crt" --etcd-keyfile="$pki/apiserver-etcd-client.key" \
		--tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
		--client-ca-file="$pki/ca.crt" \
		--authorization-mode=Node,RBAC \
		--enable-admission-plugins=NodeRestriction \
		--enable-bootstrap-token-auth=true \
		--allow-privileged=true \
		--kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" \
		--kubelet-client-key="$pki/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority="$pki/ca.crt" \
		--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-account-key-file="$pki/sa.pub" \
		--service-account-signing-key-file="$pki/sa.key" \
		--service-cluster-ip-range="$SERVICE_CIDR"
	wait_for kube-apiserver 120 kc get --raw /readyz

	start kube-controller-manager "$kcm" \
		--bind-address=127.0.0.1 --secure-port="$CONTROLLER_MANAGER_PORT" \
		--kubeconfig="$DIR/kubeconfigs/controller-manager.kubeconfig" \
		--authentication-kubeconfig="$DIR/kubeconfigs/controller-manager.kubeconfig" \
		--authorization-kubeconfig="$DIR/kubeconfigs/controller-manager.kubeconfig" \
		--leader-elect=false \
		--cluster-name="$CLUSTER_NAME" \
		--cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
		${PICOLET_CLUSTER_SIGNING_DURATION:+--cluster-signing-duration="$PICOLET_CLUSTER_SIGNING_DURATION"} \
		--controllers='*,bootstrapsigner,tokencleaner' \
		--use-service-account-credentials=true \
		--root-ca-file="$pki/ca.crt" \
		--service-account-private-key-file="$pki/sa.key" \
		--service-cluster-ip-range="$SERVICE_CIDR"
	start kube-scheduler "$scheduler" \
		--bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" \
		--kubeconfig="$DIR/kubeconfigs/scheduler.kubeconfig" \
		--authentication-kubeconfig="$DIR/kubeconfigs/scheduler.kubeconfig" \
		--authorization-kubeconfig="$DIR/kubeconfigs/scheduler.kubeconfig" \
		--leader-elect=false
	wait_for kube-controller-manager 60 health "$CONTROLLER_MANAGER_PORT" /healthz
	wait_for kube-scheduler 60 health "$SCHEDULER_PORT" /healthz
	unlock_ports
	# The serviceaccount controller makes `default` in each namespace: the controllers work.
	wait_for "ServiceAccount default/default" 60 kc -n default get serviceaccount default

	post_up_objects
	say "up in $(elapsed): KUBECONFIG=$DIR/kubeconfigs/admin.kubeconfig ($APISERVER_URL); env in $DIR/env"
}

down() {
	local name pid i left
	if [[ ! -d $DIR ]]; then
		say "$DIR: nothing there"
		return 0
	fi
	for name in kube-scheduler kube-controller-manager kube-apiserver etcd; do
		pid=$(pid_of "$name") || continue
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do
			[[ -d /proc/$pid ]] || break
			sleep 0.1
		done
		if [[ -d /proc/$pid ]]; then
			say "$name (pid $pid) ignored TERM for 10 s: KILL"
			kill -KILL "$pid" 2>/dev/null || true
			sleep 0.2
		fi
		say "$name (pid $pid) stopped ($(elapsed))"
	done
	# Anything else of DIR (a child, a stray from an earlier run): TERM, then KILL.
	left=$(dir_pids)
	if [[ -n $left ]]; then
		say "left over, stopping: $(echo "$left" | tr '\n' ' ')"
		# shellcheck disable=SC2086  # one PID a word
		kill -TERM $left 2>/dev/null || true
		sleep 2
		left=$(dir_pids)
		# shellcheck disable=SC2086
		[[ -z $left ]] || kill -KILL $left 2>/dev/null || true
		sleep 0.2
	fi
	left=$(dir_pids)
	[[ -z $left ]] || die "processes of $DIR still running: $left"
	say "no process of $DIR is left ($(elapsed))"
	if [[ ${KEEP:-0} == 1 ]]; then
		say "KEEP=1: $DIR kept"
	elif [[ -f $DIR/.picolet-cluster ]]; then
		rm -rf "$DIR"
		say "$DIR removed"
	else
		say "$DIR is not a picolet cluster directory: not removed"
	fi
}

status() {
	local name pid port state rc=0
	load_env || { say "$DIR: no cluster (no $DIR/env)"; return 1; }
	printf '%-24s %-8s %-6s %s\n' COMPONENT PID PORT HEALTH
	for name in "${COMPONENTS[@]}"; do
		case $name in
		etcd) port=$ETCD_CLIENT_PORT ;;
		kube-apiserver) port=$APISERVER_PORT ;;
		kube-controller-manager) port=$CONTROLLER_MANAGER_PORT ;;
		kube-scheduler) port=$SCHEDULER_PORT ;;
		esac
		if pid=$(pid_of "$name"); then
			case $name in
			etcd) state=$(etcd_health && echo ok || echo unhealthy) ;;
			kube-apiserver) state=$(kc get --raw /readyz 2>&1 || true) ;;
			*) state=$(health "$port" /healthz 2>&1 || true) ;;
			esac
		else
			pid=- state="not running" rc=1
		fi
		printf '%-24s %-8s %-6s %s\n' "$name" "$pid" "$port" "$state"
	done
	echo "KUBECONFIG=$KUBECONFIG  server $APISERVER_URL  versions: Kubernetes $KUBERNETES_VERSION, etcd $ETCD_VERSION"
	return "$rc"
}

cmd=${1:-}
DIR=$(realpath -m "${2:-${PICOLET_CLUSTER_DIR:-/tmp/picolet-cluster}}")
[[ $DIR != / ]] || die "DIR may not be /"
case $cmd in
up) up ;;
down) down ;;
status) status ;;
env)
	load_env || die "$DIR: no cluster (no $DIR/env)"
	grep '^export ' "$DIR/env"
	;;
-h | --help | "") usage ;;
*) usage; exit 2 ;;
esac
