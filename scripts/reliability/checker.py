"""The history checker: safety S1-S6 and liveness L1-L5 of the reliability plan (reference §6b).

Pure Python over plain data, in the style of Jepsen's history-plus-checker: the harness collects the
JSON-lines histories every process wrote (``controller_core.zk.history``) and a final snapshot of
ZooKeeper, the brokers and the mirror after the heal phase; ``check`` returns every violation found.
Nothing here talks to a service, so each invariant has unit tests feeding it hand-made histories.

History records used (fields beyond ``pid``/``role``/``node``/``t_mono``):

* controller ``op="elect"``: ``controller_epoch``, ``epoch_zk_version``, ``mzxid`` (of the
  ``/controller_epoch`` update), ``result="OK"``.
* controller ``op`` in ``set``/``create``/``delete``: ``path``, ``epoch_zk_version`` (the fencing
  version the multi was checked against), ``result`` (``OK``, ``BAD_VERSION``, ``FENCED`` ...),
  ``mzxid`` and ``new_version`` for sets, ``data`` (the JSON) for partition-state writes.
* broker ``op="request"``: ``kind``, ``decision`` (accepted/rejected), ``controller_epoch``,
  ``broker_epoch``, ``my_broker_epoch``; broker ``op="leader_and_isr"``: ``partitions`` as
  ``[topic, partition, leader, leader_epoch, error]`` (``NONE`` = applied).
* mirror observations ``op="observe"`` (harness readers of Redis): ``reader``, ``partition``,
  ``controller_epoch``, ``zk_version``, ``leader``, ``isr``.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller_core.zk import paths

Record = Mapping[str, Any]

SAFETY = ("S1", "S2", "S3", "S4", "S5", "S6")
LIVENESS = ("L1", "L2", "L3", "L4", "L5")
ADMIN_PATHS = (paths.REASSIGN_PARTITIONS_PATH, paths.PREFERRED_REPLICA_ELECTION_PATH)


@dataclass(frozen=True)
class Violation:
    invariant: str
    detail: str

    @property
    def safety(self) -> bool:
        return self.invariant in SAFETY

    def __str__(self) -> str:
        return f"{self.invariant}: {self.detail}"


@dataclass(frozen=True)
class PartitionSnapshot:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int = -1


@dataclass(frozen=True)
class ActionOutcome:
    """One admin action as the audit trail shows it, and how many times its effect happened."""

    action_id: str
    accepted: bool
    status: str  # "completed", "failed", "in_progress", ...
    reason: str = ""
    effects: int = 0


@dataclass
class FinalState:
    """What the harness read after the heal phase (for the liveness checks and S3's replica sets)."""

    controller_id: int | None = None  # who /controller names
    active_controllers: Sequence[int] = ()  # candidates whose own status says active
    live_brokers: frozenset[int] = frozenset()
    # "topic-p" -> every broker the partition was assigned to during the run (the union, so that a
    # reassignment's intermediate replica sets count)
    assignments: Mapping[str, Sequence[int]] = field(default_factory=dict)
    partitions: Mapping[str, PartitionSnapshot] = field(default_factory=dict)  # "topic-p" -> ZK state
    admin_paths_present: Sequence[str] = ()  # admin znodes (and /admin/delete_topics children) left
    mirror: Mapping[str, PartitionSnapshot] | None = None  # "topic-p" -> the mirror's view
    broker_caches: Mapping[int, Mapping[str, tuple[int, int]]] = field(default_factory=dict)  # leader, epoch
    actions: Sequence[ActionOutcome] = ()


def load_histories(directory: Path) -> list[dict[str, Any]]:
    """Every record of every ``*.jsonl`` under ``directory``; a torn last line (SIGKILL) is skipped."""
    records: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.jsonl")):
        for line in path.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                entry.setdefault("file", path.name)
                records.append(entry)
    return records


def _writer(rec: Record) -> tuple[Any, Any]:
    return (rec.get("file", rec.get("pid")), rec.get("pid"))


def _partition_key(path: str) -> str | None:
    """``/brokers/topics/t/partitions/3/state`` -> ``t-3``."""
    parts = path.strip("/").split("/")
    if len(parts) == 6 and parts[0] == "brokers" and parts[1] == "topics" and parts[3] == "partitions":
        return f"{parts[2]}-{parts[4]}"
    return None


# ------------------------------------------------------------------------------------------------
# safety
# ------------------------------------------------------------------------------------------------
def check_s1(records: Sequence[Record]) -> list[Violation]:
    """One writer per epoch: fenced writes carry a version their writer won, and none lands late."""
    out: list[Violation] = []
    elections = [r for r in records if r.get("op") == "elect" and r.get("result") == "OK"]
    winners: dict[int, set[Any]] = defaultdict(set)
    owned: set[tuple[Any, int]] = set()
    version_epoch: dict[int, int] = {}
    for e in elections:
        winners[int(e["controller_epoch"])].add(_writer(e))
        owned.add((_writer(e), int(e["epoch_zk_version"])))
        version_epoch[int(e["epoch_zk_version"])] = int(e["controller_epoch"])
    for epoch, who in sorted(winners.items()):
        if len(who) > 1:
            out.append(Violation("S1", f"epoch {epoch} was won by {len(who)} processes: {sorted(map(str, who))}"))
    # zxid at which /controller_epoch left each version (the next election's update)
    by_zxid = sorted((int(e["mzxid"]), int(e["epoch_zk_version"])) for e in elections if e.get("mzxid") is not None)
    for w in records:
        if w.get("op") not in ("set", "create", "delete") or w.get("result") != "OK" or w.get("role") != "controller":
            continue
        version = int(w["epoch_zk_version"])
        if (_writer(w), version) not in owned:
            out.append(
                Violation(
                    "S1",
                    f"pid {w.get('pid')} wrote {w.get('op')} {w.get('path')} fenced by /controller_epoch version "
                    f"{version}, which it never won",
                )
            )
            continue
        mzxid = w.get("mzxid")
        if mzxid is not None:
            later = [z for z, v in by_zxid if v > version]
            if later and int(mzxid) > min(later):
                out.append(
                    Violation(
                        "S1",
                        f"{w.get('op')} {w.get('path')} at zxid {mzxid} with epoch version {version} landed after "
                        f"the next election (zxid {min(later)})",
                    )
                )
        data = w.get("data")
        if data and version in version_epoch:
            try:
                written_epoch = json.loads(data).get("controller_epoch")
            except ValueError:
                written_epoch = None
            if written_epoch is not None and written_epoch != version_epoch[version]:
                out.append(
                    Violation(
                        "S1",
                        f"{w.get('path')} written with controller_epoch {written_epoch} by the owner of epoch "
                        f"{version_epoch[version]}",
                    )
                )
    return out


def _committed_states(records: Sequence[Record]) -> dict[str, list[tuple[int, int, dict[str, Any]]]]:
    """Per partition, its committed states as ``(order zxid, zk version, json)`` sorted by ZooKeeper order."""
    states: dict[str, list[tuple[int, int, dict[str, Any]]]] = defaultdict(list)
    for w in records:
        if w.get("op") not in ("set", "create") or w.get("result") != "OK" or not w.get("data"):
            continue
        key = _partition_key(str(w.get("path", "")))
        if key is None:
            continue
        try:
            state = json.loads(w["data"])
        except ValueError:
            continue
        if w["op"] == "create":
            states[key].append((-1, 0, state))
        elif w.get("mzxid") is not None:
            states[key].append((int(w["mzxid"]), int(w.get("new_version", -1)), state))
    for entries in states.values():
        entries.sort(key=lambda x: (x[0], x[1]))
    return states


def check_s2(records: Sequence[Record]) -> list[Violation]:
    """Monotonic epochs: /controller_epoch strictly increases; per partition leader epochs and versions too."""
    out: list[Violation] = []
    elections = sorted(
        (int(e["mzxid"]), int(e["controller_epoch"]), int(e["epoch_zk_version"]))
        for e in records
        if e.get("op") == "elect" and e.get("result") == "OK" and e.get("mzxid") is not None
    )
    for (z1, e1, v1), (z2, e2, v2) in itertools.pairwise(elections):
        if e2 <= e1 or v2 <= v1:
            out.append(Violation("S2", f"controller epoch went {e1}@v{v1} (zxid {z1}) -> {e2}@v{v2} (zxid {z2})"))
    for key, entries in _committed_states(records).items():
        for (z1, v1, s1), (z2, v2, s2) in itertools.pairwise(entries):
            if v2 <= v1:
                out.append(Violation("S2", f"{key}: zkVersion went {v1} -> {v2} (zxid {z1} -> {z2})"))
            if s2["leader_epoch"] < s1["leader_epoch"]:
                out.append(Violation("S2", f"{key}: leader epoch went {s1['leader_epoch']} -> {s2['leader_epoch']}"))
            elif s2["leader"] != s1["leader"] and s2["leader_epoch"] <= s1["leader_epoch"]:
                out.append(
                    Violation(
                        "S2",
                        f"{key}: leader {s1['leader']} -> {s2['leader']} without a new leader epoch "
                        f"({s1['leader_epoch']} -> {s2['leader_epoch']})",
                    )
                )
    return out


def check_s3(
    records: Sequence[Record],
    assignments: Mapping[str, Sequence[int]],
    unclean_allowed: bool = False,
    shutting_down: Mapping[int, int] | None = None,
) -> list[Violation]:
    """Valid partition states: leader in ISR (or -1), ISR non-empty and within the replicas, clean elections.

    ``shutting_down`` maps a broker to the zxid from which it was in controlled shutdown: it must not
    be elected nor added to an ISR after that.
    """
    out: list[Violation] = []
    shutting_down = shutting_down or {}
    for key, entries in _committed_states(records).items():
        previous: dict[str, Any] | None = None
        for zxid, version, state in entries:
            leader, isr = state["leader"], list(state["isr"])
            where = f"{key} v{version}"
            if leader != -1 and leader not in isr:
                out.append(Violation("S3", f"{where}: leader {leader} not in ISR {isr}"))
            if not isr:
                out.append(Violation("S3", f"{where}: empty ISR"))
            replicas = assignments.get(key)
            if replicas is not None and not set(isr) <= set(replicas):
                out.append(Violation("S3", f"{where}: ISR {isr} outside the replicas {list(replicas)}"))
            if (
                previous is not None
                and not unclean_allowed
                and leader != -1
                and leader != previous["leader"]
                and leader not in previous["isr"]
            ):
                out.append(Violation("S3", f"{where}: unclean election of {leader} (previous ISR {previous['isr']})"))
            for broker, since in shutting_down.items():
                if zxid > since and (
                    leader == broker or (broker in isr and (previous is None or broker not in previous["isr"]))
                ):
                    out.append(Violation("S3", f"{where}: broker {broker} in controlled shutdown elected or added"))
            previous = state
    return out


def check_s4(records: Sequence[Record]) -> list[Violation]:
    """Broker fencing: no stale controller epoch applied, leader epochs only move up, one leader per epoch."""
    out: list[Violation] = []
    leaders_named: dict[tuple[str, int], set[int]] = defaultdict(set)
    by_file: dict[Any, list[Record]] = defaultdict(list)
    for r in records:
        if r.get("role") == "broker" and r.get("op") in ("request", "leader_and_isr"):
            by_file[_writer(r)].append(r)
    for writer, entries in by_file.items():
        entries.sort(key=lambda r: float(r.get("t_mono", 0.0)))
        highest = 0
        leader_epochs: dict[str, int] = {}
        for r in entries:
            if r["op"] == "request":
                if r.get("decision") != "accepted":
                    continue
                epoch = int(r["controller_epoch"])
                if epoch < highest:
                    out.append(
                        Violation(
                            "S4",
                            f"broker {r.get('node')} (pid {r.get('pid')}) applied {r.get('kind')} of controller "
                            f"epoch {epoch} after seeing {highest}",
                        )
                    )
                my_epoch, sent = r.get("my_broker_epoch"), r.get("broker_epoch")
                if my_epoch is not None and sent is not None and sent != -1 and int(sent) < int(my_epoch):
                    out.append(
                        Violation("S4", f"broker {r.get('node')} applied {r.get('kind')} for stale broker epoch {sent}")
                    )
                highest = max(highest, epoch)
                continue
            for topic, partition, leader, leader_epoch, error in r.get("partitions", []):
                key = f"{topic}-{partition}"
                if error != "NONE":
                    continue
                leaders_named[(key, int(leader_epoch))].add(int(leader))
                if int(leader_epoch) <= leader_epochs.get(key, -1):
                    out.append(
                        Violation(
                            "S4",
                            f"broker {r.get('node')} applied {key} leader epoch {leader_epoch} after "
                            f"{leader_epochs[key]}",
                        )
                    )
                leader_epochs[key] = max(int(leader_epoch), leader_epochs.get(key, -1))
        del writer
    for (key, leader_epoch), leaders in sorted(leaders_named.items()):
        if len(leaders) > 1:
            out.append(Violation("S4", f"{key} leader epoch {leader_epoch} named leaders {sorted(leaders)}"))
    return out


def check_s5(actions: Iterable[ActionOutcome]) -> list[Violation]:
    """Every accepted admin action ended completed or failed with a reason, and took effect at most once."""
    out: list[Violation] = []
    for a in actions:
        if not a.accepted:
            if a.effects:
                out.append(Violation("S5", f"action {a.action_id} was rejected yet took effect {a.effects}x"))
            continue
        if a.status not in ("completed", "failed"):
            out.append(Violation("S5", f"action {a.action_id} is stuck '{a.status}'"))
        elif a.status == "failed" and not a.reason:
            out.append(Violation("S5", f"action {a.action_id} failed without a reason"))
        if a.effects > 1:
            out.append(Violation("S5", f"action {a.action_id} took effect {a.effects} times"))
    return out


def check_s6(records: Sequence[Record]) -> list[Violation]:
    """The mirror never lies: every state it showed existed in ZooKeeper; per reader versions never go back."""
    out: list[Violation] = []
    existed: dict[str, set[tuple[int, int, tuple[int, ...]]]] = defaultdict(set)
    for key, entries in _committed_states(records).items():
        for _zxid, version, state in entries:
            existed[key].add((version, int(state["leader"]), tuple(state["isr"])))
    last: dict[tuple[str, str], tuple[int, int]] = {}
    observations = sorted((r for r in records if r.get("op") == "observe"), key=lambda r: float(r.get("t_mono", 0)))
    for r in observations:
        key = str(r["partition"])
        shown = (int(r["zk_version"]), int(r["leader"]), tuple(int(b) for b in r["isr"]))
        if key in existed and shown not in existed[key]:
            out.append(
                Violation("S6", f"mirror showed {key} v{shown[0]} leader {shown[1]} ISR {list(shown[2])}, never in ZK")
            )
        position = (int(r["controller_epoch"]), int(r["zk_version"]))
        reader = (str(r.get("reader")), key)
        if reader in last and position < last[reader]:
            out.append(Violation("S6", f"reader {reader[0]} saw {key} go back from {last[reader]} to {position}"))
        last[reader] = max(position, last.get(reader, position))
    return out


# ------------------------------------------------------------------------------------------------
# liveness
# ------------------------------------------------------------------------------------------------
def check_liveness(final: FinalState) -> list[Violation]:
    out: list[Violation] = []
    active = sorted(final.active_controllers)
    if len(active) != 1 or final.controller_id is None or active[0] != final.controller_id:
        out.append(Violation("L1", f"active controllers {active}, /controller names {final.controller_id}"))
    for key, p in sorted(final.partitions.items()):
        live_isr = [b for b in p.isr if b in final.live_brokers]
        if live_isr and p.leader not in final.live_brokers:
            out.append(Violation("L2", f"{key}: leader {p.leader} not live while ISR members {live_isr} are"))
    for path in final.admin_paths_present:
        out.append(Violation("L3", f"{path} not drained"))
    if final.mirror is not None:
        for key, p in sorted(final.partitions.items()):
            m = final.mirror.get(key)
            if m is None or (m.leader, m.leader_epoch, tuple(m.isr)) != (p.leader, p.leader_epoch, tuple(p.isr)):
                out.append(Violation("L4", f"{key}: mirror {m} != ZK {p}"))
    for broker, cache in sorted(final.broker_caches.items()):
        for key, p in sorted(final.partitions.items()):
            seen = cache.get(key)
            if seen != (p.leader, p.leader_epoch):
                out.append(
                    Violation("L5", f"broker {broker}: {key} cached {seen}, ZK has {(p.leader, p.leader_epoch)}")
                )
    return out


def check(
    records: Sequence[Record],
    final: FinalState | None = None,
    *,
    unclean_allowed: bool = False,
    shutting_down: Mapping[int, int] | None = None,
) -> list[Violation]:
    """Every violation of S1-S6 (from the histories) and, given ``final``, of L1-L5."""
    assignments = final.assignments if final is not None else {}
    out = check_s1(records) + check_s2(records)
    out += check_s3(records, assignments, unclean_allowed, shutting_down)
    out += check_s4(records) + check_s6(records)
    if final is not None:
        out += check_s5(final.actions) + check_liveness(final)
    return out
