"""A warm ``python -m proofs_checks`` for the tests (issue 46: a fresh interpreter costs ≈ 2.6 CPU s of imports).

Each pytest process keeps one server: ``python -P`` with torch, SymPy, SciPy and the built-in claims imported, which
forks a child for every ``tverify`` command a test starts through :class:`subprocess.Popen` (``subprocess.run``
included) and runs the console entry point there, as ``python -m proofs_checks`` does after its start-up: the same
supervisor, signals, exit codes and descriptors — the test's pipes, files or terminal are passed to the child as its
0, 1 and 2. Measured: ``run attn.softmax_simplex --quick`` 0.62 CPU s forked, 3.2 s fresh.

A command is forked only where an interpreter's start could make no difference, and started fresh otherwise:

* any other program, ``shell``, ``preexec_fn``, ``pass_fds``, ``close_fds=False``, user/group/umask changes;
* an interpreter option (``-P``, ``-I``, ``-X``, ``-c``, …): only ``PYTHON -m proofs_checks ARGS`` and the
  ``tverify`` script are forked;
* an environment variable that Python or a library reads at start (``PYTHON*``, ``LANG``/``LC_*``, ``TZ``, the
  thread counts and the variables of GNU OpenMP, MKL, torch (but for its inductor cache folder, read when used),
  NumPy, SymPy, the dynamic loader and malloc,
  ``TVERIFY_TEST_FRESH``) different from the server's — but for ``PYTHONDONTWRITEBYTECODE``, which the child sets as a
  start would, and ``PYTHONPATH``, whose folders (an empty entry: the working folder; a relative one: from it) the
  child puts first on ``sys.path``;
* a working folder, or a ``PYTHONPATH`` folder, holding a file or package named like a module the server imported
  from elsewhere, or looked for and did not find (a ``json.py``, a ``numerics/``, SymPy's optional ``gmpy2.py``: what
  the tests of tverify's own start-up plant) — a child would find that module already imported, or already found
  absent — and ``sitecustomize``/``usercustomize`` anywhere on that path;
* tests marked ``fresh_process`` (the tests of what happens as the interpreter exits, of the memory a command's
  process uses), and every test when ``TVERIFY_TEST_FRESH=1``; and any command when the server cannot take it.

The child does what the interpreter does around ``main()``: the random generators reseeded, the standard streams
flushed at exit (a failed flush: its exception reported as unraisable, exit 120), non-daemon threads joined, then the
``atexit`` functions; an uncaught ``KeyboardInterrupt`` ends it by SIGINT after those.

``TVERIFY_WARM_LOG=FILE`` appends each decision (forked or fresh, and why) to FILE. The profile of the suite (``make profile-tests``) counts a forked command's CPU in the server, not the test.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

__all__ = ["install", "uninstall"]

_REAL_POPEN = subprocess.Popen
#: environment variables read when an interpreter (or torch, OpenMP, a BLAS) starts: a command whose value differs
#: from the server's is started fresh
_AT_START = ("LANG", "LANGUAGE", "TZ", "TVERIFY_TEST_FRESH", "TVERIFY_PROFILE_OUT", "TVERIFY_THREADS")
_AT_START_PREFIXES = ("PYTHON", "LC_", "OMP_", "GOMP_", "MKL_", "OPENBLAS_", "TORCH", "PYTORCH_", "NPY_", "SYMPY_",
                      "LD_", "MALLOC_", "GLIBC_")
#: read where they are used, not at start (the command sets its inductor cache folder itself; KMP_* belong to Intel's
#: OpenMP, which this torch does not load: it links libgomp): tverify's own in-process commands leave them in the
#: tests' environment, and they would otherwise send every later command to a fresh interpreter
_AT_USE = ("TORCHINDUCTOR_CACHE_DIR",)

_SERVER = r"""
import json, os, select, socket, struct, sys
ctl, ready, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ASKED = set()


class Asked:  # every top-level name looked for, found or not (an optional import that failed here is not retried)
    @staticmethod
    def find_spec(name, path=None, target=None):
        if path is None:
            ASKED.add(name)
        return None


sys.meta_path.insert(0, Asked)
import proofs_checks._console, proofs_checks.cli, proofs_checks.claims as claims  # noqa: F401,E401 (first: atexit)
import numpy, scipy, sympy, torch  # noqa: F401,E401
claims.load_all()
claims._loaded = False  # the child loads the plugins its own environment names (the built-in claims stay)
for kept in (claims.PLUGIN_ERRORS, claims.PLUGIN_SOURCES, claims.PLUGIN_CLAIMS, claims.PLUGIN_NAMES,
             claims.PLUGIN_READ_HASHES):
    kept.clear()
sys.meta_path.remove(Asked)
names = {n: None for n in ASKED | {"sitecustomize", "usercustomize"}}
names.update({n: getattr(m, "__file__", None) for n, m in list(sys.modules.items()) if "." not in n})
with open(path + ".names", "w") as f:  # the modules a child finds imported (where from) or found absent (None)
    json.dump(names, f)
lsn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
lsn.bind(path)
lsn.listen(64)
os.write(ready, b"ready\n")
os.close(ready)
conns, kids = {}, {}


def child(req, fds, mine, go):
    for i, fd in enumerate(fds):
        os.dup2(fd, i, inheritable=True)
    for fd in set(mine) | set(fds):
        if fd > 2:
            try:
                os.close(fd)
            except OSError:
                pass
    if req["session"]:
        os.setsid()
    os.write(go, b"1")  # (the server answers with this pid only now: a killpg at once finds the session)
    os.close(go)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    sys.path[:0] = [d for d in req["pythonpath"] if d not in sys.path]
    import importlib, random
    importlib.invalidate_caches()
    random.seed(), numpy.random.seed(), torch.seed()  # a fresh process's generators, not the server's
    sys.argv = [req["argv0"], *req["args"]]
    sys.dont_write_bytecode = bool(req["env"].get("PYTHONDONTWRITEBYTECODE"))
    code, interrupted = 1, False
    try:
        from proofs_checks._console import main, working_folder
        working_folder()
        main()
        code = 0
    except SystemExit as e:
        c = e.code
        code = 0 if c is None else c if isinstance(c, int) else 1
        if not isinstance(c, (int, type(None))):
            print(c, file=sys.stderr)
    except KeyboardInterrupt:
        import traceback
        traceback.print_exc()
        interrupted = True
    except BaseException:
        import traceback
        traceback.print_exc()
    import atexit, threading
    threading._shutdown()  # non-daemon threads joined, as at an interpreter's exit
    atexit._run_exitfuncs()
    for s in (sys.stdout, sys.stderr):  # the interpreter's last flush: closed streams skipped
        if s is None or getattr(s, "closed", False):
            continue
        try:
            s.flush()
        except Exception as e:
            sys.unraisablehook(type("U", (), dict(exc_type=type(e), exc_value=e, exc_traceback=e.__traceback__,
                                                  err_msg=None, object=s))())
            code = 120
    if interrupted:
        import signal
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code & 0xFF)


while True:
    r, _, _ = select.select([ctl, lsn, *conns], [], [], 0.02)
    if ctl in r and not os.read(ctl, 64):
        break
    if lsn in r:
        c, _ = lsn.accept()
        msg, fds, _, _ = socket.recv_fds(c, 1 << 20, 3)
        (n,) = struct.unpack("!Q", msg[:8])
        while len(msg) < 8 + n:
            part = c.recv(1 << 20)
            if not part:
                break
            msg += part
        req = json.loads(msg[8:])
        sys.stdout.flush(), sys.stderr.flush()
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            child(req, fds, [ctl, lsn.fileno(), c.fileno(), go_r, *conns], go_w)
        os.close(go_w)
        os.read(go_r, 1)
        os.close(go_r)
        for fd in fds:
            os.close(fd)
        c.sendall(f"{pid}\n".encode())
        conns[c.fileno()] = c
        kids[pid] = c
    for fd in [f for f in r if f in conns]:
        if not conns[fd].recv(64):  # the test closed its end: nothing more to tell it
            c = conns.pop(fd)
            kids.pop(next((p for p, k in kids.items() if k is c), None), None)
            c.close()
    while True:
        try:
            pid, sts = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        c = kids.pop(pid, None)
        if c is not None:
            try:
                c.sendall(f"{sts}\n".encode())
            except OSError:
                pass
            conns.pop(c.fileno(), None)
            c.close()
"""


class _Server:
    """The warm server of this process (started on first use; ends when this process closes its control pipe)."""

    def __init__(self) -> None:
        import tempfile

        self.folder = tempfile.mkdtemp(prefix="tv-warm-")
        self.path = os.path.join(self.folder, "s")
        r, self.ctl = os.pipe()
        ready_r, ready_w = os.pipe()
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the children's own are put first
        self.env = env
        self.proc = _REAL_POPEN([sys.executable, "-P", "-c", _SERVER, str(r), str(ready_w), self.path], pass_fds=(r, ready_w),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env, close_fds=True)
        # the control pipe: its read end is the server's (EOF there ends it), the ready pipe says it listens
        os.close(r)
        os.close(ready_w)
        with os.fdopen(ready_r, "rb") as f:
            ok = f.readline() == b"ready\n"
        if not ok:
            raise RuntimeError("the warm tverify server did not start")
        os.set_inheritable(self.ctl, False)

    def start(self, req: dict, fds: list[int]) -> tuple[int, socket.socket]:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.path)
        data = json.dumps(req).encode()
        socket.send_fds(s, [struct.pack("!Q", len(data)) + data[:1 << 16]], fds)
        if len(data) > 1 << 16:
            s.sendall(data[1 << 16:])
        line = b""
        while not line.endswith(b"\n"):  # byte by byte: the status line may follow at once
            part = s.recv(1)
            if not part:
                raise RuntimeError("the warm tverify server ended")
            line += part
        return int(line), s

    def close(self) -> None:
        import shutil

        os.close(self.ctl)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


_SERVER_OF: dict[int, _Server] = {}
_LOCK = threading.Lock()


def _server() -> _Server:
    with _LOCK:
        s = _SERVER_OF.get(os.getpid())
        if s is None:
            s = _SERVER_OF[os.getpid()] = _Server()
        return s


def _shadowable() -> dict[str, str | None]:
    """The top-level modules the server imported before it forks (a child finds them imported, wherever a fresh
    interpreter would have found them), each with its file: what a file or folder of that name could shadow."""
    with open(_server().path + ".names") as f:
        return json.load(f)


_NAMES: list[dict[str, str | None]] = []


def _plants(cwd: str) -> bool:
    if not _NAMES:
        _NAMES.append(_shadowable())
    try:
        entries = os.listdir(cwd)
    except OSError:
        return True
    for e in entries:  # a folder without __init__.py is a namespace portion: it shadows no module
        stem = e.split(".")[0]
        package = any(os.path.isfile(os.path.join(cwd, e, f"__init__{x}")) for x in (".py", ".pyc"))
        if stem in _NAMES[0] and (e.endswith((".py", ".pyc", ".so")) or package) and not _same(stem, cwd):
            WHY[0] = f"{cwd}/{e}"
            return True
    return False


def _same(name: str, folder: str) -> bool:
    """The server's module ``name`` is the one in ``folder`` (the project's own packages, where a test puts the
    checkout on $PYTHONPATH): finding it there first changes nothing. A name the server looked for and did not find
    never is."""
    f = _NAMES[0].get(name)
    return bool(f) and os.path.dirname(os.path.dirname(os.path.realpath(f))) == os.path.realpath(folder) \
        and os.path.basename(os.path.dirname(f)) == name


WHY = [""]
FRESH = [os.environ.get("TVERIFY_TEST_FRESH") == "1"]


def _command(args, executable, shell, env, cwd, extra) -> list[str] | None:
    """The tverify arguments of a command that can be forked, else None."""
    if FRESH[0] or shell or executable is not None or any(extra):
        return None
    if isinstance(args, (str, bytes, os.PathLike)):
        return None
    args = [os.fspath(a) if isinstance(a, os.PathLike) else a for a in args]
    if not args or not all(isinstance(a, str) for a in args):
        return None
    script = str(Path(sys.executable).with_name("tverify"))
    if args[0] == script:
        rest = args[1:]
    elif args[0] == sys.executable and args[1:3] == ["-m", "proofs_checks"]:
        rest = args[3:]
    else:
        return None
    server_env = _server().env
    e = os.environ if env is None else env
    if any(not isinstance(k, str) or not isinstance(v, str) for k, v in e.items()):
        return None
    where = os.path.abspath(os.getcwd() if cwd is None else os.fspath(cwd))
    if not os.path.isdir(where) or _plants(where):
        WHY[0] = "cwd"
        return None
    for k in set(e) | set(server_env):
        if k in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH") or k in _AT_USE:
            continue  # set in the child as an interpreter's start sets them, or read only when used
        if (k.startswith(_AT_START_PREFIXES) or k in _AT_START) and e.get(k) != server_env.get(k):
            WHY[0] = k
            return None
    path = pythonpath(e.get("PYTHONPATH", ""), where)
    if any(os.path.isdir(d) and _plants(d) for d in path):
        WHY[0] = "PYTHONPATH"
        return None
    PATH[0] = path
    return rest


def pythonpath(value: str, cwd: str) -> list[str]:
    """The folders ``PYTHONPATH=value`` puts on an interpreter's path started in ``cwd``: an empty entry is the working
    folder, a relative one is read from it."""
    return [os.path.join(cwd, d) if d else cwd for d in value.split(os.pathsep)] if value else []


PATH: list[list[str]] = [[]]


class WarmPopen(_REAL_POPEN):
    """:class:`subprocess.Popen`, forking ``tverify`` commands from the warm server (module docstring)."""

    _warm_sock: socket.socket | None = None

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                       creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite,
                       restore_signals, gid, gids, uid, umask, start_new_session, process_group):
        extra = (preexec_fn is not None, not close_fds, bool(pass_fds), gid is not None, gids is not None,
                 uid is not None, umask >= 0, process_group not in (None, -1), _TEST_FRESH[0])
        WHY[0] = ""
        rest = _command(args, executable, shell, env, cwd, extra)
        if os.environ.get("TVERIFY_WARM_LOG"):
            with open(os.environ["TVERIFY_WARM_LOG"], "a") as f:
                f.write(f"{'warm' if rest is not None else 'fresh'} {WHY[0]} {list(args)[:4]!r} {extra}\n")
        if rest is None:
            return super()._execute_child(args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                                          creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread,
                                          errwrite, restore_signals, gid, gids, uid, umask, start_new_session,
                                          process_group)
        fds = [p2cread if p2cread != -1 else 0, c2pwrite if c2pwrite != -1 else 1, errwrite if errwrite != -1 else 2]
        req = {"args": rest, "argv0": str(Path(__file__).resolve().parents[1] / "proofs_checks" / "__main__.py"),
               "cwd": os.path.abspath(os.getcwd() if cwd is None else os.fspath(cwd)),
               "env": {k: v for k, v in (os.environ if env is None else env).items()},
               "session": bool(start_new_session), "pythonpath": PATH[0]}
        try:
            self.pid, self._warm_sock = _server().start(req, fds)
        except (OSError, RuntimeError, ValueError):  # the server cannot take it (it ended): a fresh interpreter
            return super()._execute_child(args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                                          creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread,
                                          errwrite, restore_signals, gid, gids, uid, umask, start_new_session,
                                          process_group)
        self._child_created = True
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)

    def _warm_status(self, block: bool) -> int | None:
        s = self._warm_sock
        s.setblocking(block)
        try:
            data = b""
            while not data.endswith(b"\n"):
                part = s.recv(64)
                if not part:
                    raise RuntimeError("the warm tverify server ended before the command")
                data += part
                s.setblocking(True)
        except BlockingIOError:
            return None
        s.close()
        return int(data)

    def _try_wait(self, wait_flags):
        if self._warm_sock is None:
            return super()._try_wait(wait_flags)
        sts = self._warm_status(block=not (wait_flags & os.WNOHANG))
        return (0, 0) if sts is None else (self.pid, sts)

    def _internal_poll(self, _deadstate=None, **_kw):
        if self._warm_sock is None:
            return super()._internal_poll(_deadstate)
        if self.returncode is None and self._waitpid_lock.acquire(False):
            try:
                if self.returncode is None:
                    sts = self._warm_status(block=False)
                    if sts is not None:
                        self._handle_exitstatus(sts)
            finally:
                self._waitpid_lock.release()
        return self.returncode


#: set by the ``fresh_process`` marker for the test that runs
_TEST_FRESH = [False]


def install() -> None:
    """Route the tverify commands of this process's tests (the server starts now, with this environment)."""
    if not FRESH[0]:
        _server()
    subprocess.Popen = WarmPopen


def uninstall() -> None:
    subprocess.Popen = _REAL_POPEN
    for pid, s in list(_SERVER_OF.items()):
        if pid == os.getpid():
            s.close()
            del _SERVER_OF[pid]
