#!/usr/bin/env python3
"""Pages out a running process's file-backed mappings whose path contains NAME
(process_madvise(MADV_PAGEOUT), Linux >= 5.10, root), to see its working set grow back
from nothing: `benches/pageout.py PID [NAME]`, then read VmRSS/RssFile over time.
Used for BENCHMARKS.md's "Memory on musl"; not part of benches/run.sh."""
import ctypes, os, sys
pid=int(sys.argv[1]); target=sys.argv[2] if len(sys.argv)>2 else None
libc=ctypes.CDLL(None, use_errno=True)
SYS_pidfd_open=434; SYS_process_madvise=440; MADV_PAGEOUT=21
pidfd=libc.syscall(SYS_pidfd_open, pid, 0)
class iovec(ctypes.Structure): _fields_=[("base",ctypes.c_void_p),("len",ctypes.c_size_t)]
tot=0
for line in open(f"/proc/{pid}/maps"):
    parts=line.split()
    if len(parts)<6: continue
    if target and target not in parts[5]: continue
    a,b=[int(x,16) for x in parts[0].split('-')]
    if 'x' not in parts[1] and 'r' not in parts[1]: continue
    v=iovec(a,b-a)
    r=libc.syscall(SYS_process_madvise, pidfd, ctypes.byref(v), 1, MADV_PAGEOUT, 0)
    if r<0: print("err",ctypes.get_errno(),parts)
    else: tot+=r
print("paged out bytes advised", tot)
