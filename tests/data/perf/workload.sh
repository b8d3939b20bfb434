#!/bin/bash
# ~1.5 s of three workloads: AES-GCM (crypto), UDP sendto to localhost (packet I/O), tmpfs writes (file I/O)
openssl speed -seconds 1 -bytes 1350 -evp aes-128-gcm >/dev/null 2>&1 &
/usr/bin/python3 -c '
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); r.bind(("127.0.0.1", 0))
addr = r.getsockname(); buf = b"x" * 1200; end = time.time() + 1.0
while time.time() < end:
    for _ in range(100):
        s.sendto(buf, addr)
        r.recv(2048)
' &
dd if=/dev/zero of=/dev/shm/qir-perf-dd bs=64k count=8000 status=none &
wait
rm -f /dev/shm/qir-perf-dd
