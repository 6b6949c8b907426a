#!/usr/bin/env python3
"""A tiny CRI client for the lab's smoke test: Python 3 stdlib only, no crictl, no grpcio.

    cri.py -e unix:///path/containerd.sock version
    cri.py -e ... status                 # exit 1 unless RuntimeReady and NetworkReady
    cri.py -e ... image localhost/busybox:edge
    cri.py -e ... run-pod NAME [--log-dir DIR] [--cgroup-parent /x] [--cmd 'echo hi; sleep 3600']
    cri.py -e ... pods                   # id, state, namespace/name, ip
    cri.py -e ... rm-pods [--label k=v]  # StopPodSandbox + RemovePodSandbox

It speaks just enough gRPC: HTTP/2 with one stream per connection, request headers as HPACK
literals, the response read from DATA frames. Response headers and trailers are not
decoded (that would need HPACK Huffman); a call that returns no message is reported as
failed and the runtime's log has the reason. Protobuf is encoded by hand with the field
numbers of k8s.io/cri-api runtime/v1 api.proto. picolet's real client is
src/cri/client.rs; this exists only so the lab can be proven without it.
"""

import argparse
import os
import socket
import struct
import sys
import time

# --- protobuf wire format ------------------------------------------------------------


def _varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def f_int(num, n):
    return _varint(num << 3) + _varint(n) if n else b""


def f_bytes(num, b):
    b = b.encode() if isinstance(b, str) else b
    return _varint(num << 3 | 2) + _varint(len(b)) + b


def f_str(num, s):
    return f_bytes(num, s) if s else b""


def f_map(num, d):
    return b"".join(f_bytes(num, f_str(1, k) + f_str(2, v)) for k, v in sorted(d.items()))


def decode(buf):
    """Wire format -> {field number: [int | bytes, ...]}."""
    out, i = {}, 0
    while i < len(buf):
        key, i = _read_varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _read_varint(buf, i)
        elif wt == 2:
            n, i = _read_varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 1:
            v, i = struct.unpack_from("<Q", buf, i)[0], i + 8
        elif wt == 5:
            v, i = struct.unpack_from("<I", buf, i)[0], i + 4
        else:
            raise ValueError(f"wire type {wt}")
        out.setdefault(num, []).append(v)
    return out


def _read_varint(buf, i):
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def one(msg, num, default=b""):
    return msg.get(num, [default])[0]


def text(msg, num):
    return one(msg, num).decode()


def as_map(entries):
    return {text(decode(e), 1): text(decode(e), 2) for e in entries}


# --- gRPC over HTTP/2 (one call per connection) ----------------------------------------

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0, 1, 3, 4, 6, 7
END_STREAM, ACK, END_HEADERS, PADDED = 0x1, 0x1, 0x4, 0x8


class CallError(Exception):
    pass


def _frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def _hpack_literal(name, value):
    # "Literal Header Field without Indexing -- New Name", no Huffman; lengths < 127.
    return b"\x00" + bytes([len(name)]) + name.encode() + bytes([len(value)]) + value.encode()


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise CallError("connection closed by the runtime")
        buf += chunk
    return buf


def call(endpoint, method, request, timeout=30.0):
    path = endpoint[len("unix://"):] if endpoint.startswith("unix://") else endpoint
    service = "runtime.v1.ImageService" if method in ("ImageStatus", "ListImages") else "runtime.v1.RuntimeService"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
        headers = b"".join(_hpack_literal(k, v) for k, v in [
            (":method", "POST"), (":scheme", "http"), (":path", f"/{service}/{method}"),
            (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers"),
        ])
        body = b"\x00" + struct.pack(">I", len(request)) + request
        sock.sendall(PREFACE + _frame(SETTINGS, 0, 0) + _frame(HEADERS, END_HEADERS, 1, headers)
                     + _frame(DATA, END_STREAM, 1, body))
        data = b""
        while True:
            head = _recv_exact(sock, 9)
            length = int.from_bytes(head[:3], "big")
            kind, flags, stream = head[3], head[4], struct.unpack(">I", head[5:])[0] & 0x7FFFFFFF
            payload = _recv_exact(sock, length)
            if kind == SETTINGS and not flags & ACK:
                sock.sendall(_frame(SETTINGS, ACK, 0))
            elif kind == PING and not flags & ACK:
                sock.sendall(_frame(PING, ACK, 0, payload))
            elif kind == GOAWAY:
                raise CallError(f"{method}: GOAWAY from the runtime")
            elif kind == RST_STREAM and stream == 1:
                raise CallError(f"{method}: stream reset by the runtime")
            elif kind == DATA and stream == 1:
                if flags & PADDED:
                    payload = payload[1:len(payload) - payload[0]]
                data += payload
            if stream == 1 and kind in (DATA, HEADERS) and flags & END_STREAM:
                break
    except OSError as e:
        raise CallError(f"{method}: {e}") from e
    finally:
        sock.close()
    if len(data) < 5:
        raise CallError(f"{method}: failed (no response message; see the runtime's log)")
    n = struct.unpack(">I", data[1:5])[0]
    return decode(data[5:5 + n])


# --- CRI messages --------------------------------------------------------------------

POD, CONTAINER, NODE = 0, 1, 2


def sandbox_config(name, namespace, uid, log_dir, cgroup_parent=""):
    labels = {"io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": namespace,
              "io.kubernetes.pod.uid": uid, "picolet.test/owner": "cri.py"}
    metadata = f_str(1, name) + f_str(2, uid) + f_str(3, namespace)
    linux = f_bytes(2, f_bytes(1, f_int(2, POD)))  # security_context.namespace_options
    if cgroup_parent:
        linux = f_str(1, cgroup_parent) + linux  # LinuxPodSandboxConfig.cgroup_parent
    return (f_bytes(1, metadata) + f_str(2, name) + f_str(3, log_dir) + f_map(6, labels)
            + f_bytes(8, linux))


def container_config(name, image, argv, labels, log_path):
    metadata = f_str(1, name)
    ns = f_bytes(3, f_int(2, CONTAINER))  # pid = CONTAINER, else `sh` dies at start
    linux = f_bytes(2, ns)
    # ImageSpec.user_specified_image (18) too: CRI-O refuses a CreateContainer without it.
    return (f_bytes(1, metadata) + f_bytes(2, f_str(1, image) + f_str(18, image))
            + b"".join(f_str(3, a) for a in argv) + f_map(9, labels) + f_str(11, log_path)
            + f_bytes(15, linux))


def list_sandboxes(ep, labels=None):
    filt = f_bytes(1, f_map(3, labels or {})) if labels else b""
    resp = call(ep, "ListPodSandbox", filt)
    pods = []
    for item in resp.get(1, []):
        m = decode(item)
        meta = decode(one(m, 2))
        pods.append({"id": text(m, 1), "name": text(meta, 1), "uid": text(meta, 2),
                     "namespace": text(meta, 3), "state": "NotReady" if one(m, 3, 0) else "Ready",
                     "labels": as_map(m.get(5, []))})
    return pods


def sandbox_ip(ep, sid):
    st = decode(one(call(ep, "PodSandboxStatus", f_str(1, sid)), 1))
    return text(decode(one(st, 5)), 1)


def cmd_version(ep, _args):
    v = call(ep, "Version", b"")
    print(f"{text(v, 2)} {text(v, 3)} (CRI {text(v, 4)})")


def cmd_status(ep, _args):
    st = decode(one(call(ep, "Status", b""), 1))
    conds = {text(decode(c), 1): (bool(one(decode(c), 2, 0)), text(decode(c), 4)) for c in st.get(1, [])}
    ok = True
    for name in ("RuntimeReady", "NetworkReady"):
        ready, message = conds.get(name, (False, "condition missing"))
        print(f"{name}={str(ready).lower()}" + (f" ({message})" if message else ""))
        ok &= ready
    return 0 if ok else 1


def cmd_image(ep, args):
    resp = call(ep, "ImageStatus", f_bytes(1, f_str(1, args.image)))
    if 1 not in resp:
        print(f"{args.image}: not present")
        return 1
    img = decode(one(resp, 1))
    print(f"{args.image}: {text(img, 1)} tags={[t.decode() for t in img.get(2, [])]}")
    return 0


def cmd_run_pod(ep, args):
    uid = args.uid or f"cri-py-{os.getpid()}-{int(time.time())}"
    ns = args.namespace
    log_dir = os.path.join(os.path.abspath(args.log_dir), f"{ns}_{args.name}_{uid}")
    # The client makes <pod log dir>/<container>/, as the kubelet does: CRI-O's conmon opens
    # the log file there and fails without it (containerd makes it itself).
    os.makedirs(os.path.join(log_dir, "main"), exist_ok=True)
    sb = sandbox_config(args.name, ns, uid, log_dir, args.cgroup_parent)
    t0 = time.monotonic()
    sid = text(call(ep, "RunPodSandbox", f_bytes(1, sb)), 1)
    t1 = time.monotonic()
    labels = {"io.kubernetes.pod.name": args.name, "io.kubernetes.pod.namespace": ns,
              "io.kubernetes.pod.uid": uid, "io.kubernetes.container.name": "main"}
    cfg = container_config("main", args.image, ["sh", "-c", args.cmd], labels, "main/0.log")
    cid = text(call(ep, "CreateContainer", f_str(1, sid) + f_bytes(2, cfg) + f_bytes(3, sb)), 1)
    call(ep, "StartContainer", f_str(1, cid))
    t2 = time.monotonic()
    ip = sandbox_ip(ep, sid)
    print(f"sandbox={sid} container={cid} ip={ip} log={log_dir}/main/0.log "
          f"run_sandbox_ms={(t1 - t0) * 1000:.0f} container_ms={(t2 - t1) * 1000:.0f}")


def cmd_pods(ep, _args):
    for p in list_sandboxes(ep):
        ip = sandbox_ip(ep, p["id"]) if p["state"] == "Ready" else ""
        print(f"{p['id'][:13]} {p['state']:8} {p['namespace']}/{p['name']} {ip}")


def cmd_rm_pods(ep, args):
    labels = dict(kv.split("=", 1) for kv in args.label)
    for p in list_sandboxes(ep, labels):
        call(ep, "StopPodSandbox", f_str(1, p["id"]))
        call(ep, "RemovePodSandbox", f_str(1, p["id"]))
        print(f"removed {p['namespace']}/{p['name']} {p['id'][:13]}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-e", "--endpoint", default=os.environ.get("PICOLET_E2E_ENDPOINT", ""))
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("version")
    sub.add_parser("status")
    s = sub.add_parser("image")
    s.add_argument("image")
    s = sub.add_parser("run-pod")
    s.add_argument("name")
    s.add_argument("--namespace", default="lab-smoke")
    s.add_argument("--uid")
    s.add_argument("--image", default="localhost/busybox:edge")
    s.add_argument("--cmd", default="echo hello from $(hostname); exec sleep 3600")
    s.add_argument("--log-dir", default=".")
    s.add_argument("--cgroup-parent", default="", help="the sandbox's cgroup parent (cgroupfs path)")
    sub.add_parser("pods")
    s = sub.add_parser("rm-pods")
    s.add_argument("--label", action="append", default=[], help="k=v (repeatable)")
    args = p.parse_args()
    if not args.endpoint:
        p.error("no endpoint: pass -e unix:///... or set PICOLET_E2E_ENDPOINT")
    handler = {"version": cmd_version, "status": cmd_status, "image": cmd_image,
               "run-pod": cmd_run_pod, "pods": cmd_pods, "rm-pods": cmd_rm_pods}[args.command]
    try:
        return handler(args.endpoint, args) or 0
    except CallError as e:
        print(f"cri.py: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
