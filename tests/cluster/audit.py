#!/usr/bin/env python3
"""What one user asked of the lab apiserver, from its audit log (tests/cluster/cluster.sh
writes DIR/logs/audit.log at Metadata level for nodes and bootstrapping nodes).

  audit.py LOG USER [--since T] [--until T]     requests by verb and resource, one line each
  audit.py LOG USER --refused                   the requests answered 401 or 403 and never
                                                granted after (same verb and URI), one a line
  audit.py LOG USER --watches                   the watches it opened: path and field selector

T is RFC 3339 (requestReceivedTimestamp is compared as text, which orders RFC 3339 UTC).
A request counts once (by auditID), whatever stages the log holds for it; a watch counts when
it opens. Test tool only: never part of picolet.
"""
import json
import sys


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    log, user = argv[1], argv[2]
    opts = argv[3:]
    since = opts[opts.index("--since") + 1] if "--since" in opts else ""
    until = opts[opts.index("--until") + 1] if "--until" in opts else "~"
    refused = "--refused" in opts
    watches = "--watches" in opts
    seen, counts, bad, granted, opened = set(), {}, [], {}, {}
    with open(log, encoding="utf-8") as f:
        for line in f:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("user", {}).get("username") != user:
                continue
            at = ev.get("requestReceivedTimestamp", "")
            if not since <= at < until:
                continue
            code = ev.get("responseStatus", {}).get("code", 0)
            ref = ev.get("objectRef", {})
            what = ref.get("resource", ev.get("requestURI", "?"))
            if ref.get("subresource"):
                what += "/" + ref["subresource"]
            if refused:
                key = (ev.get("verb"), ev.get("requestURI"))
                if code in (401, 403) and ev.get("stage") != "ResponseStarted":
                    bad.append((at, key, code))
                elif 200 <= code < 300:
                    granted[key] = max(granted.get(key, ""), at)
                continue
            if watches:
                if ev.get("verb") == "watch":
                    uri = ev.get("requestURI", "")
                    path, _, query = uri.partition("?")
                    sel = [q for q in query.split("&") if q.startswith("fieldSelector=")]
                    name = path + (" " + sel[0] if sel else "")
                    opened[name] = opened.get(name, 0) + 1
                continue
            if ev["auditID"] in seen:
                continue
            seen.add(ev["auditID"])
            key = (ev.get("verb", "?"), what)
            counts[key] = counts.get(key, 0) + 1
    if refused:
        # A refusal the same request later got past is the authorizer's graph catching up
        # (a TokenRequest for a pod bound a moment ago), not a request it forbids.
        for at, key, code in bad:
            if granted.get(key, "") <= at:
                print(f"{at} {key[0]} {key[1]} {code}")
        return
    if watches:
        for name, n in sorted(opened.items()):
            print(f"{n}\t{name}")
        return
    for (verb, what), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{n}\t{verb}\t{what}")


if __name__ == "__main__":
    main(sys.argv)
