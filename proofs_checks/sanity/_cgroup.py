"""A memory cgroup for a check's child, where the machine lets this process make one (issue 44, item 2).

Every process the user's code starts stays in the cgroup its parent is in, whatever it does to its session, its
parent or its mount namespace, so the kernel's own accounting of the group counts what the polling of ``/proc``
(:func:`proofs_checks.sanity._procs.tree_memory`) cannot see: a ``tmpfs`` mounted in a private mount namespace, the
memory file of a process whose descriptors cannot be read (not dumpable), page tables, the inodes of empty files in a
RAM-backed filesystem (hostile pass 31a F1-F5). The figure is the group's memory less its page cache of ordinary
files on the kernel's reclaimable lists (reading a large data file is not holding memory): anonymous memory, shared
memory (``tmpfs``, ``memfd``, ``/dev/shm``), locked pages and kernel memory charged to it. The group is also how the check finds every process of the user's code
when it ends.

Made under this process's own cgroup: cgroup v2 where memory is delegated there (``memory`` in its
``cgroup.subtree_control``), else the v1 ``memory`` hierarchy where this process may write (a root container). Where
neither is possible (an unprivileged user on most systems) :meth:`MemoryCgroup.make` returns ``None`` and the checks
count memory by ``/proc`` alone (docs/own-model.md says what holds where)."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import stat
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["MemoryCgroup"]

_ROOT = Path("/sys/fs/cgroup")
_COUNT = itertools.count()
#: the groups this process made (one of its pid that is not among them was left by a process that had the pid before)
_MINE: set[str] = set()


def _own(controller: str | None) -> Path | None:
    """This process's cgroup folder in the v1 hierarchy of ``controller``, or in the v2 hierarchy (``None``); ``None``
    where the folder ``/proc/self/cgroup`` names does not hold this process. In a cgroup namespace (``unshare -C``, a
    sandbox) that path is relative to the namespace's root while ``/sys/fs/cgroup`` may still be the machine's mount:
    the check's group was made at the machine's root, and the code moved out of the job's limit (hostile pass 35a F1)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if (controller is None and ctrls == "") or (controller is not None and controller in ctrls.split(",")):
            base = _ROOT if controller is None else _ROOT / controller
            folder = base / path.lstrip("/")
            return folder if ".." not in Path(path).parts and _holds_self(folder) else None
    return None


def _holds_self(folder: Path) -> bool:
    """Whether this process is one of ``folder``'s (its ``cgroup.procs`` lists this process's pid)."""
    me = str(os.getpid())
    try:
        with open(folder / "cgroup.procs", encoding="ascii") as fh:
            return any(line.strip() == me for line in fh)
    except OSError:
        return False


def _stat(folder: Path) -> dict[str, int]:
    out = {}
    with contextlib.suppress(OSError):
        for line in (folder / "memory.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            with contextlib.suppress(ValueError):
                out[key] = int(value)
    return out


def _subfolders(fd: int) -> list[str]:
    out = []
    with contextlib.suppress(OSError):
        for name in os.listdir(fd):
            with contextlib.suppress(OSError):
                if stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    out.append(name)
    return out


def _walk(folder: Path | int, removed: bool = False) -> Iterator[int]:
    """A descriptor of ``folder`` and of every folder below it, parents first, each opened relative to its parent: no
    path is built, so a group the code nested deeper than PATH_MAX is walked too (its long path made ``pids()`` raise
    ENAMETOOLONG in a traceback, and a sweep meeting it left every later check without a group: hostile pass 37a F2),
    and no recursion bounds the depth. ``removed``: each folder below ``folder`` removed once its own subtree is done
    (children first; the kernel refuses a group that still holds a process). The descriptors are closed here."""
    try:  # (a descriptor: a duplicate of it, closed here)
        top = os.dup(folder) if isinstance(folder, int) else os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    stack = [(top, iter(_subfolders(top)), "")]
    try:
        yield top
        while stack:
            fd, names, _ = stack[-1]
            name = next(names, None)
            if name is None:
                stack.pop()
                os.close(fd)
                if removed and stack:
                    with contextlib.suppress(OSError):
                        os.rmdir(_, dir_fd=stack[-1][0])
                continue
            try:
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:
                continue
            stack.append((child, iter(_subfolders(child)), name))
            yield child
    finally:
        for fd, _, _ in stack:
            with contextlib.suppress(OSError):
                os.close(fd)


def _read_at(fd: int, name: str) -> str:
    inner = os.open(name, os.O_RDONLY, dir_fd=fd)
    with open(inner, encoding="ascii", errors="replace") as fh:
        return fh.read()


def _pid_namespace() -> str:
    """This process's PID namespace (its inode), as a group's name carries it: a pid means something in it alone."""
    try:
        return f"n{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return "n0"


def _sweep(parent: Path) -> None:
    """The groups a tverify that is gone left in ``parent`` (killed with SIGKILL before it could remove its own): what
    is still in them is killed and they are removed (a group of a tverify still running is never touched; one of this
    process's pid that it did not make was left by an earlier process with the same pid). A group made in another PID
    namespace is not judged by its pid, which is not one of this namespace's (a running check there was killed as a
    dead tverify's: hostile pass 33a F2): it is removed only when that namespace is gone, which this process can tell
    from the machine's first namespace alone, where every process is seen (:func:`_live_namespaces`), and only when
    empty (the kernel refuses to remove a group that holds a process): the group of a sandboxed check killed with its
    sandbox was otherwise left for good (34a F2)."""
    ns = _pid_namespace()
    live: set[str] | None | bool = False  # (read once, when a group of another namespace is found)
    for folder in parent.glob("tverify-*-*"):
        parts = folder.name.split("-")
        try:
            pid = int(parts[1])
        except (IndexError, ValueError):
            continue
        if parts[-1].startswith("n") and parts[-1] != ns:
            live = _live_namespaces(ns) if live is False else live
            if live is not None and parts[-1] not in live and parts[-1] != "n0":
                for _ in _walk(folder, removed=True):
                    pass
                with contextlib.suppress(OSError):
                    folder.rmdir()
            continue
        if folder.name not in _MINE and (pid == os.getpid() or not Path(f"/proc/{pid}").exists()):
            MemoryCgroup(folder, (folder / "memory.current").is_file()).close()


#: the inode of the machine's first PID namespace (the kernel's PROC_PID_INIT_INO): from it every process is seen
_FIRST_PID_NAMESPACE = "n4026531836"


def _live_namespaces(ns: str) -> set[str] | None:
    """The PID namespaces some process is in (``n<inode>``, read from ``/proc/*/ns/pid``) where this process is in the
    machine's first namespace (``ns``) and so sees every process; ``None`` elsewhere (a namespace outside this one's
    view is never taken for gone)."""
    if ns != _FIRST_PID_NAMESPACE:
        return None
    live = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                if (proc / "stat").read_text().rpartition(")")[2].split()[0] == "Z":
                    continue  # a zombie runs nothing and holds no memory: the namespace's init, killed, that its new
                    # parent (a container's pid 1 that reaps nothing) never waited for kept it "live" (34a F2)
                live.add(f"n{os.stat(proc / 'ns' / 'pid').st_ino}")
    return live


def remove_groups_of(pid: int) -> None:
    """Every group the process ``pid`` made below this process's own (the fork server's, the same as its tverify's),
    killed and removed: what the fork server does as it ends."""
    for parent in (_own(None), _own("memory")):
        if parent is not None and parent.is_dir():
            for folder in parent.glob(f"tverify-{pid}-*"):
                MemoryCgroup(folder, (folder / "memory.current").is_file()).close()


#: the most seconds :meth:`MemoryCgroup.close` keeps killing and thawing the processes left in a check's group
CLOSE_WAIT = 5.0


def _thaw(pid: int) -> list[tuple[Path, tuple[str, ...], str]]:
    """Thaw the freezer cgroup ``pid`` is in (v1 ``freezer.state``, v2 ``cgroup.freeze``) and every frozen group above
    it, from the top down, if the code froze them: a frozen process's SIGKILL waits until it is thawed, and it outlived
    the check with its memory group (hostile pass 36a F1); a group is frozen too while a group above it is, and cannot
    be thawed until that one is (37a F1). Each group is reached by descriptors relative to its parent (one nested
    deeper than PATH_MAX was never thawed: 38a F6). Returns the groups above the process's own that were thawed, for
    :func:`_refreeze` (other processes may be in them). Every thread's groups: a v1 group takes single threads (its
    ``tasks``), and one thread frozen alone kept its process alive past the check (39a F1, F2)."""
    lines = []
    for where in [Path(f"/proc/{pid}")] + sorted(_tasks(pid)):
        with contextlib.suppress(OSError):
            lines += [ln for ln in (where / "cgroup").read_text().splitlines() if ln not in lines]
    thawed = []
    for line in lines:
        _, ctrls, path = (line.split(":", 2) + ["", ""])[:3]
        if ctrls == "":
            base, file, value = _ROOT, "cgroup.freeze", "0"
        elif "freezer" in ctrls.split(","):
            base, file, value = _ROOT / "freezer", "freezer.state", "THAWED"
        else:
            continue
        parts = tuple(p for p in path.split("/") if p)
        if ".." in parts:
            continue
        reached, last = 0, None
        for depth, fd in enumerate(_descend(base, parts), start=1):
            reached = depth
            if _thawed_at(fd, file, value) and depth < len(parts):
                thawed.append((base, parts[:depth], file))
            if depth < len(parts):  # (a duplicate of the deepest group reached short of the process's own)
                with contextlib.suppress(OSError):
                    if last is not None:
                        os.close(last)
                    last = os.dup(fd)
        if last is not None:
            try:
                if reached < len(parts):  # /proc/PID/cgroup cuts a path at PATH_MAX: below the deepest group reached,
                    for fd in _walk(last):  # every frozen one thawed, parents first, the process's own among them (38a F6)
                        _thawed_at(fd, file, value)
            finally:
                os.close(last)
    return thawed


def _tasks(pid: int) -> list[Path]:
    try:
        return [p for p in Path(f"/proc/{pid}/task").iterdir() if p.name != str(pid)]
    except OSError:
        return []


def _thawed_at(fd: int, file: str, value: str) -> bool:
    """Whether the group at ``fd`` was frozen, thawed now."""
    try:
        if _read_at(fd, file).strip() not in ("0", "THAWED"):
            _write_at(fd, file, value)
            return True
    except OSError:
        pass
    return False


def _descend(base: Path, parts: tuple[str, ...]) -> Iterator[int]:
    """A descriptor of each folder ``base/parts[0]``, ``base/parts[0]/parts[1]``, … in turn, each opened relative to
    the one before (closed here)."""
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        for part in parts:
            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = child
            yield fd
    except OSError:
        return
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)


def _write_at(fd: int, name: str, text: str) -> None:
    inner = os.open(name, os.O_WRONLY, dir_fd=fd)
    try:
        os.write(inner, text.encode())
    finally:
        os.close(inner)


def _refreeze(thawed: list[tuple[Path, tuple[str, ...], str]]) -> None:
    """The groups above the code's processes that :func:`_thaw` thawed, frozen again once those processes are gone."""
    for base, parts, file in reversed(thawed):
        for depth, fd in enumerate(_descend(base, parts), start=1):
            if depth == len(parts):
                with contextlib.suppress(OSError):
                    _write_at(fd, file, "1" if file == "cgroup.freeze" else "FROZEN")


class MemoryCgroup:
    """One check's memory cgroup: :meth:`join` a process, :meth:`used` bytes, :meth:`close` (kill what is left in it,
    remove it)."""

    def __init__(self, folder: Path, v2: bool):
        self.folder, self.v2 = folder, v2

    @classmethod
    def make(cls) -> "MemoryCgroup | None":
        import secrets

        # a name no other process used: a group a tverify killed with SIGKILL left under this pid (reused) made the
        # mkdir fail, and the check ran without a group (32a F2)
        name = f"tverify-{os.getpid()}-{next(_COUNT)}-{secrets.token_hex(4)}-{_pid_namespace()}"
        _MINE.add(name)
        v2 = _own(None)
        if v2 is not None and (_ROOT / "cgroup.controllers").is_file():
            with contextlib.suppress(OSError):
                if "memory" in (v2 / "cgroup.subtree_control").read_text().split():
                    _sweep(v2)
                    (v2 / name).mkdir()
                    return cls(v2 / name, True)
        v1 = _own("memory")
        if v1 is not None and v1.is_dir():
            with contextlib.suppress(OSError):
                _sweep(v1)
                (v1 / name).mkdir()
                if (v1 / name / "memory.usage_in_bytes").is_file():
                    return cls(v1 / name, False)
                (v1 / name).rmdir()
        return None

    def join(self, pid: int = 0) -> bool:
        """Move ``pid`` (0: the calling process) into the group; False where that is refused."""
        try:
            (self.folder / "cgroup.procs").write_text(str(pid))
            return True
        except OSError:
            return False

    def used(self) -> float | None:
        """Bytes the group holds that the kernel cannot reclaim: its whole charge (swap included, where the kernel counts
        it: v1 ``memory.memsw.usage_in_bytes``, v2 ``memory.swap.current``) less the page cache of ordinary files on the
        reclaimable lists (``active_file``, ``inactive_file``) and, on v2, the reclaimable kernel caches
        (``slab_reclaimable``: dentries and inodes of files looked up). Shared memory is on the anonymous lists, and
        file pages locked in memory (``mlock``) are on the unevictable list: both count (a locked 1.5 GB file passed as
        page cache: hostile pass 31a F6). v1 has no figure of the reclaimable caches: :meth:`reclaim` frees them before
        a stop. ``None`` where it cannot be read."""
        try:
            st = _stat(self.folder)  # (v1: hierarchical totals: a group the user's code made below this one counts too)
            if self.v2:
                total = int((self.folder / "memory.current").read_text())
                with contextlib.suppress(OSError, ValueError):
                    total += int((self.folder / "memory.swap.current").read_text())
                return float(total - st.get("active_file", 0) - st.get("inactive_file", 0)
                             - st.get("slab_reclaimable", 0))
            try:
                total = int((self.folder / "memory.memsw.usage_in_bytes").read_text())
            except (OSError, ValueError):
                total = int((self.folder / "memory.usage_in_bytes").read_text())
            return float(total - st.get("total_active_file", st.get("active_file", 0))
                         - st.get("total_inactive_file", st.get("inactive_file", 0)))
        except (OSError, ValueError):
            return None

    def reclaim(self) -> None:
        """Ask the kernel to free what it can of the group's memory: its caches (page cache, and the dentries and inodes
        of files looked up, charged to the group as kernel memory: 1.5 M lookups of absent names held 272 MB; hostile
        pass 34a F6), never what the processes hold (swapped out at most, where there is swap, and :meth:`used` counts
        swap). v1 ``memory.force_empty`` (the whole group, ≈ 0.2 s; it kills nothing), v2 ``memory.reclaim``. Called
        only when :meth:`used` is over the limit, before a stop."""
        with contextlib.suppress(OSError):
            if self.v2:
                used = int((self.folder / "memory.current").read_text())
                (self.folder / "memory.reclaim").write_text(str(used))
            else:
                (self.folder / "memory.force_empty").write_text("0")

    def pids(self) -> list[int]:
        """Every process in the group and in the groups below it (at any depth: :func:`_walk`)."""
        out = []
        for fd in _walk(self.folder):
            with contextlib.suppress(OSError, ValueError):
                out += [int(v) for v in _read_at(fd, "cgroup.procs").split()]
        return out

    def close(self) -> None:
        """SIGKILL to every process still in the group (found again until none is left, for up to
        :data:`CLOSE_WAIT` seconds: a process thawed and killed leaves the group only once it has freed its memory,
        which a loaded machine may take over a second to schedule), then the group removed (the groups below it
        first)."""
        thawed: list = []
        end = time.monotonic() + CLOSE_WAIT
        while time.monotonic() < end:
            left = self.pids()
            if not left:
                break
            for p in left:
                with contextlib.suppress(OSError):
                    os.kill(p, signal.SIGKILL)
                thawed += _thaw(p)
            time.sleep(0.02)
        _refreeze(thawed)
        for _ in _walk(self.folder, removed=True):
            pass
        with contextlib.suppress(OSError):
            self.folder.rmdir()
