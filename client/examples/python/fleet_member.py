#!/usr/bin/env python3
"""A redis-throttle fleet member in Python: calls a supplier under the fleet's shared quota
and cap on calls in flight, as the command reference's "Writing a client in another language"
describes, beside Rust processes on the same key.

Needs redis-py (Debian: apt-get install python3-redis; or pip install redis). Runs on the
THROTTLE module, the function library, or the script (--script client/lua/throttle.lua).

    python3 fleet_member.py --url redis://127.0.0.1:6379 --key quota:supplier \\
        --capacity 10 --rate 10 --inflight 4 --lease-ms 5000 \\
        --supplier http://127.0.0.1:8080/ --tasks 4 --seconds 30

Waits for a slot in the server's line (TAKE ... LINE), hearing its hand-off on the key's
channel (`handed <ticket> <wait_ms>`) or looking again with WAITER when the reply says.

Prints one JSON line at the end: calls made, takes and releases sent, calls that gave up.
"""

import argparse
import json
import threading
import time
import urllib.error
import urllib.request

import redis

# How long a waiter keeps its place without looking again (the reply says when to look).
PLACE_MS = 10_000


def pause_channel(key):
    """The key's channel, in the key's own hash slot (the command reference's rule)."""
    prefix = "throttle:pause:"
    open_at = key.find("{")
    if open_at >= 0:
        close_at = key.find("}", open_at + 1)
        if close_at > open_at + 1:
            return prefix + key
    if key and "}" not in key:
        return prefix + "{" + key + "}"
    return key


class Ears:
    """Hears the hand-offs announced on the key's channel (SSUBSCRIBE, in a thread)."""

    def __init__(self, url, key):
        self.handed = {}
        self.cond = threading.Condition()
        client = redis.Redis.from_url(url, socket_timeout=None)
        self.con = client.connection_pool.get_connection("SSUBSCRIBE")
        self.con.send_command("SSUBSCRIBE", pause_channel(key))
        self.con.read_response()  # the subscription's confirmation
        threading.Thread(target=self.listen, daemon=True).start()

    def listen(self):
        while True:
            try:
                kind, _, message = self.con.read_response()[:3]
            except (redis.ConnectionError, ValueError):
                return  # the waiters look again on their own
            words = message.split() if kind == b"smessage" else []
            if len(words) == 3 and words[0] == b"handed":
                with self.cond:
                    # A few: a waiter may hear its own before its take's reply.
                    if len(self.handed) > 256:
                        self.handed.pop(next(iter(self.handed)))
                    self.handed[int(words[1])] = int(words[2])
                    self.cond.notify_all()

    def wait_for(self, ticket, seconds):
        """The wait_ms of `ticket`'s hand-off, once heard within `seconds`, else None."""
        end = time.monotonic() + seconds
        with self.cond:
            while ticket not in self.handed:
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)
            return self.handed.pop(ticket)


class Throttle:
    """The THROTTLE commands on whichever backend the server has (step 1 of the guide)."""

    def __init__(self, con, key, quota, script_path=None):
        self.con = con
        self.sha = None
        self.source = None
        # A read-only PEEK answers where the module is loaded (redis-py cannot read the nil
        # that COMMAND INFO gives for a missing command).
        try:
            con.execute_command("THROTTLE.PEEK", key, *quota)
            self.backend = "module"
            return
        except redis.ResponseError as err:
            if "unknown command" not in str(err).lower():
                raise
        try:
            con.execute_command("FCALL_RO", "throttle_version", 0)
            self.backend = "library"
            return
        except redis.ResponseError:
            pass
        if script_path is None:
            raise SystemExit(
                "the server has neither the THROTTLE module nor the throttle function library: "
                "load one, or pass --script client/lua/throttle.lua"
            )
        with open(script_path, encoding="utf-8") as f:
            self.source = f.read()
        self.sha = con.script_load(self.source)
        self.backend = "script"

    def __call__(self, command, key, *args):
        if self.backend == "module":
            return self.con.execute_command("THROTTLE." + command.upper(), key, *args)
        if self.backend == "library":
            fcall = "FCALL_RO" if command in ("peek", "slots") else "FCALL"
            return self.con.execute_command(fcall, "throttle_" + command, 1, key, *args)
        try:
            return self.con.evalsha(self.sha, 1, key, command, *args)
        except redis.exceptions.NoScriptError:
            self.sha = self.con.script_load(self.source)
            return self.con.evalsha(self.sha, 1, key, command, *args)


class Member:
    def __init__(self, opts):
        self.opts = opts
        con = redis.Redis.from_url(opts.url, socket_timeout=5)
        self.quota = (opts.capacity, opts.rate)
        self.throttle = Throttle(con, opts.key, self.quota, opts.script)
        self.ears = Ears(opts.url, opts.key)
        self.lock = threading.Lock()
        self.counts = {"calls": 0, "takes": 0, "releases": 0, "gave_up": 0, "pauses": 0}

    def count(self, name):
        with self.lock:
            self.counts[name] += 1

    def take(self, deadline):
        """A slot and a token, or None past the deadline (step 3 of the guide)."""
        o = self.opts
        ticket = None
        while True:
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms < 0:
                if ticket is not None:
                    # Gave up in line: leave it, so that no slot is handed to nobody.
                    self.throttle("release", o.key, *self.quota, ticket)
                return None
            line = ["LINE", PLACE_MS] + (["WAITER", ticket] if ticket else [])
            reply = self.throttle(
                "take", o.key, *self.quota, "MAXWAIT", left_ms, "INFLIGHT", o.inflight,
                "LEASE", o.lease_ms, *line,
            )
            self.count("takes")
            # [granted, remaining, wait_ms, reset_ms, slot or ticket, place(, reason)]
            granted, wait_ms, slot = reply[0], reply[2], reply[4]
            if granted == 1:
                time.sleep(wait_ms / 1000)  # a reservation: the token is ours at its time
                return slot
            if reply[-1] & 16:
                # In line: the slot comes in our turn. Hear it handed, or look again when
                # the reply says (to keep the place, or when a lease may run out).
                ticket = slot
                heard = self.ears.wait_for(ticket, min(wait_ms, max(left_ms, 0)) / 1000)
                if heard is not None:
                    time.sleep(heard / 1000)  # its tokens were taken at the hand-off
                    return ticket
                continue
            ticket = None
            if wait_ms > left_ms:
                return None
            # Held back by its tokens (or a pause): they are there after wait_ms.
            time.sleep(max(wait_ms, 1) / 1000)

    def call(self):
        o = self.opts
        deadline = time.monotonic() + o.max_wait_ms / 1000
        slot = self.take(deadline)
        if slot is None:
            self.count("gave_up")
            return
        try:
            request = urllib.request.Request(o.supplier, headers={"x-client": o.name})
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    response.read()
            except urllib.error.HTTPError as err:
                if err.code in (429, 503):
                    # Step 6: the supplier's pushback pauses the whole fleet.
                    retry_after = err.headers.get("Retry-After", "1")
                    ms = int(float(retry_after) * 1000) if retry_after.isdigit() else 1000
                    self.throttle("pause", o.key, *self.quota, max(ms, 1))
                    self.count("pauses")
            self.count("calls")
        finally:
            # Step 5: the slot goes back whatever happened.
            self.throttle("release", o.key, *self.quota, slot, "INFLIGHT", o.inflight)
            self.count("releases")

    def run(self):
        end = time.monotonic() + self.opts.seconds
        threads = [
            threading.Thread(target=self.worker, args=(end,), daemon=True)
            for _ in range(self.opts.tasks)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return dict(self.counts, backend=self.throttle.backend)

    def worker(self, end):
        while time.monotonic() < end:
            self.call()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default="redis://127.0.0.1:6379")
    p.add_argument("--key", required=True, help="the bucket's key, as the fleet names it")
    p.add_argument("--capacity", type=int, required=True)
    p.add_argument("--rate", required=True, help="tokens per second, as the Rust client sends it")
    p.add_argument("--inflight", type=int, required=True, help="the fleet's cap on calls in flight")
    p.add_argument("--lease-ms", type=int, default=10_000, help="a slot's lease (longer than a call)")
    p.add_argument("--max-wait-ms", type=int, default=60_000, help="a call's deadline")
    p.add_argument("--supplier", required=True, help="the URL each call gets")
    p.add_argument("--name", default="python", help="sent as the x-client header")
    p.add_argument("--tasks", type=int, default=4, help="calls this process makes at once")
    p.add_argument("--seconds", type=float, default=10.0, help="how long to call")
    p.add_argument("--script", help="the Lua twin, for a server with neither module nor library")
    print(json.dumps(Member(p.parse_args()).run()), flush=True)


if __name__ == "__main__":
    main()
