#!/usr/bin/env python3
"""The node API under an unauthenticated storm, measured from outside:

    benches/node_api_storm.py PORT PID SECONDS TOKEN

against a running `picolet run --port PORT` (pid PID, its token in <cert-dir>/token): 200
half-open connections from 127.0.0.2 (half a TLS record header, then nothing) and 200 threads
reconnecting from 127.0.0.3 as soon as their connection is closed, for SECONDS; meanwhile 100
authenticated requests, each on a new TLS connection from 127.0.0.1. Prints one JSON line:
requests answered, reconnects, picolet's open descriptors and RSS (max during, after).
Loopback only. BENCHMARKS.md has the command that starts picolet and a run's figures.
"""
import socket, threading, time, sys, os, ssl, json, subprocess
port=int(sys.argv[1]); pid=int(sys.argv[2]); secs=float(sys.argv[3]); token=sys.argv[4]
stop=time.time()+secs
held=[]
def half_open(src):
    try:
        s=socket.socket(); s.bind((src,0)); s.connect(('127.0.0.1',port)); s.send(b'\x16\x03\x01'); return s
    except OSError: return None
for _ in range(200):
    s=half_open('127.0.0.2')
    if s: held.append(s)
reconn=[0]
def storm():
    while time.time()<stop:
        s=half_open('127.0.0.3')
        if not s: time.sleep(0.01); continue
        reconn[0]+=1
        s.settimeout(1)
        try: s.recv(64)
        except OSError: pass
        s.close()
threads=[threading.Thread(target=storm) for _ in range(200)]
for t in threads: t.start()
def sample():
    st=open(f'/proc/{pid}/status').read()
    rss=[l for l in st.splitlines() if l.startswith('VmRSS')][0].split()[1]
    hwm=[l for l in st.splitlines() if l.startswith('VmHWM')][0].split()[1]
    fds=len(os.listdir(f'/proc/{pid}/fd'))
    return int(rss),int(hwm),fds
ctx=ssl.create_default_context(); ctx.check_hostname=False; ctx.verify_mode=ssl.CERT_NONE
ok=0; maxfd=0; maxrss=0
time.sleep(2)
for i in range(100):
    try:
        c=socket.create_connection(('127.0.0.1',port),timeout=10)
        w=ctx.wrap_socket(c)
        w.send(f'GET /api/v1/pods HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n'.encode())
        data=b''
        while True:
            d=w.recv(65536)
            if not d: break
            data+=d
        if data.startswith(b'HTTP/1.1 200'): ok+=1
        w.close()
    except Exception as e:
        print('request',i,e)
    r,h,f=sample(); maxfd=max(maxfd,f); maxrss=max(maxrss,r)
for t in threads: t.join()
r,h,f=sample()
print(json.dumps({'answered':ok,'reconnects':reconn[0],'max_fds':maxfd,'max_rss_kb':maxrss,'hwm_kb':h,'after_fds':f,'after_rss_kb':r}))
