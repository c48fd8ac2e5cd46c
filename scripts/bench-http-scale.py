#!/usr/bin/env python3
"""settee-bench's scale group: one `settee serve` at Sync Gateway's scale, measured in one run.

Called by scripts/bench-http (`--only scale`) with the server's ports and process ID:

    bench-http-scale.py --port P --admin A --pid PID [--users N] [--json PATH]

In order, against one database `db` (file storage):
  channels  10,000 documents with _bulk_docs (admin port, batches of 1,000), one in each of the
            channels ch-0 ... ch-9999, so that 10,000 channel logs exist;
  users     N users made one after another on one keep-alive connection (admin PUT /db/_user),
            each with a pre-made PBKDF2-SHA256 password_hash (no hashing on the server) and one
            channel of the 10,000; ms per user for each block of N/10, and the server's RSS after
            each block; 100 logins right after the first block (bytes written per login on a
            small database); then 20 users with a plaintext password (one hash each) and the
            hash's cost from /_metrics;
  logins    1,000 logins of 1,000 distinct users (POST /db/_session, 16 connections at once)
            alone: logins per second beside the hash pool's rate, bytes written per login;
  GET       one user GETs one document, one request at a time: 5 s idle, then while 1,000
            logins of 1,000 other users run as before: GET p50/p99 of both, and those logins'
            rate;
  feeds     1,000 continuous _changes feeds of 1,000 users with 10 channels each (`common` and 9
            of the 10,000), one epoll loop over raw sockets: the server's RSS with them open; 10
            writes into `common` (each reaches every feed) and 10 into a channel only feeder-0
            has, timed from sending the PUT until the feeds have the document's ID.

Every request's status is checked (anything but 2xx ends the run, naming the request and the
answer), every wait has a deadline. The table goes to stdout, progress to stderr; with --json the
figures are added to that file's "results" (made when missing). Standard library only.
"""
import argparse
import base64
import hashlib
import json
import math
import os
import re
import select
import socket
import statistics
import sys
import threading
import time

CHANNELS = 10000
LOGINS = 1000
SMALL_LOGINS = 100
LOGIN_CONCURRENCY = 16
PLAIN_USERS = 20
FEEDS = 1000
FEED_WRITES = 10
IDLE_GET_SECONDS = 5.0
PASSWORD = "pw"
ROUNDS = 210000
TIMEOUT = 60.0  # seconds any one request may take


class BenchError(Exception):
    pass


def log(msg):
    print("bench-http-scale: " + msg, file=sys.stderr, flush=True)


# -- HTTP/1.1 over plain sockets ------------------------------------------------------------------

def build_request(method, path, body=None, headers=()):
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1"]
    if body is not None:
        lines += ["Content-Type: application/json", "Content-Length: %d" % len(body)]
    lines += list(headers)
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


def parse_response(buf, eof=False):
    """(status, headers, body, bytes used) of the first response in buf; None while incomplete.
    Header names are lowercased; repeated headers are joined with "\\n"."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = buf[:end].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise BenchError("not an HTTP response: %r" % lines[0][:200])
    status = int(parts[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        k, v = k.strip().lower(), v.strip()
        headers[k] = headers[k] + "\n" + v if k in headers else v
    pos = end + 4
    if status in (204, 304) or 100 <= status < 200:
        return status, headers, b"", pos
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = bytearray()
        while True:
            le = buf.find(b"\r\n", pos)
            if le < 0:
                return None
            size = int(buf[pos:le].split(b";")[0].strip() or b"0", 16)
            if size == 0:
                trailer_end = buf.find(b"\r\n", le + 2)
                while trailer_end >= 0 and trailer_end != le + 2:  # trailers, then an empty line
                    le = trailer_end
                    trailer_end = buf.find(b"\r\n", le + 2)
                if trailer_end < 0:
                    return None
                return status, headers, bytes(body), trailer_end + 2
            if len(buf) < le + 2 + size + 2:
                return None
            body += buf[le + 2:le + 2 + size]
            pos = le + 2 + size + 2
    if "content-length" in headers:
        n = int(headers["content-length"])
        if len(buf) < pos + n:
            return None
        return status, headers, bytes(buf[pos:pos + n]), pos + n
    # Neither: the body ends with the connection.
    return (status, headers, bytes(buf[pos:]), len(buf)) if eof else None


def describe(method, path, body):
    text = "%s %s" % (method, path)
    if body is not None:
        shown = body.decode("utf-8", "replace")
        text += " " + (shown if len(shown) <= 300 else shown[:300] + "...")
    return text


class Conn:
    """One keep-alive connection, one request at a time, each with a deadline."""

    def __init__(self, port, timeout=TIMEOUT):
        self.port, self.timeout = port, timeout
        self.sock, self.buf = None, b""
        self.received = 0  # bytes read from the server (what it wrote to this socket)
        self.reconnects = 0

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock, self.buf = None, b""

    def request(self, method, path, body=None, headers=(), ok=None):
        """The answer's (status, headers, body); a status outside `ok` (default: any 2xx) fails the run."""
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        data = build_request(method, path, body, headers)
        reused = self.sock is not None
        for attempt in (0, 1):
            if self.sock is None:
                try:
                    self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
                except OSError as e:
                    raise BenchError("%s: cannot connect to port %d: %s" % (describe(method, path, body), self.port, e))
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self.buf = b""
            try:
                self.sock.sendall(data)
                answer = self._read(method, path, body)
            except ConnectionError as e:
                # A keep-alive connection the server closed while idle: one new connection, only
                # when nothing of an answer came (the request was not seen).
                self.close()
                if attempt == 0 and reused:
                    self.reconnects += 1
                    continue
                raise BenchError("%s: the connection failed: %s" % (describe(method, path, body), e))
            break
        status, hdrs, rbody = answer
        if not (ok and status in ok or not ok and 200 <= status < 300):
            raise BenchError("%s answered %d%s: %s" % (describe(method, path, body), status,
                                                       "" if not ok else " (expected %s)" % "/".join(map(str, ok)),
                                                       rbody[:500].decode("utf-8", "replace")))
        return answer

    def _read(self, method, path, body):
        deadline = time.monotonic() + self.timeout
        while True:
            r = parse_response(self.buf)
            if r is not None:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError("%s: no answer in %.0f s" % (describe(method, path, body), self.timeout))
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 16)
            except socket.timeout:
                raise BenchError("%s: no answer in %.0f s" % (describe(method, path, body), self.timeout))
            if not chunk:
                r = parse_response(self.buf, eof=True)
                if r is not None:
                    self.buf = b""
                    status, hdrs, rbody, _ = r
                    self.close()
                    return status, hdrs, rbody
                if self.buf:
                    raise BenchError("%s: the server closed the connection in the middle of its answer: %r"
                                     % (describe(method, path, body), self.buf[:300]))
                raise ConnectionResetError("closed before answering")
            self.received += len(chunk)
            self.buf += chunk
        status, hdrs, rbody, used = r
        self.buf = self.buf[used:]
        if "close" in hdrs.get("connection", "").lower():
            self.close()
        return status, hdrs, rbody


# -- The server process ----------------------------------------------------------------------------

def rss_mib(pid, field="VmRSS"):
    """VmRSS (or RssAnon, RssFile: its anonymous memory and the pages of files mapped, the executable's,
    its libraries' and the database's) in MiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    raise BenchError("no %s in /proc/%d/status" % (field, pid))


def wchar(pid):
    with open("/proc/%d/io" % pid) as f:
        for line in f:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    raise BenchError("no wchar in /proc/%d/io" % pid)


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def quiesce(pid, limit=60):
    """Waits until the server is idle (under 5 % of a core over a second; at most `limit` s)."""
    for _ in range(limit):
        a = cpu_ticks(pid)
        time.sleep(1)
        if cpu_ticks(pid) - a < 5:
            return
    log("the server was still busy after %d s; going on" % limit)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


METRIC = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def metrics(conn):
    """/_metrics as {(name, labels text): value}."""
    _, _, body = conn.request("GET", "/_metrics", ok=(200,))
    out = {}
    for line in body.decode().splitlines():
        m = METRIC.match(line)
        if m:
            out[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return out


def metric(values, name, database=None):
    for (n, labels), v in values.items():
        if n == name and (database is None or 'database="%s"' % database in labels):
            return v
    raise BenchError("/_metrics has no %s%s" % (name, "" if database is None else '{database="%s"}' % database))


def pct(values, p):
    """Nearest-rank percentile."""
    s = sorted(values)
    return s[max(0, min(len(s) - 1, math.ceil(p / 100.0 * len(s)) - 1))]


# -- The phases ------------------------------------------------------------------------------------

def load_channels(admin):
    for start in range(0, CHANNELS, 1000):
        docs = [{"_id": "chdoc-%d" % i, "channels": ["ch-%d" % i], "n": i, "body": "x" * 200}
                for i in range(start, min(start + 1000, CHANNELS))]
        _, _, body = admin.request("POST", "/db/_bulk_docs", {"docs": docs}, ok=(201,))
        rows = json.loads(body)
        bad = [r for r in rows if "error" in r]
        if len(rows) != len(docs) or bad:
            raise BenchError("POST /db/_bulk_docs (chdoc-%d...): %d rows for %d documents, errors: %s"
                             % (start, len(rows), len(docs), json.dumps(bad[:3])))


def make_user(admin, name, channels, password_hash=None, password=None):
    fields = {"admin_channels": channels}
    if password_hash is not None:
        fields["password_hash"] = password_hash
    else:
        fields["password"] = password
    admin.request("PUT", "/db/_user/" + name, fields, ok=(201,))


def login_storm(port, names, concurrency=LOGIN_CONCURRENCY, timeout=TIMEOUT):
    """Logs each name in (POST /db/_session, password "pw") on `concurrency` keep-alive connections
    in one epoll loop. Returns (seconds, bytes read from the server, latencies in ms)."""
    pending = list(reversed(names))
    ep = select.epoll()
    conns = {}
    received, done, latencies = 0, 0, []

    def connect():
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        ep.register(s.fileno(), select.EPOLLIN)
        c = {"sock": s, "buf": b"", "name": None}
        conns[s.fileno()] = c
        return c

    def send(c):
        name = pending.pop()
        body = json.dumps({"name": name, "password": PASSWORD}).encode()
        c["name"], c["body"], c["sent"], c["buf"] = name, body, time.perf_counter(), b""
        c["sock"].sendall(build_request("POST", "/db/_session", body))

    t0 = time.perf_counter()
    try:
        for _ in range(min(concurrency, len(pending))):
            send(connect())
        while done < len(names):
            events = ep.poll(1.0)
            now = time.perf_counter()
            for c in conns.values():
                if c["name"] is not None and now - c["sent"] > timeout:
                    raise BenchError("%s: no answer in %.0f s" % (describe("POST", "/db/_session", c["body"]), timeout))
            for fd, _ in events:
                c = conns[fd]
                try:
                    chunk = c["sock"].recv(1 << 16)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError as e:
                    raise BenchError("%s: the connection failed: %s" % (describe("POST", "/db/_session", c.get("body")), e))
                if not chunk:
                    raise BenchError("%s: the server closed the connection without answering (%r)"
                                     % (describe("POST", "/db/_session", c.get("body")), c["buf"][:300]))
                received += len(chunk)
                c["buf"] += chunk
                r = parse_response(c["buf"])
                if r is None:
                    continue
                status, hdrs, body, used = r
                if status != 200:
                    raise BenchError("%s answered %d (expected 200): %s"
                                     % (describe("POST", "/db/_session", c["body"]), status, body[:500].decode("utf-8", "replace")))
                if "SyncGatewaySession=" not in hdrs.get("set-cookie", ""):
                    raise BenchError("%s answered 200 without a SyncGatewaySession cookie: headers %s"
                                     % (describe("POST", "/db/_session", c["body"]), hdrs))
                if len(c["buf"]) != used:
                    raise BenchError("POST /db/_session: %d bytes more than the answer" % (len(c["buf"]) - used))
                latencies.append((now - c["sent"]) * 1000)
                done += 1
                c["name"] = None
                if "close" in hdrs.get("connection", "").lower():
                    ep.unregister(fd)
                    c["sock"].close()
                    del conns[fd]
                    if pending:
                        send(connect())
                elif pending:
                    send(c)
        return time.perf_counter() - t0, received, latencies
    finally:
        for c in conns.values():
            c["sock"].close()
        ep.close()


class GetLoop(threading.Thread):
    """GETs one document, one request at a time on one keep-alive connection, until stopped."""

    def __init__(self, port, path, auth):
        super().__init__(daemon=True)
        self.conn = Conn(port)
        self.path, self.auth = path, auth
        self.halt = threading.Event()
        self.times, self.error = [], None

    def run(self):
        try:
            while not self.halt.is_set():
                t = time.perf_counter()
                self.conn.request("GET", self.path, headers=[self.auth], ok=(200,))
                self.times.append((time.perf_counter() - t) * 1000)
        except Exception as e:  # reported by stop()
            self.error = e
        finally:
            self.conn.close()

    def stop(self):
        self.halt.set()
        self.join(TIMEOUT + 5)
        if self.is_alive():
            raise BenchError("the GET loop did not end")
        if self.error:
            raise self.error if isinstance(self.error, BenchError) else BenchError("the GET loop: %r" % self.error)
        if not self.times:
            raise BenchError("the GET loop made no request")
        return self.times


def logins_bytes(pid, port, admin, names):
    """A login storm, with what the server wrote meanwhile: "wchar" (its wchar's delta), "sockets"
    (what the client read: the server's writes to the sockets), "zeros" (the database file's
    growth: the engine writes zeros ahead of its appends, 4 MiB and more at a time, and wchar
    counts them), "net" (wchar less both), also the storm's "seconds", "ms" (each login's) and
    the hashes' cost meanwhile ("hash_ms"). /_metrics is read outside the window."""
    m = metrics(admin)
    size0, hashes0, hash_s0 = (metric(m, "settee_database_file_size_bytes", "db"), metric(m, "settee_password_hashes_total"),
                               metric(m, "settee_password_hash_seconds_total"))
    compactions0 = metric(m, "settee_database_compactions_total", "db")
    w0 = wchar(pid)
    seconds, received, ms = login_storm(port, names)
    time.sleep(0.5)  # what a login leaves to write after its answer
    written = wchar(pid) - w0
    m = metrics(admin)
    zeros = metric(m, "settee_database_file_size_bytes", "db") - size0
    hashes = metric(m, "settee_password_hashes_total") - hashes0
    hash_ms = (metric(m, "settee_password_hash_seconds_total") - hash_s0) / max(1, hashes) * 1000
    compactions = metric(m, "settee_database_compactions_total", "db") - compactions0
    if compactions:
        log("warning: %d compactions during %d logins: their bytes are in wchar, the file's growth is not the zeros alone" % (compactions, len(names)))
    return {"seconds": seconds, "ms": ms, "wchar": written, "sockets": received, "zeros": zeros, "compactions": compactions,
            "net": written - received - zeros, "hashes": hashes, "hash_ms": hash_ms}


def feeds_phase(args, admin, password_hash):
    """1,000 users with 10 channels each and a continuous feed each; writes into `common` and into
    feeder-0's own channel. Returns a dict of figures."""
    log("making %d feed users and their sessions" % FEEDS)
    cookies = []
    for i in range(FEEDS):
        chans = ["common"] + ["ch-%d" % ((i * 9 + j) % CHANNELS) for j in range(9)]
        if i == 0:
            chans.append("own-feeder-0")
        make_user(admin, "feeder-%d" % i, chans, password_hash=password_hash)
    for i in range(FEEDS):
        _, _, body = admin.request("POST", "/db/_session", {"name": "feeder-%d" % i}, ok=(200,))
        sid = json.loads(body).get("session_id")
        if not sid:
            raise BenchError("POST /db/_session {\"name\": \"feeder-%d\"} (admin port): no session_id in %s" % (i, body[:300]))
        cookies.append(sid)
    quiesce(args.pid)
    rss_before = rss_mib(args.pid)

    log("opening %d continuous feeds" % FEEDS)
    path = "/db/_changes?feed=continuous&since=now&heartbeat=60000"
    socks = []
    ep = select.epoll()
    try:
        for i, sid in enumerate(cookies):
            try:
                s = socket.create_connection(("127.0.0.1", args.port), timeout=TIMEOUT)
            except OSError as e:
                raise BenchError("feed %d: cannot connect: %s" % (i, e))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            socks.append(s)
            s.sendall(build_request("GET", path, headers=["Cookie: SyncGatewaySession=%s" % sid]))
        leftovers = []
        for i, s in enumerate(socks):
            head = b""
            deadline = time.monotonic() + TIMEOUT
            while b"\r\n\r\n" not in head:
                if time.monotonic() > deadline:
                    raise BenchError("GET %s (feeder-%d's cookie): no response head in %.0f s" % (path, i, TIMEOUT))
                try:
                    chunk = s.recv(4096)
                except socket.timeout:
                    raise BenchError("GET %s (feeder-%d's cookie): no response head in %.0f s" % (path, i, TIMEOUT))
                if not chunk:
                    raise BenchError("GET %s (feeder-%d's cookie): closed, having sent %r" % (path, i, head[:300]))
                head += chunk
            status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
            if status_line.split(" ")[1:2] != ["200"]:
                raise BenchError("GET %s (feeder-%d's cookie) answered %r" % (path, i, head[:500].decode("latin-1")))
            leftovers.append(head.split(b"\r\n\r\n", 1)[1])
            s.setblocking(False)
            ep.register(s.fileno(), select.EPOLLIN)
        time.sleep(1.0)
        rss_open = rss_mib(args.pid)
        split_open = (rss_mib(args.pid, "RssAnon"), rss_mib(args.pid, "RssFile"))
        m = metrics(admin)
        open_feeds = metric(m, "settee_database_continuous_feeds", "db")
        if int(open_feeds) != FEEDS:
            log("warning: /_metrics counts %d continuous feeds, %d are open" % (open_feeds, FEEDS))

        index = {s.fileno(): i for i, s in enumerate(socks)}
        tails = {s.fileno(): leftovers[i][-512:] for i, s in enumerate(socks)}
        stray = []  # (feed, document) where a document reached a feed that should not see it

        def drain_into(wanted, watched, seen, writer, deadline):
            """Reads the feeds until every fd in `watched` holds `wanted` and the writer has its
            answer. Returns {fd: arrival time}, the writer's answer."""
            arrivals, answer, wbuf = {}, None, b""
            waiting = set(watched)
            while (waiting or answer is None) and time.perf_counter() < deadline:
                for fd, _ in ep.poll(0.5):
                    if fd == writer.fileno():
                        try:
                            chunk = writer.recv(1 << 16)
                        except (BlockingIOError, InterruptedError):
                            continue
                        if chunk:
                            wbuf += chunk
                        r = parse_response(wbuf, eof=not chunk)
                        if r is not None:
                            answer = r
                        if not chunk:
                            if answer is None:
                                raise BenchError("the writer's connection closed before its answer: %r" % wbuf[:300])
                            ep.unregister(fd)  # closed after its answer (Connection: close)
                        continue
                    try:
                        chunk = socks[index[fd]].recv(1 << 16)
                    except (BlockingIOError, InterruptedError):
                        continue
                    if not chunk:
                        raise BenchError("feeder-%d's feed was closed by the server" % index[fd])
                    data = tails[fd] + chunk
                    tails[fd] = data[-512:]
                    if wanted in data:
                        if fd in waiting:
                            arrivals[fd] = time.perf_counter()
                            waiting.discard(fd)
                        elif fd not in watched:
                            seen.append((index[fd], wanted.decode()))
            return arrivals, answer, waiting

        def timed_writes(label, channel, watched, prefix):
            runs = []  # per write: {fd: ms}
            run_id = "%d" % time.time_ns()
            for n in range(FEED_WRITES):
                doc = "%s-%s-%d" % (prefix, run_id, n)
                body = json.dumps({"channels": [channel], "n": n}).encode()
                w = socket.create_connection(("127.0.0.1", args.admin), timeout=TIMEOUT)
                w.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                try:
                    request = build_request("PUT", "/db/" + doc, body, ["Connection: close"])
                    t0 = time.perf_counter()
                    w.sendall(request)
                    w.setblocking(False)
                    ep.register(w.fileno(), select.EPOLLIN)
                    try:
                        arrivals, answer, waiting = drain_into(doc.encode(), watched, stray, w, t0 + TIMEOUT)
                    finally:
                        try:
                            ep.unregister(w.fileno())
                        except OSError:
                            pass  # already, at its end
                finally:
                    w.close()
                if answer is None:
                    raise BenchError("%s (admin port): no answer in %.0f s" % (describe("PUT", "/db/" + doc, body), TIMEOUT))
                if answer[0] != 201:
                    raise BenchError("%s (admin port) answered %d: %s" % (describe("PUT", "/db/" + doc, body), answer[0],
                                                                        answer[2][:500].decode("utf-8", "replace")))
                if waiting:
                    raise BenchError("%s: %d of %d feeds never had %s in %.0f s (first: feeder-%d)"
                                     % (label, len(waiting), len(watched), doc, TIMEOUT, index[min(waiting, key=index.get)]))
                runs.append({fd: (t - t0) * 1000 for fd, t in arrivals.items()})
                # What else comes for this write in the next 0.2 s (to a feed that should not see it).
                settle(doc.encode(), watched, 0.2)
            return runs

        def settle(doc, watched, seconds):
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                for fd, _ in ep.poll(0.05):
                    try:
                        chunk = socks[index[fd]].recv(1 << 16)
                    except (BlockingIOError, InterruptedError):
                        continue
                    if not chunk:
                        raise BenchError("feeder-%d's feed was closed by the server" % index[fd])
                    data = tails[fd] + chunk
                    tails[fd] = data[-512:]
                    if doc in data and fd not in watched:
                        stray.append((index[fd], doc.decode()))

        quiesce(args.pid)
        log("%d writes into `common` (reaches all %d feeds)" % (FEED_WRITES, FEEDS))
        common = timed_writes("common", "common", set(index), "common-write")
        log("%d writes into feeder-0's own channel" % FEED_WRITES)
        own_fd = socks[0].fileno()
        private = timed_writes("own-feeder-0", "own-feeder-0", {own_fd}, "own-write")
        # Give the other feeds time to show anything they should not have.
        settle(b"own-write-", {own_fd}, 1.0)
    finally:
        for s in socks:
            s.close()
        ep.close()

    alls = [max(r.values()) for r in common]
    every = [ms for r in common for ms in r.values()]
    per_feed_p99 = [pct([r[fd] for r in common], 99) for fd in index]
    own = [r[own_fd] for r in private]
    return {"rss_before_mib": rss_before, "rss_open_mib": rss_open, "split_open": split_open, "open_feeds_metric": open_feeds,
            "all_median_ms": statistics.median(alls), "all_p99_ms": pct(alls, 99), "all_each_ms": alls,
            "arrival_p99_ms": pct(every, 99), "feed_p99_median_ms": statistics.median(per_feed_p99),
            "feed_p99_max_ms": max(per_feed_p99),
            "own_median_ms": statistics.median(own), "own_p99_ms": pct(own, 99), "stray": stray}


# -- The run ---------------------------------------------------------------------------------------

def run(args):
    n = args.users
    block = n // 10
    rows = []  # (figure, value, unit, target/ratio, method)
    admin = Conn(args.admin)
    start_load = loadavg()
    t_start = time.monotonic()

    salt = b"settee-bench-sc1"  # 16 bytes
    password_hash = {"algorithm": "pbkdf2-sha256", "rounds": ROUNDS, "salt": base64.b64encode(salt).decode(),
                     "hash": base64.b64encode(hashlib.pbkdf2_hmac("sha256", PASSWORD.encode(), salt, ROUNDS)).decode()}

    log("loading %d documents, one in each of %d channels" % (CHANNELS, CHANNELS))
    load_channels(admin)
    make_user(admin, "getter", ["ch-0"], password_hash=password_hash)
    quiesce(args.pid)

    # Users, a block of N/10 at a time.
    rss0 = rss_mib(args.pid)
    block_ms, block_rss, block_split = [], [], []
    small = None
    # The same request each time but for the name and channel: built here, out of the timing.
    prefix = '{"password_hash": %s, "admin_channels": ["ch-' % json.dumps(password_hash)
    for b in range(10):
        log("users %d-%d of %d" % (b * block, (b + 1) * block - 1, n))
        t = time.perf_counter()
        for i in range(b * block, (b + 1) * block):
            admin.request("PUT", "/db/_user/user-%d" % i, (prefix + '%d"]}' % (i % CHANNELS)).encode(), ok=(201,))
        block_ms.append((time.perf_counter() - t) * 1000 / block)
        block_rss.append(rss_mib(args.pid))
        block_split.append((rss_mib(args.pid, "RssAnon"), rss_mib(args.pid, "RssFile")))
        log("  %.3f ms per user, RSS %.0f MiB" % (block_ms[-1], block_rss[-1]))
        if b == 0:
            # Bytes written per login while the database is small: users 0-99.
            quiesce(args.pid)
            small = logins_bytes(args.pid, args.port, admin, ["user-%d" % i for i in range(SMALL_LOGINS)])
            log("  %d logins: %.0f bytes written per login (%.0f of them to sockets, %.0f zeros ahead)"
                % (SMALL_LOGINS, small["wchar"] / SMALL_LOGINS, small["sockets"] / SMALL_LOGINS, small["zeros"] / SMALL_LOGINS))
    m = metrics(admin)
    users_metric = metric(m, "settee_database_users", "db")
    file_after_users = metric(m, "settee_database_file_size_bytes", "db")

    # The hash's own cost: users with a plaintext password, and /_metrics.
    log("%d users with a plaintext password" % PLAIN_USERS)
    t = time.perf_counter()
    for i in range(PLAIN_USERS):
        make_user(admin, "plain-%d" % i, ["ch-%d" % i], password=PASSWORD)
    plain_ms = (time.perf_counter() - t) * 1000 / PLAIN_USERS
    m = metrics(admin)
    hashes0 = metric(m, "settee_password_hashes_total")
    hash_seconds0 = metric(m, "settee_password_hash_seconds_total")
    threads = metric(m, "settee_password_hash_threads")
    hash_ms = hash_seconds0 / hashes0 * 1000
    pool_rate = threads / (hash_ms / 1000)

    # GET one document: idle, then under the login storm.
    auth = "Authorization: Basic " + base64.b64encode(("getter:" + PASSWORD).encode()).decode()
    first = Conn(args.port)
    first.request("GET", "/db/chdoc-0", headers=[auth], ok=(200,))  # its credentials checked once
    first.close()
    quiesce(args.pid)
    log("GET for %.0f s, idle" % IDLE_GET_SECONDS)
    loop = GetLoop(args.port, "/db/chdoc-0", auth)
    loop.start()
    time.sleep(IDLE_GET_SECONDS)
    idle = loop.stop()

    # Two sets of 1,000 distinct users spread over blocks 2-10 (never logged in before): the
    # first logs in alone (the rate beside the pool's, and the bytes each login writes: the
    # server's wchar less what it wrote to the sockets), the second with the GET loop running
    # (whose answers, and the event-loop wake-ups each costs, would swamp a login's bytes).
    span = n - block
    alone_names = ["user-%d" % (block + (2 * k) * span // (2 * LOGINS)) for k in range(LOGINS)]
    storm_names = ["user-%d" % (block + (2 * k + 1) * span // (2 * LOGINS)) for k in range(LOGINS)]
    assert len(set(alone_names) | set(storm_names)) == 2 * LOGINS
    quiesce(args.pid)
    log("%d logins, %d at a time, alone" % (LOGINS, LOGIN_CONCURRENCY))
    alone = logins_bytes(args.pid, args.port, admin, alone_names)
    alone_s, alone_ms, alone_hash_ms = alone["seconds"], alone["ms"], alone["hash_ms"]
    m = metrics(admin)
    hashes2, hash_seconds2 = metric(m, "settee_password_hashes_total"), metric(m, "settee_password_hash_seconds_total")

    quiesce(args.pid)
    log("%d logins, %d at a time, with the GET loop running" % (LOGINS, LOGIN_CONCURRENCY))
    loop = GetLoop(args.port, "/db/chdoc-0", auth)
    w0 = wchar(args.pid)
    loop.start()
    storm_s, storm_received, login_ms = login_storm(args.port, storm_names)
    storm = loop.stop()
    time.sleep(0.5)
    storm_written = wchar(args.pid) - w0
    m = metrics(admin)
    storm_hash_ms = (metric(m, "settee_password_hash_seconds_total") - hash_seconds2) / max(1, metric(m, "settee_password_hashes_total") - hashes2) * 1000
    sessions_metric = metric(m, "settee_database_sessions", "db")

    feeds = feeds_phase(args, admin, password_hash)
    m = metrics(admin)
    file_end = metric(m, "settee_database_file_size_bytes", "db")
    users_end = metric(m, "settee_database_users", "db")
    admin.close()
    end_load = loadavg()

    # The table.
    big_per = alone["net"] / LOGINS
    small_per = small["net"] / SMALL_LOGINS
    ratio = block_ms[-1] / block_ms[0]
    rows.append(("scale-user-first", block_ms[0], "ms", "per user, users 0-%d" % (block - 1),
                 "admin PUT /db/_user with a pre-made password_hash, one at a time, keep-alive"))
    for b in range(1, 10):
        rows.append(("scale-user-block-%d" % (b + 1), block_ms[b], "ms", "per user, users %d-%d" % (b * block, (b + 1) * block - 1),
                     "server RSS %.0f MiB after it" % block_rss[b]))
    rows.append(("scale-user-ratio", ratio, "x", "last ÷ first block (target ≤ 1.2)",
                 "ms per user of users %d-%d ÷ users 0-%d" % (n - block, n - 1, block - 1)))
    rows.append(("scale-user-rss", block_rss[-1], "MiB", "after %d users (before: %.0f; after block 1: %.0f)" % (n, rss0, block_rss[0]),
                 "VmRSS after each block: %s; of it anonymous: %s; files mapped (the executable, its libraries, the database): %s"
                 % (" ".join("%.0f" % r for r in block_rss), " ".join("%.0f" % a for a, _ in block_split),
                    " ".join("%.0f" % f for _, f in block_split))))
    rows.append(("scale-user-plain", plain_ms, "ms", "per user; %.1f ms of it the hash" % hash_ms,
                 "%d users with a plaintext password (one PBKDF2-SHA256 of %d rounds each)" % (PLAIN_USERS, ROUNDS)))
    rows.append(("scale-hash", hash_ms, "ms", "%d pool thread(s): %.1f hashes/s" % (threads, pool_rate),
                 "settee_password_hash_seconds_total ÷ hashes_total (%d hashes) before the logins" % hashes0))
    alone_rate, storm_rate = LOGINS / alone_s, LOGINS / storm_s
    rows.append(("scale-logins", alone_rate, "/s", "%.2f × the pool's %.1f/s (target ≥ 0.9)" % (alone_rate / pool_rate, pool_rate),
                 "%d logins of distinct users, %d connections, nothing else running; %.2f × the rate of the hashes' cost during them (%.1f ms each); login p50 %.0f ms, p99 %.0f ms"
                 % (LOGINS, LOGIN_CONCURRENCY, alone_rate / (threads / (alone_hash_ms / 1000)), alone_hash_ms,
                    pct(alone_ms, 50), pct(alone_ms, 99))))
    rows.append(("scale-logins-gets", storm_rate, "/s", "%.2f × the pool's %.1f/s (target ≥ 0.9)" % (storm_rate / pool_rate, pool_rate),
                 "%d more logins, the GET loop running beside them; %.2f × the rate of the hashes' cost during them (%.1f ms each); login p50 %.0f ms, p99 %.0f ms"
                 % (LOGINS, storm_rate / (threads / (storm_hash_ms / 1000)), storm_hash_ms, pct(login_ms, 50), pct(login_ms, 99))))
    rows.append(("scale-login-bytes", big_per, "B", "%.2f × after block 1's %.0f B (target ≈ 1, O(1))" % (big_per / small_per, small_per),
                 "server wchar per login less its socket writes and the zeros written ahead, %d logins alone at %d users "
                 "(wchar %.0f B, sockets %.0f B, zeros %.0f B a login; %d logins at %d users: wchar %.0f, sockets %.0f, zeros %.0f; "
                 "the %d with the GET loop: wchar %.0f B a login)"
                 % (LOGINS, n, alone["wchar"] / LOGINS, alone["sockets"] / LOGINS, alone["zeros"] / LOGINS, SMALL_LOGINS, block,
                    small["wchar"] / SMALL_LOGINS, small["sockets"] / SMALL_LOGINS, small["zeros"] / SMALL_LOGINS, LOGINS, storm_written / LOGINS)))
    idle_p99, storm_p99 = pct(idle, 99), pct(storm, 99)
    rows.append(("scale-get-idle-p99", idle_p99, "ms", "p50 %.2f ms" % pct(idle, 50),
                 "GET one document, Basic auth (verified once), one at a time, %.0f s idle: %d requests" % (IDLE_GET_SECONDS, len(idle))))
    rows.append(("scale-get-logins-p99", storm_p99, "ms", "%.2f × idle p99 (target ≤ 2); p50 %.2f ms" % (storm_p99 / idle_p99, pct(storm, 50)),
                 "the same during the %d logins (%.1f s): %d requests" % (LOGINS, storm_s, len(storm))))
    rows.append(("scale-feeds-rss", feeds["rss_open_mib"], "MiB", "target ≤ 400",
                 "server VmRSS with %d continuous feeds open (%.0f anonymous, %.0f files mapped; %.0f before them; %d users; /_metrics counts %d feeds)"
                 % (FEEDS, feeds["split_open"][0], feeds["split_open"][1], feeds["rss_before_mib"], users_end, feeds["open_feeds_metric"])))
    rows.append(("scale-feeds-all-p99", feeds["all_p99_ms"], "ms", "target < 50; median %.1f ms" % feeds["all_median_ms"],
                 "a write into `common` until all %d feeds have it, %d writes: %s ms"
                 % (FEEDS, FEED_WRITES, " ".join("%.1f" % x for x in feeds["all_each_ms"]))))
    rows.append(("scale-feeds-each-p99", feeds["arrival_p99_ms"], "ms", "one feed's arrival, p99 of %d" % (FEEDS * FEED_WRITES),
                 "each feed's own p99 over the %d writes: median %.1f ms, worst %.1f ms"
                 % (FEED_WRITES, feeds["feed_p99_median_ms"], feeds["feed_p99_max_ms"])))
    rows.append(("scale-feeds-own-p99", feeds["own_p99_ms"], "ms", "median %.1f ms" % feeds["own_median_ms"],
                 "a write into a channel only feeder-0 has, until its feed has it, %d writes" % FEED_WRITES))

    print("%-22s %12s %-4s %-50s %s" % ("figure", "value", "unit", "ratio / target", "method"))
    for name, value, unit, ratio_text, method in rows:
        print("%-22s %12.3f %-4s %-50s %s" % (name, value, unit, ratio_text, method))
    print("scale: %d users (/_metrics: %d users before the plaintext ones, %d sessions after the logins), %d channels; database file %.1f MiB after the users, %.1f MiB at the end; %.0f s in all"
          % (n, users_metric, sessions_metric, CHANNELS, file_after_users / 2**20, file_end / 2**20, time.monotonic() - t_start))
    print("scale: load average (1, 5, 15 min) %s at the start, %s at the end; %d cores%s"
          % (start_load, end_load, os.cpu_count(), "" if not admin.reconnects else "; %d keep-alive reconnects" % admin.reconnects))
    for what, r in (("the %d logins after block 1" % SMALL_LOGINS, small), ("the %d logins alone" % LOGINS, alone)):
        if r["compactions"]:
            print("scale: warning: %d compactions during %s: scale-login-bytes is not a login's bytes alone" % (r["compactions"], what))
    if feeds["stray"]:
        print("scale: ERROR: documents reached feeds that do not have their channel: %s" % feeds["stray"][:10])
    sys.stdout.flush()

    if args.json:
        try:
            with open(args.json) as f:
                doc = json.load(f)
        except (FileNotFoundError, ValueError):
            doc = {"results": []}
        doc.setdefault("results", [])
        doc["results"] = [r for r in doc["results"] if not str(r.get("figure", "")).startswith("scale-")]
        doc["results"] += [{"figure": name, "value": value, "unit": unit} for name, value, unit, _, _ in rows]
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    if feeds["stray"]:
        raise BenchError("%d documents reached feeds outside their channels" % len(feeds["stray"]))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, required=True, help="the public port")
    p.add_argument("--admin", type=int, required=True, help="the admin port")
    p.add_argument("--pid", type=int, required=True, help="the server's process ID")
    p.add_argument("--users", type=int, default=100000, help="users made (a multiple of 10, at least 3000)")
    p.add_argument("--json", default="", help="add the figures to this JSON file's results")
    args = p.parse_args()
    if args.users < 3000 or args.users % 10:
        p.error("--users must be a multiple of 10, at least 3000")
    sys.setswitchinterval(0.0005)  # the GET thread waits less for the interpreter's lock
    try:
        run(args)
    except BenchError as e:
        alive = os.path.exists("/proc/%d" % args.pid)
        print("bench-http-scale: FAILED: %s%s" % (e, "" if alive else " (the server process has ended)"), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
