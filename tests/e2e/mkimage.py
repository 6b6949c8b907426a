#!/usr/bin/env python3
"""Build a tiny busybox OCI image as an image-layout tar, without a registry.

Used by tests/e2e/lab.sh for picolet's end-to-end lab, where nothing can be pulled:

    mkimage.py --name localhost/busybox:edge --cmd sh -o busybox.tar
    mkimage.py --name localhost/pause:edge \
        --entrypoint /bin/busybox --entrypoint sleep --entrypoint infinity -o pause.tar
    ctr -a $LAB/containerd.sock -n k8s.io images import busybox.tar

The tar holds an OCI image layout (oci-layout, index.json, blobs/sha256/...): one
uncompressed layer with /bin/busybox (from busybox-static) plus applet symlinks, a minimal
/etc/passwd and /etc/group and a world-writable /tmp; a config JSON; a manifest; and an
index.json whose manifest carries the annotation io.containerd.image.name (the name
`ctr images import` gives the image). Image names need a domain (`localhost/...`): CRI
ImageStatus does not find a bare `busybox:edge`.

For images that need more than busybox (tests/conformance/images.sh makes the e2e test images
under their upstream names), the layer can also hold: every applet the busybox binary knows
(--all-applets), host files (--add SRC:DEST[:MODE], e.g. a static Go binary or a setuid one),
symlinks (--symlink DEST:TARGET), directories (--dir DEST[:MODE]), extra /etc/passwd and
/etc/group lines (--passwd, --group), and the config can name a user (--user). Without these
flags the image is byte for byte what it was before they existed.

Byte-reproducible: fixed mtimes (SOURCE_DATE_EPOCH, default 0), owners root:root, sorted
entries, canonical JSON. The same busybox binary and arguments give the same digests.

Python 3 standard library only.
"""

import argparse
import hashlib
import io
import json
import os
import platform
import sys
import tarfile

# Applets linked into /bin. Fixed (not `busybox --list`) so the image does not depend on
# being able to run the binary; every name here is in Debian's busybox-static >= 1.30.
APPLETS = sorted(
    {
        "[", "ash", "awk", "base64", "basename", "cat", "chmod", "cp", "cut", "date",
        "dd", "df", "dirname", "du", "echo", "env", "expr", "false", "find", "free",
        "grep", "head", "hexdump", "hostname", "httpd", "id", "ifconfig", "ip", "kill",
        "ln", "ls", "md5sum", "mkdir", "mkfifo", "mount", "mv", "nc", "netstat",
        "nslookup", "od", "ping", "printf", "ps", "pwd", "readlink", "realpath", "rm",
        "rmdir", "sed", "seq", "sh", "sha256sum", "sleep", "sort", "stat", "tail",
        "tee", "test", "timeout", "top", "touch", "tr", "true", "uname", "uniq",
        "uptime", "usleep", "vi", "watch", "wc", "wget", "which", "whoami", "xargs",
        "yes",
    }
)

PASSWD = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
GROUP = "root:x:0:\nnogroup:x:65534:\n"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

MT_LAYER = "application/vnd.oci.image.layer.v1.tar"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def go_platform(machine):
    """Map `uname -m` to the OCI (GOARCH, variant) pair containerd matches on import."""
    table = {
        "x86_64": ("amd64", None),
        "amd64": ("amd64", None),
        "aarch64": ("arm64", None),
        "arm64": ("arm64", None),
        "armv7l": ("arm", "v7"),
        "armv6l": ("arm", "v6"),
        "i686": ("386", None),
        "i386": ("386", None),
        "riscv64": ("riscv64", None),
        "ppc64le": ("ppc64le", None),
        "s390x": ("s390x", None),
        "mips": ("mips", None),
        "mipsel": ("mipsle", None),
    }
    if machine not in table:
        raise SystemExit(f"mkimage.py: unknown machine {machine!r}; pass --arch")
    return table[machine]


def canonical_json(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def tar_add(tar, name, mtime, *, data=None, mode=0o644, kind=tarfile.REGTYPE, target=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.mtime = mtime
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.linkname = target
    if data is not None:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    else:
        tar.addfile(info)


def busybox_applets(busybox):
    """Every applet the binary was built with (`busybox --list`), for --all-applets."""
    import subprocess
    out = subprocess.run([busybox, "--list"], check=True, capture_output=True, text=True).stdout
    return sorted({a for a in out.split() if a and "/" not in a and a != "busybox"})


def parse_mode(text, default):
    return int(text, 8) if text else default


def extra_entries(args):
    """The entries of --add, --symlink and --dir: (path, kind, data, mode, target), with the
    parent directories that APPLETS' layer does not already hold, sorted by path."""
    entries = {}
    for spec in args.dir:
        dest, _, mode = spec.partition(":")
        entries[dest.strip("/")] = (tarfile.DIRTYPE, None, parse_mode(mode, 0o755), "")
    for spec in args.add:
        parts = spec.split(":")
        if len(parts) not in (2, 3):
            raise SystemExit(f"mkimage.py: --add {spec!r}: want SRC:DEST[:MODE]")
        with open(parts[0], "rb") as f:
            data = f.read()
        mode = parse_mode(parts[2] if len(parts) == 3 else "", os.stat(parts[0]).st_mode & 0o7777)
        entries[parts[1].strip("/")] = (tarfile.REGTYPE, data, mode, "")
    for spec in args.symlink:
        dest, _, target = spec.partition(":")
        entries[dest.strip("/")] = (tarfile.SYMTYPE, None, 0o777, target)
    have = {"bin", "etc", "root", "tmp"}
    for path in list(entries):
        parent = os.path.dirname(path)
        while parent and parent not in have and parent not in entries:
            entries[parent] = (tarfile.DIRTYPE, None, 0o755, "")
            parent = os.path.dirname(parent)
    return sorted(entries.items())


def build_layer(busybox, mtime, args=None):
    with open(busybox, "rb") as f:
        binary = f.read()
    applets = APPLETS
    passwd, group = PASSWD, GROUP
    extras = []
    if args is not None:
        if args.all_applets:
            applets = sorted(set(APPLETS) | set(busybox_applets(busybox)))
        passwd += "".join(line + "\n" for line in args.passwd)
        group += "".join(line + "\n" for line in args.group)
        extras = extra_entries(args)
        # An --add or --symlink at bin/<applet> replaces that applet's link.
        taken = {path for path, _ in extras}
        applets = [a for a in applets if f"bin/{a}" not in taken]
    buf = io.BytesIO()
    # USTAR: no pax headers with atime/ctime, so the bytes depend on our fields only.
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        tar_add(tar, "bin", mtime, mode=0o755, kind=tarfile.DIRTYPE)
        tar_add(tar, "bin/busybox", mtime, data=binary, mode=0o755)
        for applet in applets:
            tar_add(tar, f"bin/{applet}", mtime, mode=0o777, kind=tarfile.SYMTYPE,
                    target="busybox")
        tar_add(tar, "etc", mtime, mode=0o755, kind=tarfile.DIRTYPE)
        tar_add(tar, "etc/group", mtime, data=group.encode())
        tar_add(tar, "etc/passwd", mtime, data=passwd.encode())
        tar_add(tar, "root", mtime, mode=0o700, kind=tarfile.DIRTYPE)
        tar_add(tar, "tmp", mtime, mode=0o1777, kind=tarfile.DIRTYPE)
        for path, (kind, data, mode, target) in extras:
            tar_add(tar, path, mtime, data=data, mode=mode, kind=kind, target=target)
    return buf.getvalue()


def build_image(args):
    arch, variant = (args.arch, args.variant) if args.arch else go_platform(platform.machine())
    layer = build_layer(args.busybox, args.mtime, args)
    layer_digest = sha256(layer)
    created = "1970-01-01T00:00:00Z" if args.mtime == 0 else None

    container_config = {"Env": [PATH_ENV], "WorkingDir": "/"}
    if args.entrypoint:
        container_config["Entrypoint"] = args.entrypoint
    if args.cmd:
        container_config["Cmd"] = args.cmd
    if args.user:
        container_config["User"] = args.user
    config = {
        "architecture": arch,
        "os": "linux",
        "config": container_config,
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        "history": [{"created_by": "picolet tests/e2e/mkimage.py"}],
    }
    if variant:
        config["variant"] = variant
    if created:
        config["created"] = created
    config_bytes = canonical_json(config)

    manifest = {
        "schemaVersion": 2,
        "mediaType": MT_MANIFEST,
        "config": {"mediaType": MT_CONFIG, "digest": sha256(config_bytes),
                   "size": len(config_bytes)},
        "layers": [{"mediaType": MT_LAYER, "digest": layer_digest, "size": len(layer)}],
    }
    manifest_bytes = canonical_json(manifest)

    plat = {"architecture": arch, "os": "linux"}
    if variant:
        plat["variant"] = variant
    tag = args.name.rsplit(":", 1)[1] if ":" in args.name.rsplit("/", 1)[-1] else "latest"
    index = {
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": MT_MANIFEST,
            "digest": sha256(manifest_bytes),
            "size": len(manifest_bytes),
            "platform": plat,
            "annotations": {
                "io.containerd.image.name": args.name,
                "org.opencontainers.image.ref.name": tag,
            },
        }],
    }

    if args.docker_save:
        return docker_save(args, layer, layer_digest, config_bytes), sha256(config_bytes)
    blobs = sorted(
        [(sha256(b).split(":", 1)[1], b) for b in (layer, config_bytes, manifest_bytes)]
    )
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        tar_add(tar, "blobs", args.mtime, mode=0o755, kind=tarfile.DIRTYPE)
        tar_add(tar, "blobs/sha256", args.mtime, mode=0o755, kind=tarfile.DIRTYPE)
        for hexdigest, data in blobs:
            tar_add(tar, f"blobs/sha256/{hexdigest}", args.mtime, data=data)
        tar_add(tar, "index.json", args.mtime, data=canonical_json(index))
        tar_add(tar, "oci-layout", args.mtime,
                data=canonical_json({"imageLayoutVersion": "1.0.0"}))
    return out.getvalue(), sha256(manifest_bytes)


def docker_save(args, layer, layer_digest, config_bytes):
    """The layout of `docker save` before Docker 25: manifest.json (Config, RepoTags,
    Layers), the config as <hex>.json, each layer as <id>/layer.tar; no manifest, no index.
    Docker writes Docker Hub names short (busybox:1, user/app:2)."""
    name = args.name
    for prefix in ("docker.io/library/", "docker.io/"):
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    config_hex = sha256(config_bytes).split(":", 1)[1]
    layer_id = layer_digest.split(":", 1)[1]
    manifest = [{"Config": f"{config_hex}.json", "RepoTags": [name],
                 "Layers": [f"{layer_id}/layer.tar"]}]
    repo, tag = name.rsplit(":", 1)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        tar_add(tar, f"{config_hex}.json", args.mtime, data=config_bytes)
        tar_add(tar, layer_id, args.mtime, mode=0o755, kind=tarfile.DIRTYPE)
        tar_add(tar, f"{layer_id}/VERSION", args.mtime, data=b"1.0")
        tar_add(tar, f"{layer_id}/layer.tar", args.mtime, data=layer)
        tar_add(tar, "manifest.json", args.mtime, data=canonical_json(manifest))
        tar_add(tar, "repositories", args.mtime, data=canonical_json({repo: {tag: layer_id}}))
    return out.getvalue()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--name", required=True, help="image name with a domain, e.g. localhost/busybox:edge")
    p.add_argument("--busybox", default="/bin/busybox", help="a static busybox binary")
    p.add_argument("--entrypoint", action="append", default=[], help="repeat per argv word")
    p.add_argument("--cmd", action="append", default=[], help="repeat per argv word")
    p.add_argument("--all-applets", action="store_true",
                   help="link every applet of the busybox binary (busybox --list), not a fixed set")
    p.add_argument("--add", action="append", default=[], metavar="SRC:DEST[:MODE]",
                   help="a host file into the layer (MODE octal, default the file's)")
    p.add_argument("--symlink", action="append", default=[], metavar="DEST:TARGET")
    p.add_argument("--dir", action="append", default=[], metavar="DEST[:MODE]")
    p.add_argument("--passwd", action="append", default=[], help="an extra /etc/passwd line")
    p.add_argument("--group", action="append", default=[], help="an extra /etc/group line")
    p.add_argument("--user", help="the config's User (name or uid[:gid])")
    p.add_argument("--arch", help="OCI architecture (default: from uname -m)")
    p.add_argument("--variant", help="OCI variant with --arch (e.g. v7)")
    p.add_argument("--docker-save", action="store_true",
                   help="write the layout of docker save before Docker 25 (manifest.json, "
                        "<id>/layer.tar) instead of an OCI image layout")
    p.add_argument("-o", "--output", required=True, help="tar to write ('-' for stdout)")
    p.add_argument("--mtime", type=int, default=int(os.environ.get("SOURCE_DATE_EPOCH", "0")))
    args = p.parse_args()

    if "/" not in args.name or "." not in args.name.split("/")[0] and args.name.split("/")[0] != "localhost":
        raise SystemExit(f"mkimage.py: {args.name!r} needs a domain (localhost/...): "
                         "CRI ImageStatus does not resolve bare names")
    data, digest = build_image(args)
    if args.output == "-":
        sys.stdout.buffer.write(data)
    else:
        tmp = args.output + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, args.output)
    print(f"{args.name} {digest}", file=sys.stderr)


if __name__ == "__main__":
    main()
