"""Runs as a rank's last wrapper (argv: namespace, program...): puts the rank into
its domain's network namespace and execs the program there. Standard library
only: it runs as a script, in the rank's environment.

The rank enters as `ip netns exec` does: setns into the network namespace,
then a mount namespace of its own (mounts still propagating from the host's,
so /dev/shm is the host's) with that network namespace's /sys (MPICH over UCX
finds its TCP interfaces in /sys/class/net; through the host's /sys it would
see only the host's). The program execs directly, with the preload
(VHPC_PLACEMENT_PRELOAD) as its LD_PRELOAD: nothing in between is preloaded.

A launcher that reaches its ranks over loop-back TCP cannot reach a rank in
another namespace: Open MPI 4.1's ranks connect to the PMIx server of
`mpiexec` at 127.0.0.1 (`PMIX_SERVER_URI*`). For such a rank this forks a
relay first: a listening socket made inside the rank's namespace (on its own
loop-back, a port of its own) whose connections it forwards to the server's
port on the host's loop-back; the rank's URIs are rewritten to that port. The
relay carries only the launcher's control messages (start-up, fences, exit),
never MPI traffic, and dies with its rank (PR_SET_PDEATHSIG). Hydra (MPICH)
talks to its ranks through an inherited socket (PMI_FD): nothing to relay.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import socket
import sys
import threading

CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
MS_REC, MS_SLAVE = 0x4000, 1 << 19
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
NETNS_DIR = "/run/netns"
#: PMIx's server URIs, as Open MPI 4.1's mpiexec passes them: `<nspace>;tcp4://127.0.0.1:<port>`.
URI = re.compile(r"^(?P<head>.*;tcp4://127\.0\.0\.1:)(?P<port>\d+)$")

_libc = ctypes.CDLL(None, use_errno=True)


def check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def setns(fd: int) -> None:
    check(_libc.setns(fd, CLONE_NEWNET), "setns")


def enter(namespace: str) -> None:
    """This process into `namespace`, with a /sys of that namespace (`ip netns exec`)."""
    fd = os.open(os.path.join(NETNS_DIR, namespace), os.O_RDONLY)
    try:
        setns(fd)
    finally:
        os.close(fd)
    check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    check(_libc.mount(b"none", b"/", None, MS_REC | MS_SLAVE, None), "mount --make-rslave /")
    _libc.umount2(b"/sys", MNT_DETACH)  # may not be mounted: then nothing to hide
    check(_libc.mount(namespace.encode(), b"/sys", b"sysfs", 0, None), "mount sysfs")


def listener_in(namespace: str) -> socket.socket:
    """A socket listening on 127.0.0.1 (a free port) inside `namespace`; this thread
    comes back to its own namespace."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    there = os.open(os.path.join(NETNS_DIR, namespace), os.O_RDONLY)
    try:
        setns(there)
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", 0))
            sock.listen(16)
        finally:
            setns(home)
    finally:
        os.close(home)
        os.close(there)
    return sock


def pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(1 << 16):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def relay(sock: socket.socket, port: int) -> None:
    """Forever: each connection accepted on `sock` joined to 127.0.0.1:`port` here."""
    while True:
        inner, _ = sock.accept()
        outer = socket.create_connection(("127.0.0.1", port))
        for a, b in ((inner, outer), (outer, inner)):
            threading.Thread(target=pump, args=(a, b), daemon=True).start()


def start_relay(namespace: str, port: int) -> int:
    """Fork a relay from a fresh port in `namespace` to `port` here; its port."""
    sock = listener_in(namespace)
    local = sock.getsockname()[1]
    parent = os.getpid()
    if os.fork() == 0:  # the relay: no stdio of the rank's (the launcher waits on it)
        try:
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent:
                os._exit(0)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.closerange(3, sock.fileno())
            os.closerange(sock.fileno() + 1, 1 << 16)
            relay(sock, port)
        finally:
            os._exit(0)
    sock.close()
    return local


def relayed_env(namespace: str, env: dict[str, str]) -> dict[str, str]:
    """`env` with every loop-back PMIx server URI pointing at a relay in `namespace`
    (one relay per server port)."""
    relays: dict[int, int] = {}
    out = dict(env)
    for key, value in env.items():
        if not key.startswith("PMIX_SERVER_URI"):
            continue
        m = URI.match(value)
        if m is None:
            continue
        port = int(m.group("port"))
        if port not in relays:
            relays[port] = start_relay(namespace, port)
        out[key] = f"{m.group('head')}{relays[port]}"
    return out


def main(argv: list[str]) -> None:
    namespace, program = argv[1], argv[2:]
    env = relayed_env(namespace, dict(os.environ))
    enter(namespace)
    preload = env.pop("VHPC_PLACEMENT_PRELOAD", "")
    if preload:
        env["LD_PRELOAD"] = preload
    os.execvpe(program[0], program, env)


if __name__ == "__main__":
    main(sys.argv)
