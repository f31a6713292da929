#!/usr/bin/env python3
"""A TCP proxy in front of PostgreSQL that faults the nodes' connections
under load, for the fault soak in BENCHMARKS.md ("Connections faulted under
load"). Loopback only.

    python3 benches/pg_fault_proxy.py LISTEN_PORT GAP_S FRACTION ROUNDS [GO_FILE]

It relays 127.0.0.1:LISTEN_PORT to PostgreSQL on 127.0.0.1:5432. Only the
connections whose startup message names application_name=rolecall (the
nodes') are faulted, so a load driver's own connections are left alone.
Once GO_FILE exists (at once without it), every GAP_S seconds, ROUNDS times,
FRACTION of the nodes' healthy connections (below 1), or that many of them
(1 or more: the same faults whatever the nodes do), get, in turn:
- kill: both sockets reset;
- mute: nothing more passes either way, both sockets stay open (a network
  fault neither end sees; the server hears the client leave when it does);
- ghost: the client's bytes are dropped, the server's side stays open 25 s
  after the client leaves (as long as the server's keepalives would take).
"""
import asyncio
import os
import random
import sys
import time

PORT, GAP, FRACTION, ROUNDS = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
GO = sys.argv[5] if len(sys.argv) > 5 else None
NODE = b"application_name\x00rolecall\x00"
connections = []


async def pipe(source, sink, conn, up):
    try:
        while True:
            data = await source.read(65536)
            if not data:
                break
            if up and conn["node"] is None:
                conn["node"] = NODE in data
            state = conn["state"]
            if state == "mute" or (state == "ghost" and up):
                continue
            sink.write(data)
            await sink.drain()
    except (ConnectionError, OSError):
        pass
    if up:
        if conn["state"] == "ghost":
            await asyncio.sleep(25)
        conn["server"].close()
    else:
        conn["client"].close()


async def relay(client_reader, client_writer):
    try:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", 5432)
    except OSError:
        client_writer.close()
        return
    conn = {"node": None, "state": "ok", "client": client_writer, "server": server_writer}
    connections.append(conn)
    conn["tasks"] = (
        asyncio.create_task(pipe(client_reader, server_writer, conn, True)),
        asyncio.create_task(pipe(server_reader, client_writer, conn, False)),
    )
    await asyncio.gather(*conn["tasks"], return_exceptions=True)
    connections.remove(conn)


async def faults():
    while GO and not os.path.exists(GO):
        await asyncio.sleep(0.1)
    done = {"kill": 0, "mute": 0, "ghost": 0}
    for round_ in range(ROUNDS):
        kind = ("kill", "mute", "ghost")[round_ % 3]
        healthy = [c for c in connections if c["node"] and c["state"] == "ok"]
        wanted = int(FRACTION) if FRACTION >= 1 else max(1, int(len(healthy) * FRACTION))
        hit = random.sample(healthy, min(wanted, len(healthy)))
        for conn in hit:
            if kind == "kill":
                for task in conn["tasks"]:
                    task.cancel()
                for side in ("client", "server"):
                    conn[side].transport.abort()
            else:
                conn["state"] = kind
        done[kind] += len(hit)
        print(f"{time.strftime('%T')} round {round_ + 1}: {kind} {len(hit)} of {len(healthy)}", flush=True)
        await asyncio.sleep(GAP)
    print("faults done", done, flush=True)


async def main():
    server = await asyncio.start_server(relay, "127.0.0.1", PORT)
    asyncio.create_task(faults())
    async with server:
        await server.serve_forever()


asyncio.run(main())
