#!/usr/bin/env python3
"""The table of a node conformance run (tests/conformance/run.sh) from e2e.test's JUnit report.

    junit.py JUNIT_XML FOCUS_REGEX SKIPS_TSV  >  results.tsv

One line per spec the focus selects: test <TAB> passed|failed|skipped <TAB> reason. The
report lists every spec of the suite (Ginkgo reports the ones outside the focus as skipped);
only those whose name the focus matches are kept. A selected spec the run's --ginkgo.skip
left out gets the reason of the first SKIPS_TSV line (regex <TAB> why) that matches it; one
the test itself skipped (e2eskipper) gets its own message; a failure its first message line.
Python 3 standard library only.
"""

import re
import sys
import xml.etree.ElementTree as ET


def one_line(text, limit=300):
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    junit, focus, skips_file = sys.argv[1:]
    focus_re = re.compile(focus)
    skips = []
    with open(skips_file, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line:
                regex, _, why = line.partition("\t")
                skips.append((re.compile(regex), why))
    rows = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "")
        if name.startswith("[It] "):
            name = name[5:]
        elif name.startswith("["):
            # [SynchronizedBeforeSuite], [ReportAfterSuite] and the like: the suite's own nodes.
            if case.find("failure") is not None or case.find("error") is not None:
                rows.append((name, "failed", failure_reason(case)))
            continue
        if not focus_re.search(name):
            continue
        status = case.get("status", "")
        if case.find("failure") is not None or case.find("error") is not None:
            rows.append((name, "failed", failure_reason(case)))
            continue
        skipped = case.find("skipped")
        if skipped is None and status != "skipped":
            rows.append((name, "passed", ""))
            continue
        ours = next((why for regex, why in skips if regex.search(name)), None)
        message = (skipped.get("message", "") if skipped is not None else "").strip()
        if ours is not None:
            rows.append((name, "skipped", "named skip: " + ours))
        elif message and message != "skipped":
            message = re.sub(r"^skipped\s*-?\s*", "", message)
            rows.append((name, "skipped", "the test skipped itself: " + one_line(message)))
        else:
            rows.append((name, "skipped", "not run (" + (status or "skipped") + ")"))
    for name, result, reason in sorted(rows):
        print(f"{name}\t{result}\t{reason}")


def failure_reason(case):
    node = case.find("failure")
    if node is None:
        node = case.find("error")
    text = node.get("message", "") or node.text or ""
    return one_line(text)


if __name__ == "__main__":
    main()
