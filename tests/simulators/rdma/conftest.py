"""What the transport tests share: ranks as threads of this process, each with its own transport."""

from __future__ import annotations

import threading


def run_threads(transports, body, join_s: float = 60.0, before=None):
    """Open every transport, call before(book) if given (e.g. to connect a stranger to a rank's
    address first), then on one thread per rank connect it, run body(rank, transport) and close
    it; returns (what each body returned, the errors raised). A rank still running after
    `join_s` fails the test."""
    world = len(transports)
    book = [t.open(r, world) for r, t in enumerate(transports)]
    if before is not None:
        before(book)
    results, errors = [None] * world, []

    def run(r):
        try:
            transports[r].connect(book)
            results[r] = body(r, transports[r])
        except Exception as exc:
            errors.append(exc)
        finally:
            transports[r].close()

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(world)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(join_s)
    assert not any(th.is_alive() for th in threads), "a rank hung"
    return results, errors
