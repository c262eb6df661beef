#!/usr/bin/env python3
"""An X server that accepts connections and never answers (a frozen or hostile display).
Listens on /tmp/.X11-unix/X<N> for the first free N from 900, prints N, and holds every
connection open without a byte until killed."""
import os
import signal
import socket
import sys

signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

os.makedirs("/tmp/.X11-unix", exist_ok=True)
for n in range(900, 1000):
    path = f"/tmp/.X11-unix/X{n}"
    lock = f"/tmp/.X{n}-lock"
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        continue
    os.write(fd, f"{os.getpid():>10}\n".encode())
    os.close(fd)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(16)
    break
else:
    raise SystemExit("no free display number")
print(n, flush=True)
held = []
try:
    while True:
        conn, _ = server.accept()
        held.append(conn)
finally:
    os.unlink(path)
    os.unlink(lock)
