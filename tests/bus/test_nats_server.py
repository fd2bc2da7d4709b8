"""The test suite's own nats-server starts, takes a JetStream publish with an ack, and survives a kill/restart."""

from __future__ import annotations

import asyncio

import nats


def test_jetstream_publish_ack_and_restart(nats_server) -> None:
    async def publish(n: int) -> list[tuple[int, bool]]:
        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        await js.add_stream(name="T", subjects=["t.>"])
        acks = [await js.publish("t.x", b"hello", headers={"Nats-Msg-Id": f"m{i % 2}"}) for i in range(n)]
        await nc.close()
        return [(a.seq, bool(a.duplicate)) for a in acks]

    async def count() -> int:
        nc = await nats.connect(nats_server.url)
        info = await nc.jetstream().stream_info("T")
        await nc.close()
        return info.state.messages

    # Nats-Msg-Id m0, m1, then the same ids again: acked as duplicates of the first two, not stored twice
    assert asyncio.run(publish(4)) == [(1, False), (2, False), (1, True), (2, True)]
    nats_server.restart()  # SIGKILL and start on the same port and store
    assert asyncio.run(count()) == 2
