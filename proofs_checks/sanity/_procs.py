"""The processes of a check's child (:mod:`proofs_checks.sanity._isolate`): how the checks' fork
server starts without a user-controlled folder on its path, how it becomes the subreaper of what the
user's code starts, and how the parent finds, measures and kills every process of the user's code
(its descendants through ``/proc``, the orphans the server adopted, the shared memory they hold).
Linux-only parts (``/proc``, ``prctl``) do nothing elsewhere."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
from pathlib import Path

__all__ = ["ACTIVE", "isolated_start", "server", "server_boot", "server_pid", "user_tree", "tree_memory", "shm_used", "machine_held", "socket_memory",
           "own_memory", "memfd_bytes", "sysv_segments", "sysv_queues", "remove_segments", "SEGMENTS", "kill_group", "kill_below", "descendants"]

#: run first in every interpreter multiprocessing starts for the checks (the fork server, its
#: resource tracker): the path set before any import, then the server's own set-up
_BOOT = "import sys; sys.path[:] = {path!r}; "
_BOOT_SERVER = "from proofs_checks.sanity._procs import server_boot; server_boot({rest!r}); "


@contextlib.contextmanager
def isolated_start():
    """While multiprocessing starts its fork server (or resource tracker): the interpreter starts
    with ``-P`` (no working folder or script folder put first on ``sys.path``) and its first
    statement sets ``sys.path`` to :func:`proofs_checks.guards.child_sys_path` — Python 3.11's
    ``forkserver.main`` ignores the path it is given, and imported its preload list (``numpy``,
    ``torch``, …) with the working folder first: a ``random.py`` or ``numerics/`` there ran."""
    from proofs_checks.lifetime import spawns_rewritten
    from proofs_checks.syspath import split_sys_path

    first, rest = split_sys_path()
    boot, boot_server = _BOOT.format(path=first + rest), _BOOT.format(path=first) + _BOOT_SERVER.format(rest=rest)

    def rewrite(args, i):  # the fork server: the other folders after its preload (_server_ready; 48a F1)
        server = "multiprocessing.forkserver" in args[i + 1]
        args[i:i + 2] = ["-P", "-c", (boot_server if server else boot) + args[i + 1]]

    with spawns_rewritten(rewrite):
        yield


#: whether this process is the checks' fork server (set by :func:`server_boot`; read by
#: :mod:`proofs_checks.sanity._server_ready`, the last module that server imports)
IN_SERVER = False


#: the folders the fork server puts on its path once its preload list is imported (:mod:`._server_ready`)
REST_PATH: list[str] = []


def server_boot(rest: list[str] | None = None) -> None:  # pragma: no cover - runs in the fork server
    """In the fork server, before it imports anything else: on Linux it becomes the *subreaper* of
    every process the checks' children start (``PR_SET_CHILD_SUBREAPER``): an orphan — double fork,
    ``setsid``, the flag cleared in the child by the user's code, which never runs in this process —
    is adopted here, found by the parent as this server's child that is no check, and killed when the
    check ends; and, when the server ends (``tverify`` gone, even by ``kill -9``), it kills every
    process still below it."""
    import atexit
    import warnings

    global IN_SERVER
    IN_SERVER = True
    REST_PATH[:] = list(rest or ())
    # the server reaps the orphans it adopts; multiprocessing warns about each ("unexpected pid")
    warnings.filterwarnings("ignore", message="forkserver: waitpid returned unexpected pid")
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    # a session of its own: a SIGKILL to tverify's process group (``timeout -s KILL``, a CI job cancelled) killed the
    # server with it, and what it had adopted lived on (hostile pass 33a F5); it ends when tverify's end of its "alive"
    # pipe closes, however tverify ended, killing what is below it
    with contextlib.suppress(OSError, AttributeError):
        os.setsid()
    atexit.register(kill_below, os.getpid())
    atexit.register(_remove_groups_of, os.getppid())  # (registered last: runs first... then kill_below's kills)


def _remove_groups_of(pid: int) -> None:  # pragma: no cover - runs in the fork server as it ends
    """The memory cgroups ``tverify`` (``pid``) made, removed with what is in them when its fork server ends (``tverify``
    gone, even by ``kill -9``): a kill -9 left them for good (hostile pass 32a F2)."""
    with contextlib.suppress(Exception):
        from proofs_checks.sanity._cgroup import remove_groups_of

        remove_groups_of(pid)


def drop_server_client_fd() -> None:  # pragma: no cover - runs in the check's child
    """In the check's child: close the write end of ``tverify``'s "alive" pipe to the fork server,
    which multiprocessing hands every forked child. A process the user's code started inherited it,
    and the server, waiting for that pipe's end before it ends (and kills what is below it), outlived
    a ``kill -9`` of ``tverify`` with it. The user's own use of a forkserver starts a server of its own."""
    with contextlib.suppress(Exception):
        from multiprocessing import forkserver

        server = forkserver._forkserver
        fd = server._forkserver_alive_fd
        if fd is not None:
            server._forkserver_alive_fd = None
            server._forkserver_address = None
            os.close(fd)


def kill_below(pid: int) -> None:
    """SIGKILL every process below ``pid`` (again until none is left) — only in ``pid`` itself: a
    process forked from the server inherits this exit handler and must not run it."""
    if os.getpid() != pid:
        return
    for _ in range(20):
        found = descendants(pid)
        for p in found:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)
        if not found:
            return


#: tverify's own fork server (:func:`server`)
_SERVER = None


def server():
    """tverify's own fork server (a ``multiprocessing.forkserver.ForkServer`` of its own, started on first use): not the
    process-wide one, which a caller of the API may use for its own jobs (hostile pass 32a F5)."""
    global _SERVER
    if _SERVER is None:
        from multiprocessing import forkserver

        _SERVER = forkserver.ForkServer()
    return _SERVER


def server_pid() -> int | None:
    return getattr(_SERVER, "_forkserver_pid", None)


def server_alive() -> bool:
    """Whether tverify's fork server (:func:`server`) is running (not a zombie): ``False`` where none was started."""
    pid = server_pid()
    if pid is None:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False


def _forget_server() -> None:  # pragma: no cover - runs in a process forked from this one
    """In a process forked from this one (a pool's worker, ``os.fork``): the server is this process's parent's, not
    its own (a check there raised "No child processes" waiting for it: hostile pass 33a F9); its own starts on its
    first check. The parent's "alive" pipe end is closed here: the parent's server ends with the parent."""
    global _SERVER
    server, _SERVER = _SERVER, None
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
    ACTIVE.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_server)


#: the checks' children this process is running now, each with the fork server's other children when
#: it started (a caller's own forkserver processes): any other child of the server is an orphan it
#: adopted, a process the user's code started
ACTIVE: dict[int, frozenset[int]] = {}


def server_children() -> frozenset[int]:
    """The fork server's children now (empty without a server or ``/proc``)."""
    server = server_pid()
    return frozenset(_Children().get(server, ())) if server is not None else frozenset()


def _children_map() -> dict[int, list[int]]:
    """``{parent pid: [child pids]}`` from ``/proc`` (empty where there is none). One pass over
    ``/proc/*/stat`` (about a millisecond for a hundred processes)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    children: dict[int, list[int]] = {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
            ppid = int(data[data.rfind(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
    return children


class _Children:
    """``get(pid)``: the children of ``pid``, read from ``/proc/PID/task/*/children`` (a few files per
    process of the tree: a poll every 0.1 s costs next to nothing), or from one pass over every
    process's ``/proc/*/stat`` where the kernel has no such file."""

    def __init__(self):
        self._map: dict[int, list[int]] | None = None

    def get(self, pid: int, default=()) -> list[int]:
        if self._map is None:
            try:
                out: list[int] = []
                for tid in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                        out += [int(c) for c in f.read().split()]
                return out
            except FileNotFoundError:
                if os.path.exists(f"/proc/{pid}"):  # the process is there, the file is not: scan instead
                    self._map = _children_map()
                else:
                    return list(default)
            except (OSError, ValueError):
                return list(default)
        return self._map.get(pid, list(default))


def descendants(root: int, children=None) -> list[int]:
    """Process ids below ``root`` (children, their children, …) from ``/proc``."""
    children = _Children() if children is None else children
    out: list[int] = []
    todo = [root]
    while todo:
        for c in children.get(todo.pop(), ()):
            if c not in out:
                out.append(c)
                todo.append(c)
    return out


def user_tree(pid: int) -> list[int]:
    """Every process of the user's code below the check's child ``pid`` (not ``pid`` itself): its
    descendants, and the orphans the fork server adopted (its children that are no running check's)
    with theirs."""
    children = _Children()
    found = descendants(pid, children)
    server = server_pid()
    if server is not None:
        for orphan in children.get(server, ()):
            if orphan not in ACTIVE and orphan not in ACTIVE.get(pid, ()) and orphan != pid and orphan not in found:
                found += [orphan, *descendants(orphan, children)]
    return found


def server_orphans_into(group, pid: int) -> None:
    """Move into the check's memory cgroup ``group`` every process the fork server holds that is no running check's
    and was not there when the check ``pid`` started, with its descendants: the orphans it adopted (in the group
    already) and a process the user's code had the server fork for it over the server's socket, which starts in the
    server's own group and held 1.5 GB there unseen (hostile pass 32a F1). What it allocates from then on is the
    group's; the first poll (every 0.1 s) moves it."""
    server = server_pid()
    if server is None or group is None:
        return
    children = _Children()
    for orphan in children.get(server, ()):
        if orphan not in ACTIVE and orphan not in ACTIVE.get(pid, ()) and orphan != pid:
            for p in (orphan, *descendants(orphan, children)):
                group.join(p)


def _live_task(pid: int):
    """``/proc/PID``, then each other thread's ``/proc/PID/task/TID``: the process's own figures are empty once its main
    thread has ended (``pthread_exit`` in the main thread; the process goes on in the others), and 1.2 GB held by its
    other thread went uncounted without a cgroup (hostile pass 39a F3)."""
    yield Path(f"/proc/{pid}")
    try:
        tasks = [t for t in Path(f"/proc/{pid}/task").iterdir() if t.name != str(pid)]
    except OSError:
        return
    yield from tasks


def _status_kb(pid, keys: tuple[str, ...]) -> dict[str, float]:
    try:
        text = (pid / "status" if isinstance(pid, Path) else Path(f"/proc/{pid}/status")).read_text()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in keys:
            with contextlib.suppress(ValueError, IndexError):
                out[key] = float(rest.split()[0]) * 1024
    return out


def _memory_kb(pid: int) -> dict[str, float]:
    """``{"anon", "shmem"}`` bytes of the process: its *proportional* share (``Pss_Anon``, ``Pss_Shmem`` of
    ``/proc/PID/smaps_rollup``) where the kernel gives it, so that pages copy-on-write shared by a process and
    the copies it forks count once in a sum over them (a module forking in every forward was counted 10.9 GB
    by resident sets summed); else the resident sets (``RssAnon``, ``RssShmem`` of ``/proc/PID/status``). Huge pages
    it maps (``MAP_HUGETLB``, a hugetlbfs file: ``Private_Hugetlb`` + ``Shared_Hugetlb``, else ``HugetlbPages``) are in
    ``"anon"``: they are in neither figure, nor in a memory cgroup's count (2 GB passed --max-memory 1.0: hostile pass
    34a F4)."""
    for where in _live_task(pid):  # (a process whose main thread ended: its memory is read through a live thread)
        try:
            text = (where / "smaps_rollup").read_text()
        except OSError:
            text = ""
        pss = {}
        for line in text.splitlines():
            key, _, rest = line.partition(":")
            if key in ("Pss_Anon", "Pss_Shmem", "Private_Hugetlb", "Shared_Hugetlb"):
                with contextlib.suppress(ValueError, IndexError):
                    pss[key] = float(rest.split()[0]) * 1024
        if "Pss_Anon" in pss:
            huge = pss.get("Private_Hugetlb", 0.0) + pss.get("Shared_Hugetlb", 0.0)
            return {"anon": pss["Pss_Anon"] + huge + _kernel_stacks(pid), "shmem": pss.get("Pss_Shmem", 0.0)}
        own = _status_kb(where, ("RssAnon", "RssShmem", "VmRSS", "HugetlbPages"))
        if own:
            break
    else:
        return {}
    return {"anon": own.get("RssAnon", own.get("VmRSS", 0.0)) + own.get("HugetlbPages", 0.0) + _kernel_stacks(pid),
            "shmem": own.get("RssShmem", 0.0)}


#: the kernel stack of a thread (``THREAD_SIZE`` on x86-64 and arm64), kernel memory in no resident-set figure
KERNEL_STACK = 16 * 1024


def _kernel_stacks(pid: int) -> float:
    """The kernel stacks of the process's threads (``Threads`` of ``/proc/PID/status`` × :data:`KERNEL_STACK`): 16,000
    threads hold ≈ 250 MB there, which only a memory cgroup counted (hostile pass 35a F4)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"Threads:"):
                    return float(int(line.split()[1]) * KERNEL_STACK)
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def _unescape(field: str) -> str:
    """A mount point as the kernel writes it in ``/proc/self/mounts``: space, tab, newline and backslash as octal
    escapes (a tmpfs mounted at a folder with a tab in its name was skipped: hostile pass 31a F3)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def socket_memory() -> float:
    """Bytes the kernel holds in socket buffers: TCP and UDP (``mem`` of ``/proc/net/sockstat``, in pages: the
    protocols' memory, shared by every network namespace) and Unix-domain sockets (:func:`unix_socket_memory`); 0 for
    what cannot be read. Data sent on a loopback connection or a socket pair and never read is in no process's memory
    and, on cgroup v1, the TCP part in no memory cgroup's count (1.4 GB passed --max-memory 1.0: hostile passes 33a F1,
    34a F5)."""
    total = 0.0
    try:
        with open("/proc/net/sockstat", encoding="ascii", errors="replace") as fh:
            for line in fh:
                proto, _, rest = line.partition(":")
                f = rest.split()
                if proto.strip() in ("TCP", "UDP", "UDPLITE") and "mem" in f[:-1]:
                    total += float(f[f.index("mem") + 1])
    except (OSError, ValueError, IndexError):
        total = 0.0
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    return total * page + unix_socket_memory() + queued_in_proc_net()


def queued_in_proc_net() -> float:
    """Bytes queued on this network namespace's netlink sockets (``Rmem`` and ``Wmem`` of ``/proc/net/netlink``),
    packet sockets (``Rmem`` of ``/proc/net/packet``) and raw IP sockets (``tx_queue`` and ``rx_queue`` of
    ``/proc/net/raw``, ``raw6``), every one: in no process's memory, no memory cgroup's count (the kernel charges no
    socket buffer to a v1 group) and not in ``/proc/net/sockstat``'s figures (1.5 GB queued on a netlink socket and
    never read passed --max-memory 0.5: hostile pass 38a F2); 0 for what cannot be read."""
    total = 0.0
    for name, cols in (("netlink", ("Rmem", "Wmem")), ("packet", ("Rmem",))):
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/net/{name}", encoding="ascii", errors="replace") as fh:
                head = fh.readline().split()
                at = [head.index(c) for c in cols]
                for line in fh:
                    f = line.split()
                    total += sum(float(f[i]) for i in at if i < len(f))
    for name in ("raw", "raw6"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/net/{name}", encoding="ascii", errors="replace") as fh:
                fh.readline()
                for line in fh:
                    tx, _, rx = line.split()[4].partition(":")
                    total += int(tx, 16) + int(rx, 16)
    return total


def unix_socket_memory() -> float:
    """Bytes queued on the Unix-domain sockets of this network namespace, every one (sent and not yet read: charged to
    the sending socket, ``wmem_alloc``, as the receiving one's ``rmem_alloc``), read from the kernel's socket
    diagnostics (netlink ``SOCK_DIAG_BY_FAMILY``, ``UDIAG_SHOW_MEMINFO``: what ``ss -x -m`` shows; no privilege
    needed); 0 where that cannot be read. ``/proc`` has no such figure."""
    import socket
    import struct

    diag, by_family, done_types = 4, 20, (2, 3)  # NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY, NLMSG_ERROR/NLMSG_DONE
    show_meminfo, meminfo = 0x20, 5  # UDIAG_SHOW_MEMINFO, UNIX_DIAG_MEMINFO (linux/unix_diag.h)
    total = 0
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, diag) as s:
            s.settimeout(1.0)
            req = struct.pack("=BBHIIIII", socket.AF_UNIX, 0, 0, 0xFFFFFFFF, 0, show_meminfo, 0, 0)
            s.send(struct.pack("=IHHII", 16 + len(req), by_family, 0x301, 1, 0) + req)  # NLM_F_REQUEST | NLM_F_DUMP
            while True:
                data, off = s.recv(1 << 16), 0
                if not data:
                    return float(total)
                while off + 16 <= len(data):
                    length, kind = struct.unpack_from("=IH", data, off)
                    if kind in done_types or length < 16:
                        return float(total)
                    a, end = off + 32, off + length  # past the message header and struct unix_diag_msg
                    while a + 4 <= end:
                        alen, atype = struct.unpack_from("=HH", data, a)
                        if alen < 4:
                            break
                        if atype == meminfo and alen >= 16:
                            rmem, _, wmem = struct.unpack_from("=III", data, a + 4)
                            total += rmem + wmem
                        a += (alen + 3) & ~3
                    off += (length + 3) & ~3
    except (OSError, AttributeError, struct.error):
        return float(total)


def machine_held() -> float:
    """What a check's memory figure counts machine-wide, by its growth since the check started: the RAM-backed
    filesystems (:func:`shm_used`) and the socket buffers (:func:`socket_memory`)."""
    return shm_used() + socket_memory()


def shm_used() -> float:
    """Bytes in use in the machine's RAM-backed filesystems: ``/dev/shm`` (``multiprocessing.shared_memory``, POSIX
    shared memory) and every other ``tmpfs`` or ``devtmpfs`` mount (a file written to ``/dev``, to a ``/tmp`` or
    ``/run/user/UID`` held in memory: hostile pass 30a F1), each filesystem once; 0 where there is none."""
    mounts = ["/dev/shm"]
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as fh:
            mounts += [_unescape(f[1]) for f in (ln.split() for ln in fh) if len(f) > 2
                       and f[2] in ("tmpfs", "devtmpfs")]
    except OSError:
        pass
    total, seen = 0.0, set()
    for m in mounts:
        try:
            dev = os.stat(m).st_dev
            if dev in seen:
                continue
            seen.add(dev)
            st = os.statvfs(m)
        except (OSError, AttributeError):
            continue
        total += float(st.f_blocks - st.f_bfree) * st.f_frsize
    return total


#: check child's pid -> the SysV shared memory segments counted as its tree's (:func:`sysv_segments`)
SEGMENTS: dict[int, set[int]] = {}
#: check child's pid -> the segments its tree made or was seen writing, and the queues it sent to: removed when the
#: check ends (a segment another program made during the check and the code only read, or a queue it only received
#: from, was removed with the other program's data: hostile pass 37a F4)
OWNED: dict[int, set[int]] = {}
OWNED_QUEUES: dict[int, set[int]] = {}


def memfd_bytes(pids) -> float:
    """Bytes held in memory files (``os.memfd_create``, and ``memfd_secret``'s, whose mapped pages are in no
    process's anonymous or shared figure) the processes keep open, mapped or not (a memfd written with ``os.write`` is
    in no process's RSS): each file once, by its allocated size (its size where the kernel gives no blocks)."""
    seen, total = set(), 0.0
    for p in pids:
        fds, where = [], None
        for where in _live_task(p):  # (a process whose main thread ended keeps its files in its other threads: 39a F3)
            with contextlib.suppress(OSError):
                fds = os.listdir(where / "fd")
            if fds:
                break
        for n in fds:
            path = f"{where}/fd/{n}"
            try:
                if not os.readlink(path).startswith(("/memfd:", "/secretmem")):  # (memfd_secret: 38a F3)
                    continue
                st = os.stat(path)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += float(getattr(st, "st_blocks", 0) * 512 or st.st_size)
    return total


#: check child's pid -> the SysV segments that existed before it started: never counted or removed as the check's (a
#: segment made before the check, attached by its code or made by a process whose pid a process of the check reused,
#: was removed at the end: hostile pass 32a F3, F4)
SEGMENTS_BEFORE: dict[int, set[int]] = {}


def segment_ids() -> set[int]:
    """Every SysV shared memory segment's id now."""
    try:
        lines = Path("/proc/sysvipc/shm").read_text().splitlines()
    except OSError:
        return set()
    if not lines:
        return set()
    col = lines[0].split().index("shmid") if "shmid" in lines[0].split() else 1
    out = set()
    for line in lines[1:]:
        with contextlib.suppress(ValueError, IndexError):
            out.add(int(line.split()[col]))
    return out


def _sysvipc(kind: str) -> list[dict[str, str]]:
    """The rows of ``/proc/sysvipc/KIND`` (``shm``, ``msg``) as dicts by the header's column names; none where it
    cannot be read."""
    try:
        lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
    except OSError:
        return []
    head = lines[0].split() if lines else []
    return [dict(zip(head, line.split())) for line in lines[1:]]


def sysv_segments(pids, before=frozenset(), made: set | None = None) -> dict[int, float]:
    """SysV shared memory segments (``shmget``) created by one of ``pids`` (or by a process now gone, attached last by
    one of them): id -> bytes resident
    (the ``rss`` column of ``/proc/sysvipc/shm`` where the kernel has it, else the size). A segment
    outlives its detach and its creator until removed. ``made``: the ids of those whose creator is one of ``pids``
    are added to it."""
    wanted, out = set(pids), {}
    for row in _sysvipc("shm"):
        with contextlib.suppress(KeyError, ValueError):
            cpid, lpid = int(row["cpid"]), int(row.get("lpid", "0"))
            # or one whose creator is gone and which one of pids attached last: made by a short-lived fork of the
            # user's code, then used by the tree (it escaped the limit and outlived the check: hostile pass 21a F9)
            if int(row["shmid"]) in before:
                continue
            if cpid in wanted or (lpid in wanted and not os.path.exists(f"/proc/{cpid}")):
                out[int(row["shmid"])] = float(row.get("rss", row["size"]))
                if made is not None and cpid in wanted:
                    made.add(int(row["shmid"]))
    return out


def written_segments(pids, ids) -> set[int]:
    """Those of the segments ``ids`` that one of ``pids`` maps writable now (``/proc/PID/maps``: a SysV segment's line
    has its id as the inode): a segment whose creator is gone is the check's only where the code was seen writing it."""
    out: set[int] = set()
    if not ids:
        return out
    for p in pids:
        for where in _live_task(p):  # (the maps of a process whose main thread ended: through a live thread)
            lines = []
            with contextlib.suppress(OSError), open(where / "maps", encoding="ascii", errors="replace") as fh:
                lines = fh.readlines()
            for line in lines:
                if "/SYSV" in line:
                    f = line.split()
                    with contextlib.suppress(IndexError, ValueError):
                        if "w" in f[1] and int(f[4]) in ids:
                            out.add(int(f[4]))
            if lines:
                break
    return out


#: check child's pid -> the SysV message queues its tree sent to (removed when the check ends), and those that existed
#: before it started (never counted or removed as the check's)
QUEUES: dict[int, set[int]] = {}
QUEUES_BEFORE: dict[int, set[int]] = {}


def queue_ids() -> set[int]:
    """Every SysV message queue's id now."""
    return set(sysv_queues(None))


def sysv_queues(pids, before=frozenset(), sent: set | None = None) -> dict[int, float]:
    """SysV message queues (``msgget``) that one of ``pids`` sent to or received from last (``lspid``, ``lrpid``; a
    queue has no creator's pid), not in ``before``: id -> bytes queued (``cbytes`` of ``/proc/sysvipc/msg``); every
    queue where ``pids`` is None. Messages left in a queue are kernel memory in no process's count, and outlive the
    check until removed (30,000 queues held 490 MB under --max-memory 0.3: hostile pass 35a F3)."""
    out: dict[int, float] = {}
    wanted = None if pids is None else set(pids)
    for row in _sysvipc("msg"):
        with contextlib.suppress(KeyError, ValueError):
            qid = int(row["msqid"])
            if qid in before:
                continue
            if wanted is None or int(row["lspid"]) in wanted or int(row["lrpid"]) in wanted:
                out[qid] = float(row["cbytes"])
                if sent is not None and wanted is not None and int(row["lspid"]) in wanted:
                    sent.add(qid)
    return out


def remove_segments(pid: int, pids) -> None:
    """Remove (``IPC_RMID``) the SysV segments the check's tree created or was seen writing, and the message queues it
    sent to last: those seen while it ran and those of ``pids`` now. A segment it only read, or a queue it only
    received from, is left (another program's data, made during the check: hostile pass 37a F4)."""
    before = SEGMENTS_BEFORE.pop(pid, set())
    SEGMENTS.pop(pid, None)
    QUEUES.pop(pid, None)
    ids = OWNED.pop(pid, set())
    sysv_segments({pid, *pids}, before, made=ids)
    ids -= before
    qbefore = QUEUES_BEFORE.pop(pid, set())
    queues = OWNED_QUEUES.pop(pid, set())
    sysv_queues({pid, *pids}, qbefore, sent=queues)
    queues -= qbefore
    if not (ids or queues) or not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        for shmid in ids:
            libc.shmctl(ctypes.c_int(shmid), ctypes.c_int(0), None)  # IPC_RMID
        for qid in queues:
            libc.msgctl(ctypes.c_int(qid), ctypes.c_int(0), None)  # IPC_RMID


def own_memory(pid: int) -> float | None:
    """The process's own resident memory (anonymous and shared), without what it started: the base a
    check's memory is counted from (a process forked at the user's import before the first reading
    is counted in full)."""
    own = _memory_kb(pid)
    return own["anon"] + own["shmem"] if own else None


def tree_memory(pid: int, shm_start: float, mapped: bool = True) -> float | None:
    """Memory of the user's code now: anonymous memory of the child and every process below it (each
    process's proportional share, :func:`_memory_kb`), plus the shared memory they hold — the larger of what they map (``RssShmem``) and what they
    hold mapped or not: what ``/dev/shm`` grew by since the check started (a segment unmapped but not
    unlinked still holds memory), the memory files they keep open (``memfd_create``) and the SysV
    segments they created (recorded in :data:`SEGMENTS` for removal). ``None`` when the child cannot
    be read. ``mapped=False`` (where the check's memory cgroup counts what the code's processes make, shared
    memory included): what they map is left out, so a segment or ``/dev/shm`` file that existed before the check and is
    only read is not the check's (hostile pass 33a F8); what they made is in the group's figure."""
    own = _memory_kb(pid)
    if not own:
        return None
    anon, shmem = own["anon"], own["shmem"]
    tree = user_tree(pid)
    for p in tree:  # proportional shares: a page the child and its forks share counts once in the sum
        m = _memory_kb(p)
        anon += m.get("anon", 0.0)
        shmem += m.get("shmem", 0.0)
    owned = OWNED.setdefault(pid, set())
    segments = sysv_segments({pid, *tree}, SEGMENTS_BEFORE.get(pid, frozenset()), made=owned)
    SEGMENTS.setdefault(pid, set()).update(segments)
    owned |= written_segments([pid, *tree], set(segments) - owned)  # (read only where a creator is gone)
    queues = sysv_queues({pid, *tree}, QUEUES_BEFORE.get(pid, frozenset()), sent=OWNED_QUEUES.setdefault(pid, set()))
    QUEUES.setdefault(pid, set()).update(queues)
    held = (max(machine_held() - shm_start, 0.0) + memfd_bytes([pid, *tree]) + sum(segments.values())
            + sum(queues.values()))
    return anon + (max(shmem, held) if mapped else held)


def kill_group(pid: int) -> None:
    if hasattr(os, "killpg"):
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)  # the child's own group (its pid; ESRCH before its setsid)
