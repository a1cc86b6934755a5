"""A small JSON-RPC 2.0 client for `meshc lsp` over stdio (Content-Length framing), for
tests/lsp/test_lsp.py and tests/bench/lsp/bench_lsp.py. Messages from the server are read
by a thread into a queue, so a test can wait for a response or a notification with a
timeout."""
import json
import os
import queue
import subprocess
import threading
import time


class LspClient:
    def __init__(self, meshc, args=(), env=None, stderr=None):
        self.proc = subprocess.Popen([meshc, "lsp", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=stderr if stderr is not None else subprocess.DEVNULL, env=env)
        self.next_id = 1
        self.inbox = queue.Queue()
        self.pending = []  # messages read but not yet claimed
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    # ---------------------------------------------------------------- wire
    def _read(self):
        out = self.proc.stdout
        while True:
            headers = {}
            while True:
                line = out.readline()
                if not line:
                    self.inbox.put(None)
                    return
                line = line.strip()
                if not line:
                    break
                k, _, v = line.decode().partition(":")
                headers[k.strip().lower()] = v.strip()
            n = int(headers["content-length"])
            body = out.read(n)
            self.inbox.put(json.loads(body))

    def send_raw(self, data: bytes):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message):
        body = json.dumps(message).encode()
        self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method, params=None):
        self.send({"jsonrpc": "2.0", "method": method, "params": params or {}})

    def request_async(self, method, params=None):
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params if params is not None else {}})
        return rid

    def wait(self, predicate, timeout=60):
        """The first message (read or already pending) satisfying predicate."""
        for i, m in enumerate(self.pending):
            if predicate(m):
                return self.pending.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no matching message from the server")
            try:
                m = self.inbox.get(timeout=left)
            except queue.Empty:
                raise TimeoutError("no matching message from the server")
            if m is None:
                raise EOFError("the server closed its output")
            if predicate(m):
                return m
            self.pending.append(m)

    def response(self, rid, timeout=60):
        return self.wait(lambda m: m.get("id") == rid and "method" not in m, timeout)

    def request(self, method, params=None, timeout=60):
        m = self.response(self.request_async(method, params), timeout)
        if "error" in m:
            raise RuntimeError(f"{method}: {m['error']}")
        return m["result"]

    def diagnostics(self, uri, version=None, timeout=60):
        def match(m):
            if m.get("method") != "textDocument/publishDiagnostics":
                return False
            p = m["params"]
            return p["uri"] == uri and (version is None or p.get("version") == version)
        return self.wait(match, timeout)["params"]["diagnostics"]

    # ---------------------------------------------------------------- LSP
    def initialize(self, options=None, encodings=None):
        caps = {}
        if encodings:
            caps["general"] = {"positionEncodings": encodings}
        result = self.request("initialize", {"processId": os.getpid(), "rootUri": None, "capabilities": caps,
                                             "initializationOptions": options or {}})
        self.notify("initialized", {})
        return result

    def open(self, uri, text, version=1):
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "mesh", "version": version,
                                                              "text": text}})

    def change_full(self, uri, text, version):
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                               "contentChanges": [{"text": text}]})

    def change_range(self, uri, version, start, end, text):
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                               "contentChanges": [{"range": {"start": {"line": start[0], "character": start[1]},
                                                                             "end": {"line": end[0], "character": end[1]}},
                                                                   "text": text}]})

    def at(self, method, uri, line, character, **extra):
        params = {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}
        params.update(extra)
        return self.request(method, params)

    def close(self, timeout=30):
        try:
            self.request("shutdown", None, timeout=timeout)
            self.notify("exit")
        except (BrokenPipeError, EOFError, TimeoutError):
            pass
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return -9


def uri_of(path):
    from urllib.parse import quote
    return "file://" + quote(os.path.abspath(path))


def position_of(text, needle, occurrence=0, delta=0):
    """(line, character) of the occurrence-th `needle` in text, plus delta characters (ASCII)."""
    at = -1
    for _ in range(occurrence + 1):
        at = text.index(needle, at + 1)
    at += delta
    line = text.count("\n", 0, at)
    return line, at - (text.rfind("\n", 0, at) + 1)
