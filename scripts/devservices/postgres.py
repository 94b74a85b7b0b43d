"""A private PostgreSQL (Debian's package) for the Django tests CI runs on PostgreSQL."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from scripts.devservices.process import ManagedProcess, ServiceError
from workers.local_processes import port_open, stop_recorded


def postgres_bin_dir() -> Path | None:
    """The newest PostgreSQL server's ``bin`` (Debian: ``/usr/lib/postgresql/<major>/bin``; ``PG_BIN`` overrides)."""
    configured = os.environ.get("PG_BIN")
    if configured:
        return Path(configured) if (Path(configured) / "postgres").exists() else None
    found = [d for d in Path("/usr/lib/postgresql").glob("*/bin") if (d / "postgres").exists()]
    found.sort(key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0)
    return found[-1] if found else None


def _searchable_by(path: Path, user: str) -> bool:
    """Whether ``user`` may walk down to ``path`` (every existing ancestor searchable: mode bits only)."""
    import pwd

    entry = pwd.getpwnam(user)
    for part in [path.resolve(), *path.resolve().parents]:
        try:
            st = part.stat()
        except FileNotFoundError:
            continue
        if st.st_uid == entry.pw_uid:
            ok = bool(st.st_mode & 0o100)
        elif st.st_gid == entry.pw_gid:
            ok = bool(st.st_mode & 0o010)
        else:
            ok = bool(st.st_mode & 0o001)
        if not ok:
            return False
    return True


def unprivileged_user() -> str | None:
    """Who runs PostgreSQL when we are root (it refuses to run as root): ``postgres``, else ``nobody``."""
    if os.geteuid() != 0:
        return None
    import pwd

    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise ServiceError("running as root and neither a `postgres` nor a `nobody` user exists to run PostgreSQL")


@dataclass(kw_only=True)
class PostgresServer(ManagedProcess):
    """A private PostgreSQL cluster (Debian's package) on a loopback port, data under the services dir.

    Why its own cluster rather than the system's: like ZooKeeper and Redis, tests and the dev stack
    must never touch the machine's services. ``initdb`` makes a cluster whose superuser ``kcp`` has a
    random password (kept in ``postgresql.password``, mode 0600); only TCP on ``host`` is open (no
    Unix socket), with scram-sha-256 authentication. As root (CI), the cluster is owned and run by
    the ``postgres`` system user (which the Debian package creates), since PostgreSQL refuses to run
    as root: every directory above the data directory must then be searchable by that user.
    """

    name: str = "postgresql"
    user: str = "kcp"
    database: str = "kcp"

    @property
    def data_dir(self) -> Path:
        """``<services dir>/postgresql-data``; as root, when the server's user cannot reach the services
        dir (a checkout under a 0700 home, pytest's tmp dirs), a directory of this services dir's own
        under ``/var/tmp`` instead (named by a hash of its path, so each services dir keeps one)."""
        inside = self.base_dir / f"{self.name}-data"
        owner = unprivileged_user()
        if owner is None or _searchable_by(self.base_dir, owner):
            return inside
        digest = hashlib.sha256(str(self.base_dir.resolve()).encode()).hexdigest()[:12]
        return Path("/var/tmp") / f"kcp-{self.name}-{digest}"

    @property
    def password_file(self) -> Path:
        return self.base_dir / f"{self.name}.password"

    @property
    def url(self) -> str:
        return f"postgres://{self.user}:{self.password()}@{self.host}:{self.port}/{self.database}"

    def password(self) -> str:
        try:
            return self.password_file.read_text().strip()
        except FileNotFoundError:
            raise ServiceError(
                f"{self.name} is not initialised under {self.base_dir}: `scripts/services up postgresql`"
            ) from None

    def _bin(self, tool: str) -> str:
        bin_dir = postgres_bin_dir()
        if bin_dir is None:
            raise ServiceError(
                "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres). On Debian/Ubuntu: "
                "`scripts/services up postgresql` installs the `postgresql` package; elsewhere set PG_BIN."
            )
        return str(bin_dir / tool)

    def _as_owner(self, argv: list[str]) -> list[str]:
        """``argv`` run as the unprivileged owner when we are root (setpriv execs: the pid stays the server's)."""
        owner = unprivileged_user()
        if owner is None:
            return argv
        return ["setpriv", f"--reuid={owner}", f"--regid={owner}", "--init-groups", "--", *argv]

    def prepare(self) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            return
        import secrets

        owner = unprivileged_user()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.password_file.exists():
            self.password_file.write_text(secrets.token_urlsafe(24) + "\n")
            self.password_file.chmod(0o600)
        pwfile = self.data_dir.parent / f".{self.data_dir.name}.initpw"
        pwfile.write_text(self.password())
        try:
            if owner is not None:
                import pwd

                entry = pwd.getpwnam(owner)
                for path in (self.data_dir, pwfile):
                    os.chown(path, entry.pw_uid, entry.pw_gid)
                self.data_dir.chmod(0o700)
                self._check_reachable(owner)
            done = subprocess.run(
                self._as_owner(
                    [
                        self._bin("initdb"),
                        "-D",
                        str(self.data_dir),
                        "-U",
                        self.user,
                        f"--pwfile={pwfile}",
                        "--auth-host=scram-sha-256",
                        "--auth-local=scram-sha-256",
                        "-E",
                        "UTF8",
                        "--no-locale",
                        "--no-sync",
                    ]
                ),
                capture_output=True,
                text=True,
                check=False,
            )
        finally:
            pwfile.unlink(missing_ok=True)
        if done.returncode != 0:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            raise ServiceError(f"initdb failed ({done.returncode}):\n{(done.stdout + done.stderr)[-2000:]}")

    def _check_reachable(self, owner: str) -> None:
        probe = subprocess.run(
            [
                "setpriv",
                f"--reuid={owner}",
                f"--regid={owner}",
                "--init-groups",
                "--",
                "test",
                "-w",
                str(self.data_dir),
            ],
            check=False,
        )
        if probe.returncode != 0:
            raise ServiceError(
                f"{self.name}: user {owner!r} (PostgreSQL will not run as root) cannot reach {self.data_dir}; "
                "choose a SERVICES_DIR whose parent directories others may search (chmod o+x)"
            )

    def command(self) -> list[str]:
        return self._as_owner(
            [
                self._bin("postgres"),
                "-D",
                str(self.data_dir),
                "-c",
                f"listen_addresses={self.host}",
                "-c",
                f"port={self.port}",
                "-c",
                "unix_socket_directories=",
                # A test and development server: durability is not needed, speed is.
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=200",
            ]
        )

    def ready(self) -> bool:
        if not port_open(self.host, self.port, timeout=0.5):
            return False
        probe = subprocess.run(
            [self._bin("pg_isready"), "-q", "-h", self.host, "-p", str(self.port), "-U", self.user, "-d", "postgres"],
            check=False,
        )
        return probe.returncode == 0

    def start(self, timeout: float = 60.0) -> None:
        super().start(timeout)
        self.ensure_database()

    def ensure_database(self) -> None:
        """Create the ``kcp`` database once (tests create their own ``test_kcp`` next to it)."""
        env = dict(os.environ, PGPASSWORD=self.password())
        common = ["-h", self.host, "-p", str(self.port), "-U", self.user]
        exists = subprocess.run(
            [
                self._bin("psql"),
                *common,
                "-d",
                "postgres",
                "-tAc",
                f"SELECT 1 FROM pg_database WHERE datname = '{self.database}'",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if exists.returncode != 0:
            raise ServiceError(f"{self.name}: cannot query the server: {exists.stderr.strip()}")
        if exists.stdout.strip() == "1":
            return
        made = subprocess.run(
            [self._bin("createdb"), *common, self.database], env=env, capture_output=True, text=True, check=False
        )
        if made.returncode != 0:
            raise ServiceError(f"{self.name}: createdb {self.database} failed: {made.stderr.strip()}")

    def stop(self, timeout: float = 30.0, sig: int = signal.SIGINT) -> bool:
        """Fast shutdown (SIGINT to the postmaster, which ends its own backends); SIGKILL after ``timeout``."""
        stopped = stop_recorded(self.pid_file, timeout, sig, group=False)
        if self.process is not None:
            with contextlib.suppress(Exception):
                self.process.wait(timeout=1)
            self.process = None
        return stopped
