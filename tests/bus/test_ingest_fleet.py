"""``aefgate serve ingest`` across hosts: several processes, each with its own ``--out`` (separate folders stand for
separate hosts: nothing is shared but the nats-server), on one durable consumer. Real nats-server, real
``aefgate serve ingest`` subprocesses, events published by nats-py and by the real ``aefgate publish``.

What must hold (docs/design/ingest.md, "Across hosts"): every session is sealed exactly once, whole, in one of the
outputs; its results equal a single-process ingest of the same events (as JSON values; with ``--at-fixed`` the same
run hash); ``aefgate verify`` says intact; a node killed with SIGKILL mid-session and restarted gives the same runs as
an uninterrupted fleet, without duplicate lines; SIGTERM of the whole fleet drains and seals whole runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import signal
import subprocess
import sys
from pathlib import Path

import nats

from aefgate.bus.ingest import claim_key, node_name, run_name
from aefgate.aef.verifier import verify_run
from tests.bus.test_ingest import (  # noqa: F401  (_no_service_left: the autouse fixture that kills leftovers)
    ENTRY, Serve, _no_service_left, consumer, nats_message, publish, reference, results, run_hash, runs,
    wait_for,
)

SUBJECT = "aep.assess"


def session_events(s: int, n: int) -> list[dict]:
    """``n`` assessment events of session ``fleet-s<s>``: scores of five cases, two metrics each, in order."""
    return [{"aep": "0.1", "id": f"f{s}-e{i}", "type": "assessment.evaluation.recorded",
             "time": f"2026-10-02T14:{i // 60:02d}:{i % 60:02d}Z", "source": f"aep://fleet/agent/a/session/s{s}",
             "agent": "a", "session": f"fleet-s{s}", "run": f"case-{i % 5}", "seq": i, "severity": "info",
             "capture": "metadata",
             "data": {"gen_ai.evaluation.name": f"m{i // 5}", "gen_ai.evaluation.score.value": (i * 7 % 100) / 100,
                      "evaluator": "fleet"}} for i in range(n)]


def interleave(sessions: list[list[dict]]) -> list[dict]:
    out = []
    for i in range(max(len(s) for s in sessions)):
        out.extend(s[i] for s in sessions if i < len(s))
    return out


def hosts(tmp: Path, *names: str) -> list[Path]:
    """One output per simulated host: ``tmp/<host>/runs`` (the service's log beside it)."""
    outs = []
    for name in names:
        (tmp / name).mkdir()
        outs.append(tmp / name / "runs")
    return outs


def sealed(outs: list[Path]) -> dict[str, list[Path]]:
    """Every run folder of every output, by name."""
    found: dict[str, list[Path]] = {}
    for out in outs:
        for name in runs(out):
            found.setdefault(name, []).append(out / name)
    return found


def kv_owner(url: str, durable: str, name: str) -> str | None:
    async def get():
        nc = await nats.connect(url)
        try:
            kv = await nc.jetstream().key_value(f"aefgate_ingest_AEP_{durable}")
            try:
                return (await kv.get(claim_key(name))).value.decode()
            except nats.js.errors.KeyNotFoundError:
                return None
        finally:
            await nc.close()

    return asyncio.run(get())


def pulling(url: str, durable: str) -> int:
    try:
        return consumer(url, durable).num_waiting
    except nats.js.errors.NotFoundError:
        return 0


def drained(url: str, durable: str) -> bool:
    try:
        info = consumer(url, durable)
    except nats.js.errors.NotFoundError:
        return False
    return info.num_pending == 0 and info.num_ack_pending == 0


def check_fleet_runs(outs: list[Path], sessions: list[list[dict]], tmp: Path) -> dict[str, Path]:
    """Each session sealed exactly once, in one output, whole (its results equal the single-process import of its
    events), intact; nothing else sealed anywhere; no journal left."""
    found = sealed(outs)
    names = {run_name(evs[0]["session"]): evs for evs in sessions}
    assert sorted(found) == sorted(names), found  # no second generation, no partial run under another name
    by_name = {}
    for name, evs in names.items():
        assert len(found[name]) == 1, (name, found[name])  # in exactly one output
        run = found[name][0]
        v = verify_run(run)
        assert v.outcome == "intact", v.problems
        assert results(run) == results(reference(evs, tmp))
        by_name[name] = run
    for out in outs:
        assert not list((out / ".journal").iterdir())
    return by_name


# -- tests ------------------------------------------------------------------------------------------------------


def test_node_name_is_kept_and_checked(tmp_path) -> None:
    out = tmp_path / "out"
    first = node_name(out)
    assert first == node_name(out) and (out / ".ingest" / "node").read_text().strip() == first
    assert node_name(tmp_path / "other") != first  # another OUT on this host: another node
    assert node_name(out, "east-1") == "east-1" and node_name(out) == "east-1"  # given once, kept
    p = subprocess.run([sys.executable, "-c", ENTRY, "serve", "ingest", "--from", "nats://127.0.0.1:1/aep.x",
                        "--durable", "d", "--out", str(out), "--node", "a.b"], capture_output=True, text=True)
    assert p.returncode == 2 and "error [CLI-2] at --node" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, "-c", ENTRY, "serve", "ingest", "--from", "http://127.0.0.1:1",
                        "--out", str(out), "--node", "n"], capture_output=True, text=True)
    assert p.returncode == 2 and "error [CLI-2] at --node" in p.stderr


def test_three_nodes_with_separate_outs_seal_each_session_once_whole(nats_server, tmp_path) -> None:
    sessions = [session_events(s, 12 + 3 * s) for s in range(6)]
    publish(nats_server.url, [])  # the stream exists before the consumers bind
    outs = hosts(tmp_path, "host0", "host1", "host2")
    nodes = [Serve(out, nats_server.url + "/" + SUBJECT, "--durable", "fleet", "--max-inflight", "3", idle=2.5)
             for out in outs]
    wait_for(lambda: pulling(nats_server.url, "fleet") >= 3, what="three processes pulling")
    publish(nats_server.url, [nats_message(e, binary=i % 2 == 0) for i, e in enumerate(interleave(sessions))])
    names = sorted(run_name(s[0]["session"]) for s in sessions)
    wait_for(lambda: sorted(sealed(outs)) == names, timeout=60, what="every session sealed")
    stats = [n.stop() for n in nodes]
    by_name = check_fleet_runs(outs, sessions, tmp_path)
    total = sum(len(s) for s in sessions)
    assert sum(s["events"] for s in stats) == total  # journaled once each, by its owner (taken or forwarded)
    assert sum(s["sealed_events"] for s in stats) == total and sum(s["runs"] for s in stats) == len(sessions)
    assert sum(s["claimed"] for s in stats) == len(sessions)
    assert sum(s["received"] > 0 for s in stats) >= 2, stats  # the load was shared
    assert sum(s["forwarded"] for s in stats) > 0, stats  # events reached a node that did not own their session
    for name, run in by_name.items():  # the run lies where the bucket says its owner is
        owner = kv_owner(nats_server.url, "fleet", name)
        assert owner == (run.parent / ".ingest" / "node").read_text().strip()
    assert drained(nats_server.url, "fleet")
    for out in outs:  # every forwarded message was journaled and acknowledged by its owner
        node = (out / ".ingest" / "node").read_text().strip()
        info = asyncio.run(_consumer_info(nats_server.url, "AEFGATE_INGEST_AEP_fleet", f"node-{node}"))
        assert info.num_pending == 0 and info.num_ack_pending == 0


async def _consumer_info(url: str, stream: str, name: str):
    nc = await nats.connect(url)
    try:
        return await nc.jetstream().consumer_info(stream, name)
    finally:
        await nc.close()


def preferring(node: str, other: str, count: int) -> list[int]:
    """Session numbers whose session the rendezvous hashing of the fleet {node, other} gives to ``node``."""
    def score(n: str, s: int) -> bytes:
        return hashlib.sha256(f"{n}\0{run_name(f'fleet-s{s}')}".encode()).digest()

    return [s for s in range(100) if score(node, s) > score(other, s)][:count]


def test_kill9_of_an_owner_mid_session_and_restart_gives_the_uninterrupted_runs(nats_server, tmp_path) -> None:
    # sessions 0 and 1 go to node b, 2 and 3 to node a (both live when they start)
    sessions = [session_events(s, 16) for s in preferring("b", "a", 2) + preferring("a", "b", 2)]
    msgs = {e["id"]: nats_message(e, binary=False) for evs in sessions for e in evs}
    url = nats_server.url + "/" + SUBJECT
    args = ("--durable", "fleet", "--max-inflight", "2", "--ack-wait", "2")
    outs = hosts(tmp_path, "host-a", "host-b")
    publish(nats_server.url, [])
    a = Serve(outs[0], url, *args, "--node", "a", idle=3.0)
    b = Serve(outs[1], url, *args, "--node", "b", idle=3.0)
    wait_for(lambda: pulling(nats_server.url, "fleet") >= 2, what="both pulling")
    publish(nats_server.url, [msgs[e["id"]] for e in interleave([s[:8] for s in sessions])])  # the first halves
    wait_for(lambda: drained(nats_server.url, "fleet"), what="the first halves")
    owners = [kv_owner(nats_server.url, "fleet", run_name(s[0]["session"])) for s in sessions]
    assert owners == ["b", "b", "a", "a"]
    b.stop(signal.SIGKILL)  # the owner of sessions 0 and 1 crashes mid-session
    assert sealed(outs) == {}
    # the second halves, and redeliveries of events already journaled (new message ids: the stream keeps them)
    again = [(dict(h, **{"Nats-Msg-Id": h["Nats-Msg-Id"] + "-again"}), body)
             for h, body in (msgs[sessions[0][1]["id"]], msgs[sessions[1][2]["id"]], msgs[sessions[2][3]["id"]])]
    publish(nats_server.url, [msgs[e["id"]] for e in interleave([s[8:] for s in sessions])] + again)
    wait_for(lambda: drained(nats_server.url, "fleet"), what="A took everything")  # B's part forwarded, waiting
    b_journal = outs[1] / ".journal" / f"{run_name(sessions[0][0]['session'])}.jsonl"
    assert len(b_journal.read_text().splitlines()) == 8 and sessions[0][8]["id"] not in b_journal.read_text()
    names = [run_name(s[0]["session"]) for s in sessions]
    wait_for(lambda: sorted(sealed(outs)) == sorted(names[2:]), timeout=30, what="A's sessions sealed")
    assert not any(n in runs(outs[0]) for n in names[:2])  # A never seals what B owns
    b = Serve(outs[1], url, *args, idle=3.0)  # no --node: the name kept in OUT/.ingest/node, the same node
    wait_for(lambda: sorted(sealed(outs)) == sorted(names), timeout=60, what="B's sessions sealed after restart")
    sa, sb = a.stop(), b.stop()
    fleet = check_fleet_runs(outs, sessions, tmp_path)
    assert all(fleet[n].parent == outs[1] for n in names[:2]) and all(fleet[n].parent == outs[0] for n in names[2:])
    assert sa["forwarded"] > 0 and sa["duplicates"] + sb["duplicates"] >= 1  # the redeliveries, dropped

    # the uninterrupted single-process ingest of the same stream (its own durable and output): the same runs
    ref_out = tmp_path / "single"
    ref = Serve(ref_out, url, "--durable", "single", idle=1.0)
    wait_for(lambda: sorted(runs(ref_out)) == sorted(names), timeout=60, what="the single-process runs")
    ref.stop()
    for name in names:
        assert results(fleet[name]) == results(ref_out / name)
        assert run_hash(fleet[name]) == run_hash(ref_out / name)
        assert (fleet[name] / "run.json").read_bytes() == (ref_out / name / "run.json").read_bytes()


def test_sigterm_of_the_fleet_drains_and_seals_whole_runs(nats_server, tmp_path) -> None:
    """Events published by the real ``aefgate publish`` from a sealed run; two nodes; idle long: only the
    SIGTERM seals. Each node drains what the other forwarded before it seals."""
    sessions = [session_events(s, 10) for s in range(3)]
    outs = hosts(tmp_path, "east", "west")
    url = nats_server.url + "/" + SUBJECT
    publish(nats_server.url, [])
    nodes = [Serve(out, url, "--durable", "fleet", "--max-inflight", "2", "--node", node, idle=120.0)
             for out, node in zip(outs, ("east", "west"))]
    wait_for(lambda: pulling(nats_server.url, "fleet") >= 2, what="both pulling")
    # the events of each session as the real `aefgate publish` puts them on the bus (from a sealed run)
    for evs in sessions:
        run = reference(evs, tmp_path)
        p = subprocess.run([sys.executable, "-m", "aefgate", "publish", str(run), "--to", url],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
    wait_for(lambda: drained(nats_server.url, "fleet"), timeout=60, what="every message taken")
    assert sealed(outs) == {}
    for n in nodes:  # SIGTERM to both at once, then wait for each
        n.proc.send_signal(signal.SIGTERM)
    stats = [n.stop(None, timeout=60) for n in nodes]  # one SIGTERM each: no second signal while sealing
    check_fleet_runs(outs, [_as_published(evs, tmp_path) for evs in sessions], tmp_path)
    assert sum(s["runs"] for s in stats) == len(sessions)


def _as_published(events: list[dict], tmp: Path) -> list[dict]:
    """The events `aefgate publish` sends for the run `reference(events)` builds (its export)."""
    from aefgate.converters.aep.exporter import export_events

    return list(export_events(reference(events, tmp)))


def test_kill9_of_a_forwarding_node_loses_and_duplicates_nothing(nats_server, tmp_path) -> None:
    """Every session belongs to node a; node b only forwards, and is killed while it does. What b took but had not
    acknowledged comes again (AckWait 1 s) to a; what b forwarded and acknowledged waits for a in the stream."""
    sessions = [session_events(s, 40) for s in preferring("a", "b", 3)]
    url = nats_server.url + "/" + SUBJECT
    args = ("--durable", "fleet", "--max-inflight", "1", "--ack-wait", "1")
    outs = hosts(tmp_path, "host-a", "host-b")
    publish(nats_server.url, [])
    a = Serve(outs[0], url, *args, "--node", "a", idle=3.0)
    b = Serve(outs[1], url, *args, "--node", "b", idle=3.0)
    wait_for(lambda: pulling(nats_server.url, "fleet") >= 2, what="both pulling")
    publish(nats_server.url, [nats_message(e, binary=True) for e in interleave(sessions)])

    def forwarding() -> bool:
        try:
            info = asyncio.run(_consumer_info(nats_server.url, "AEFGATE_INGEST_AEP_fleet", "node-a"))
        except nats.js.errors.NotFoundError:
            return False
        return info.delivered.stream_seq > 0

    wait_for(forwarding, what="b forwarding to a")
    b.stop(signal.SIGKILL)
    names = sorted(run_name(s[0]["session"]) for s in sessions)
    wait_for(lambda: sorted(sealed(outs)) == names, timeout=60, what="every session sealed by a")
    stats = a.stop()
    check_fleet_runs(outs, sessions, tmp_path)
    assert runs(outs[1]) == [] and stats["runs"] == len(sessions)
    assert drained(nats_server.url, "fleet")
